"""The no-JIT guarantee's switch, on its own so that tilec.load can read it without importing the runtime."""

from __future__ import annotations

import os


def no_jit_requested(no_jit: bool | None) -> bool:
    """The no-JIT guarantee's switch: the argument when given, else the environment's TILEC_NO_JIT (set, not "0")."""
    if no_jit is not None:
        return no_jit
    return os.environ.get("TILEC_NO_JIT", "") not in ("", "0")
