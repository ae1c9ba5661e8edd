"""-R / -Rpass=CATEGORY (compile_flags.py): print a build's remarks, read from its manifest (so that a cache hit
prints them too)."""

from __future__ import annotations

import json
import re
import sys


def print_remarks(manifest: bytes, args) -> None:
    """Each remark of the manifest as `file:line:col: remark: message [-Rpass=category]` with its source line."""
    from ..diagnostics import Diagnostic, SourceManager, Span
    from .common import print_diagnostics

    if not manifest:
        return
    try:
        meta = json.loads(manifest)
    except ValueError:
        return
    remarks = meta.get("remarks", [])
    wanted = re.compile(args.remarks_filter) if getattr(args, "remarks_filter", None) else None
    sources = SourceManager()
    diags = []
    for r in remarks:
        if wanted is not None and not wanted.search(r.get("category", "")):
            continue
        span = Span(r["file"], r["line"], r["column"]) if "file" in r else None
        if span is not None and sources.text(span.file) is None:
            try:
                with open(span.file, encoding="utf-8", errors="replace") as f:
                    sources.add(span.file, f.read())
            except OSError:
                pass
        diags.append(Diagnostic("remark", r["message"], span, category=r.get("category", "")))
    if not diags:
        # silence would not tell "nothing to remark" from "-R was ignored"
        asked = f" matching -Rpass={args.remarks_filter}" if wanted is not None else ""
        diags.append(Diagnostic("remark", f"no remarks{asked} for {meta.get('target', 'this target')}: nothing "
                                f"to report in {', '.join(CATEGORIES)}",
                                Span(args.file, 1, 1) if getattr(args, "file", None) else None))
    print_diagnostics(diags, sources, args)
    sys.stderr.flush()


# what the passes remark on (diagnostics' remark(category, ...) calls; bank-conflicts: tilec/inspect/remarks.py)
CATEGORIES = ("tensor-cores", "tma", "pipeline", "cluster", "bank-conflicts")
