"""The compile cache: content-addressed, atomic, safe under `make -j` and concurrent processes.

Import-light on purpose (hashlib, json, os only): the command line looks an entry up *before*
importing the compiler, so that a hit costs a Python start-up and a few file reads.

Two levels, because the imports of a `.tile` file are only known after parsing it:

* key1 = hash(main file's text and path, every option that can change the output, tilec's own
  sources, the toolchain's identity). It names a directory of entries.
* each entry in it records the files the compile read (the main file and every import) with their
  hashes, and the import candidates that did *not* exist then (an import is looked up next to the
  importing file, then in each -I directory: creating a file earlier on that path changes what is
  imported). An entry is a hit only when every recorded file still has its hash and every absent
  candidate is still absent.

An entry is one file, written to a temporary name and renamed into place (os.replace), so it is
complete or absent; its payload also carries SHA-256 sums, and an entry that fails them (a torn
write on a file system without atomic rename) is deleted and treated as a miss. Concurrent writers
of the same entry write identical bytes under the same name, and the last rename wins.

Layout under the cache directory (TILEC_CACHE_DIR, else $XDG_CACHE_HOME/tilec, else
~/.cache/tilec):

    v1/entries/ab/ab12…(key1)/cd34…(key2).entry
    v1/tmp/…                    partial writes (a killed compile leaves one here; never read)
    v1/stats/hits, misses       one byte appended per lookup (O_APPEND: atomic, lock-free)
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path

FORMAT = "v1"
MAGIC = b"TILEC-CACHE 1\n"
TMP_MAX_AGE_S = 3600.0  # partial writes older than this are removed by the next store


def default_dir() -> Path:
    env = os.environ.get("TILEC_CACHE_DIR")
    if env:
        return Path(env)
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg) if xdg and os.path.isabs(xdg) else Path.home() / ".cache"
    return base / "tilec"


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def file_digest(path: str) -> str | None:
    """SHA-256 of a file's bytes, or None when it cannot be read."""
    try:
        with open(path, "rb") as f:
            return hashlib.sha256(f.read()).hexdigest()
    except OSError:
        return None


_TILEC_FINGERPRINT: str | None = None


def tilec_fingerprint() -> str:
    """A hash of tilec's own sources (the .py files, the grammar, the device headers), so that a
    changed compiler never serves an old entry, whatever its version number says."""
    global _TILEC_FINGERPRINT
    if _TILEC_FINGERPRINT is None:
        root = Path(__file__).resolve().parent
        h = hashlib.sha256()
        paths = []
        for dirpath, dirnames, filenames in os.walk(root):
            dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
            for name in filenames:
                if name.endswith((".py", ".lark", ".h", ".cuh")):
                    paths.append(os.path.join(dirpath, name))
        for p in sorted(paths):
            h.update(os.path.relpath(p, root).encode() + b"\0")
            with open(p, "rb") as f:
                h.update(hashlib.sha256(f.read()).digest())
        _TILEC_FINGERPRINT = h.hexdigest()
    return _TILEC_FINGERPRINT


def executable_fingerprint(path: str) -> str:
    """Identity of a toolchain executable without running it: its resolved path, size and mtime,
    and its bytes when it is small (a wrapper script that execs the real compiler)."""
    real = os.path.realpath(path)
    st = os.stat(real)
    parts = [real, str(st.st_size), str(st.st_mtime_ns)]
    if st.st_size <= 64 * 1024:
        parts.append(file_digest(real) or "")
        # a wrapper script names the real compiler: follow one level of `exec /path/to/tool`
        try:
            with open(real, "rb") as f:
                head = f.read(4096)
        except OSError:
            head = b""
        if head.startswith(b"#!"):
            for tok in head.split():
                t = tok.decode(errors="replace").strip("\"'")
                if t.startswith("/") and t != real and os.path.isfile(t) and os.access(t, os.X_OK):
                    st2 = os.stat(os.path.realpath(t))
                    parts += [os.path.realpath(t), str(st2.st_size), str(st2.st_mtime_ns)]
    return "|".join(parts)


@dataclass
class Entry:
    path: Path
    meta: dict
    outputs: dict[str, bytes] = field(default_factory=dict)


class Cache:
    def __init__(self, root: str | Path | None = None):
        self.root = Path(root) if root is not None else default_dir()
        self.base = self.root / FORMAT

    # ------------------------------------------------------------------ lookup
    def _dir(self, key1: str) -> Path:
        return self.base / "entries" / key1[:2] / key1

    def lookup(self, key1: str) -> Entry | None:
        """The entry for key1 whose recorded inputs all still match, or None. Counts a hit or a miss."""
        d = self._dir(key1)
        try:
            names = [n for n in os.listdir(d) if n.endswith(".entry")]
        except OSError:
            names = []
        candidates = []
        for n in names:
            try:
                candidates.append((os.stat(d / n).st_mtime_ns, n))
            except OSError:
                continue
        for _, n in sorted(candidates, reverse=True):  # newest first
            entry = self._read(d / n)
            if entry is not None and _inputs_unchanged(entry.meta):
                self._count("hits")
                try:
                    os.utime(d / n)  # recently used (for a future size-limited eviction)
                except OSError:
                    pass
                return entry
        self._count("misses")
        return None

    def _read(self, path: Path) -> Entry | None:
        try:
            data = path.read_bytes()
        except OSError:
            return None
        try:
            if not data.startswith(MAGIC):
                raise ValueError("bad magic")
            nl = data.index(b"\n", len(MAGIC))
            meta = json.loads(data[len(MAGIC):nl])
            payload = data[nl + 1:]
            if sha256_bytes(payload) != meta["payload_sha256"] or len(payload) != meta["payload_size"]:
                raise ValueError("checksum")
            outputs = {}
            pos = 0
            for o in meta["outputs"]:
                outputs[o["name"]] = payload[pos:pos + o["size"]]
                pos += o["size"]
            return Entry(path, meta, outputs)
        except (ValueError, KeyError, TypeError, json.JSONDecodeError):
            # torn or foreign: never serve it, and get it out of the way
            try:
                path.unlink()
            except OSError:
                pass
            return None

    # ------------------------------------------------------------------ store
    def store(self, key1: str, deps: list[str], absent: list[str], outputs: dict[str, bytes],
              info: dict | None = None, digests: dict[str, str] | None = None) -> Path | None:
        """Record a compile's outputs. `deps` are the files it read, with their SHA-256 in
        `digests` (taken from what the compiler read; else the files are hashed now), `absent` the
        import candidates that did not exist. Best effort: a cache that cannot be written never
        fails a build."""
        dep_hashes = []
        for p in deps:
            digest = digests.get(p) if digests is not None else file_digest(p)
            if digest is None:
                return None
            dep_hashes.append([os.path.abspath(p), digest])
        absent = sorted({os.path.abspath(p) for p in absent})
        key2 = sha256_bytes(json.dumps([dep_hashes, absent]).encode())
        names = sorted(outputs)
        payload = b"".join(outputs[n] for n in names)
        meta = {"key1": key1, "deps": dep_hashes, "absent": absent, "created": int(time.time()),
                "outputs": [{"name": n, "size": len(outputs[n]), "sha256": sha256_bytes(outputs[n])} for n in names],
                "payload_size": len(payload), "payload_sha256": sha256_bytes(payload), "info": info or {}}
        data = MAGIC + json.dumps(meta, sort_keys=True).encode() + b"\n" + payload
        final = self._dir(key1) / f"{key2}.entry"
        try:
            tmpdir = self.base / "tmp"
            tmpdir.mkdir(parents=True, exist_ok=True)
            final.parent.mkdir(parents=True, exist_ok=True)
            self._sweep_tmp(tmpdir)
            write_atomic(final, data, tmpdir)
            return final
        except OSError:
            return None

    def _sweep_tmp(self, tmpdir: Path) -> None:
        now = time.time()
        try:
            for n in os.listdir(tmpdir):
                p = tmpdir / n
                try:
                    if now - p.stat().st_mtime > TMP_MAX_AGE_S:
                        p.unlink()
                except OSError:
                    pass
        except OSError:
            pass

    def _count(self, what: str) -> None:
        try:
            d = self.base / "stats"
            d.mkdir(parents=True, exist_ok=True)
            fd = os.open(d / what, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
            try:
                os.write(fd, b".")
            finally:
                os.close(fd)
        except OSError:
            pass

    # ------------------------------------------------------------------ maintenance
    def stats(self) -> dict:
        entries = size = tmp = 0
        for dirpath, _, filenames in os.walk(self.base / "entries"):
            for n in filenames:
                try:
                    s = os.stat(os.path.join(dirpath, n)).st_size
                except OSError:
                    continue
                if n.endswith(".entry"):
                    entries += 1
                    size += s
        try:
            tmp = len(os.listdir(self.base / "tmp"))
        except OSError:
            pass

        def count(name: str) -> int:
            try:
                return os.stat(self.base / "stats" / name).st_size
            except OSError:
                return 0

        return {"dir": str(self.root), "entries": entries, "bytes": size, "hits": count("hits"),
                "misses": count("misses"), "partial_writes": tmp}

    def clear(self) -> int:
        """Remove every entry, partial write and counter; returns the number of entries removed."""
        n = self.stats()["entries"]
        if self.base.exists():
            # rename first, so that a concurrent compile sees an empty cache rather than a half-deleted one
            trash = self.root / f".trash-{os.getpid()}-{time.time_ns()}"
            try:
                os.replace(self.base, trash)
            except OSError:
                trash = self.base
            shutil.rmtree(trash, ignore_errors=True)
        return n


def _inputs_unchanged(meta: dict) -> bool:
    for path, digest in meta.get("deps", []):
        if file_digest(path) != digest:
            return False
    return not any(os.path.exists(p) for p in meta.get("absent", []))


def write_atomic(path: str | os.PathLike, data: bytes, tmpdir: str | os.PathLike | None = None) -> None:
    """Write `data` to `path` so that readers see the old file, or the whole new one, never a part:
    write a unique temporary file (in `tmpdir` or beside `path`, on the same file system), flush
    it, then rename it over `path`."""
    path = os.fspath(path)
    d = os.fspath(tmpdir) if tmpdir is not None else (os.path.dirname(path) or ".")
    tmp = os.path.join(d, f".{os.path.basename(path)}.{os.getpid()}.{time.time_ns()}.tmp")
    try:
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
