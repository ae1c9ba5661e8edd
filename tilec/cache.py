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
    v1/programs/ef/ef56…/….entry  the device toolchain's own results (section "programs", below)
    v1/tmp/…                    partial writes (a killed compile leaves one here; never read)
    v1/stats/hits, misses       one byte appended per lookup (O_APPEND: atomic, lock-free)

The section "programs" (`Cache(section="programs")`) holds what a device toolchain made of one generated
program (NVRTC: the binary and its log), keyed by the program's text, the toolchain's flags and identity
only -- not by tilec's sources or the .tile file -- so that a compile whose generated code is unchanged (another
output kind or name, a tilec edit that leaves the code alone, a rebuilt artifact) skips the toolchain. Its
entries have the same format and checks, and share the size bound (least recently used first, across both
sections); `stats()` counts them apart and `clear()` removes them too.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import stat
import time
from dataclasses import dataclass, field
from pathlib import Path

FORMAT = "v1"
SECTIONS = ("entries", "programs")
MAGIC = b"TILEC-CACHE 2\n"  # entries of format 1 (no metadata checksum) are evicted on sight
DEFAULT_MAX_BYTES = 2 << 30
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
    """SHA-256 of a regular file's bytes, or None when it cannot be read (or is a FIFO or a device,
    whose reading could block)."""
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):
            return None
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
                if name.endswith((".py", ".lark", ".h", ".cuh", ".js")):
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


class BadEntry(Exception):
    """An entry that fails a check: it is deleted and the lookup goes on as if it were absent."""


def max_bytes() -> int:
    """The cache's size bound: TILEC_CACHE_MAX_BYTES (a number of bytes, suffixes K M G allowed;
    0 = no bound), default 2 GiB. A bad value means the default, never an error."""
    text = os.environ.get("TILEC_CACHE_MAX_BYTES", "").strip().upper()
    scale = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(text[-1:], 1) if text else 1
    try:
        n = int(float(text.rstrip("KMGB") or "nan") * scale) if text else DEFAULT_MAX_BYTES
    except (ValueError, OverflowError):
        return DEFAULT_MAX_BYTES
    return max(n, 0)


def _is_hex64(x) -> bool:
    return isinstance(x, str) and len(x) == 64 and all(c in "0123456789abcdef" for c in x)


def _is_size(x) -> bool:
    return isinstance(x, int) and not isinstance(x, bool) and x >= 0


def decode_entry(data: bytes, path: Path) -> Entry:
    """Parse and verify one entry file; raises BadEntry for anything short of perfect: magic, the
    metadata's own checksum, every field's type, the payload's size and hash, and each output's
    size and hash (so an entry whose sizes were edited serves nothing, not a cut artifact)."""
    if not data.startswith(MAGIC):
        raise BadEntry("bad magic")
    try:
        nl1 = data.index(b"\n", len(MAGIC))
        nl2 = data.index(b"\n", nl1 + 1)
    except ValueError:
        raise BadEntry("truncated header") from None
    meta_sum = data[len(MAGIC):nl1].decode("ascii", "replace")
    meta_bytes = data[nl1 + 1:nl2]
    if sha256_bytes(meta_bytes) != meta_sum:
        raise BadEntry("metadata checksum")
    try:
        meta = json.loads(meta_bytes)
    except (ValueError, RecursionError):
        raise BadEntry("metadata is not JSON") from None
    if not isinstance(meta, dict):
        raise BadEntry("metadata is not an object")
    deps, absent, outs, info = meta.get("deps"), meta.get("absent"), meta.get("outputs"), meta.get("info")
    if not (isinstance(deps, list) and all(isinstance(d, list) and len(d) == 2 and isinstance(d[0], str)
                                           and _is_hex64(d[1]) for d in deps)):
        raise BadEntry("deps")
    if not (isinstance(absent, list) and all(isinstance(a, str) for a in absent)):
        raise BadEntry("absent")
    if not isinstance(info, dict) or not isinstance(meta.get("key1"), str):
        raise BadEntry("info/key1")
    if not (isinstance(outs, list) and all(isinstance(o, dict) and isinstance(o.get("name"), str)
                                           and _is_size(o.get("size")) and _is_hex64(o.get("sha256"))
                                           for o in outs)):
        raise BadEntry("outputs")
    payload = data[nl2 + 1:]
    if len(payload) != meta.get("payload_size") or sum(o["size"] for o in outs) != len(payload):
        raise BadEntry("payload size")
    if sha256_bytes(payload) != meta.get("payload_sha256"):
        raise BadEntry("payload checksum")
    outputs: dict[str, bytes] = {}
    pos = 0
    for o in outs:
        blob = payload[pos:pos + o["size"]]
        pos += o["size"]
        if sha256_bytes(blob) != o["sha256"] or o["name"] in outputs:
            raise BadEntry(f"output {o['name']}")
        outputs[o["name"]] = blob
    return Entry(path, meta, outputs)


def encode_entry(meta: dict, outputs: dict[str, bytes]) -> bytes:
    """The bytes of an entry: magic, the metadata's SHA-256, the metadata (one JSON line), then
    the outputs one after another (their names, sizes and hashes are in the metadata)."""
    names = sorted(outputs)
    payload = b"".join(outputs[n] for n in names)
    meta = dict(meta, outputs=[{"name": n, "size": len(outputs[n]), "sha256": sha256_bytes(outputs[n])}
                               for n in names],
                payload_size=len(payload), payload_sha256=sha256_bytes(payload))
    meta_bytes = json.dumps(meta, sort_keys=True).encode()
    return MAGIC + sha256_bytes(meta_bytes).encode() + b"\n" + meta_bytes + b"\n" + payload


class Cache:
    def __init__(self, root: str | Path | None = None, limit: int | None = None, section: str = "entries"):
        if section not in SECTIONS:
            raise ValueError(f"no cache section {section!r}")
        self.root = Path(root) if root is not None else default_dir()
        self.base = self.root / FORMAT
        self.limit = max_bytes() if limit is None else limit
        self.section = section

    # ------------------------------------------------------------------ lookup
    def _dir(self, key1: str) -> Path:
        return self.base / self.section / key1[:2] / key1

    def lookup(self, key1: str, require: tuple[str, ...] = (), check_info=None) -> Entry | None:
        """The entry for key1 whose recorded inputs all still match, or None. Counts a hit or a miss.
        `require` names outputs a usable entry must have, `check_info(info) -> bool` vets the
        caller's own record. An entry that fails any check (see decode_entry) is deleted; nothing
        here raises."""
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
            entry = self._read(d / n, key1, require, check_info)
            if entry is not None and _inputs_unchanged(entry.meta):
                self._count("hits")
                try:
                    os.utime(d / n)  # recently used: the size bound evicts the least recently used
                except OSError:
                    pass
                return entry
        self._count("misses")
        return None

    def _read(self, path: Path, key1: str | None = None, require: tuple[str, ...] = (),
              check_info=None) -> Entry | None:
        try:
            entry = decode_entry(path.read_bytes(), path)
            if key1 is not None and entry.meta["key1"] != key1:
                raise BadEntry("stored under another key")
            missing = [r for r in require if r not in entry.outputs]
            if missing:
                raise BadEntry(f"no {missing[0]}")
            if check_info is not None and not check_info(entry.meta["info"]):
                raise BadEntry("info")
            return entry
        except FileNotFoundError:
            return None  # evicted or cleared by another process meanwhile
        except (BadEntry, OSError, ValueError, KeyError, TypeError, MemoryError):
            # torn, edited, unreadable or foreign: never serve it, and get it out of the way
            self.evict(path)
            return None

    def evict(self, path: str | os.PathLike) -> None:
        """Delete one entry (a bad one, or the least recently used); best effort."""
        try:
            os.unlink(path)
        except IsADirectoryError:  # something else squatting on an entry's name
            shutil.rmtree(path, ignore_errors=True)
        except OSError:
            pass

    # ------------------------------------------------------------------ store
    def store(self, key1: str, deps: list[str], absent: list[str], outputs: dict[str, bytes],
              info: dict | None = None, digests: dict[str, str] | None = None) -> Path | None:
        """Record a compile's outputs. `deps` are the files it read, with their SHA-256 in
        `digests` (taken from what the compiler read; else the files are hashed now), `absent` the
        import candidates that did not exist. Best effort: a cache that cannot be written never
        fails a build. Afterwards the least recently used entries go until the cache fits its bound."""
        dep_hashes = []
        for p in deps:
            digest = digests.get(p) if digests is not None else file_digest(p)
            if digest is None:
                return None
            dep_hashes.append([os.path.abspath(p), digest])
        absent = sorted({os.path.abspath(p) for p in absent})
        key2 = sha256_bytes(json.dumps([dep_hashes, absent]).encode())
        meta = {"key1": key1, "deps": dep_hashes, "absent": absent, "created": int(time.time()), "info": info or {}}
        data = encode_entry(meta, outputs)
        if self.limit and len(data) > self.limit:
            return None  # larger than the whole cache
        final = self._dir(key1) / f"{key2}.entry"
        tmpdir = self.base / "tmp"
        for _ in range(2):  # a concurrent eviction may remove the directory between mkdir and rename
            try:
                tmpdir.mkdir(parents=True, exist_ok=True)
                final.parent.mkdir(parents=True, exist_ok=True)
                self._sweep_tmp(tmpdir)
                write_atomic(final, data, tmpdir)
                break
            except FileNotFoundError:
                continue
            except OSError:
                return None
        else:
            return None
        if self.limit:
            self.shrink(self.limit, keep=final)
        return final

    def shrink(self, limit: int, keep: Path | None = None) -> int:
        """Evict the least recently used entries (oldest modification time: a hit touches its
        entry) until the entries total at most 90% of `limit` bytes when they exceed `limit`.
        Returns the number evicted. Safe beside other processes: a reader holding an evicted
        entry open still reads it whole; a lookup that lists it and finds it gone sees a miss."""
        found = []
        total = 0
        for dirpath, _, filenames in (w for sec in SECTIONS for w in os.walk(self.base / sec)):
            for n in filenames:
                if not n.endswith(".entry"):
                    continue
                p = os.path.join(dirpath, n)
                try:
                    st = os.stat(p)
                except OSError:
                    continue
                total += st.st_size
                found.append((st.st_mtime_ns, st.st_size, p))
        if total <= limit:
            return 0
        evicted = 0
        for _, size, p in sorted(found):
            if total <= limit * 0.9:
                break
            if keep is not None and os.path.abspath(p) == os.path.abspath(keep):
                continue
            self.evict(p)
            try:
                os.rmdir(os.path.dirname(p))  # the key's directory, when this was its last entry
            except OSError:
                pass
            total -= size
            evicted += 1
        return evicted

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
        if self.section != "entries":
            what = f"{self.section}-{what}"
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
        """The artifacts' entries, bytes, hits and misses; the same of the section "programs" under `programs`."""
        tmp = 0

        def walk(section: str) -> tuple[int, int]:
            entries = size = 0
            for dirpath, _, filenames in os.walk(self.base / section):
                for n in filenames:
                    try:
                        s = os.stat(os.path.join(dirpath, n)).st_size
                    except OSError:
                        continue
                    if n.endswith(".entry"):
                        entries += 1
                        size += s
            return entries, size

        entries, size = walk("entries")
        programs, program_bytes = walk("programs")
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
                "misses": count("misses"), "partial_writes": tmp,
                "programs": {"entries": programs, "bytes": program_bytes, "hits": count("programs-hits"),
                             "misses": count("programs-misses")}}

    def clear(self) -> int:
        """Remove every entry, partial write and counter; returns the number of entries removed."""
        st = self.stats()
        n = st["entries"] + st["programs"]["entries"]
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
    try:
        for path, digest in meta.get("deps", []):
            if file_digest(path) != digest:
                return False
        return not any(os.path.exists(p) for p in meta.get("absent", []))
    except (ValueError, TypeError):  # a path no file system accepts: not a match
        return False


def write_atomic(path: str | os.PathLike, data: bytes, tmpdir: str | os.PathLike | None = None) -> None:
    """Write `data` to `path` so that readers see the old file, or the whole new one, never a part:
    write a unique temporary file (in `tmpdir` or beside `path`, on the same file system; created
    exclusively, its name short enough for any file system), flush it, then rename it over `path`."""
    path = os.fspath(path)
    d = os.fspath(tmpdir) if tmpdir is not None else (os.path.dirname(path) or ".")
    tmp = os.path.join(d, f".{os.path.basename(path)[:96]}.{os.getpid()}.{time.time_ns()}.tmp")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
