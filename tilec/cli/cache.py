"""`tilec cache stats|clear`: inspect or empty the compile cache (tilec/cache.py)."""

from __future__ import annotations

from typing import Annotated, Literal

import typer

from . import params as p


def command(
    action: Annotated[Literal["stats", "clear"], typer.Argument(metavar="ACTION", help="stats: where the cache "
                                                                 "is, its size, hits and misses; clear: empty it.")],
) -> None:
    """Inspect or empty the compile cache (TILEC_CACHE_DIR, default $XDG_CACHE_HOME/tilec or ~/.cache/tilec)."""
    p.finish(run(action))


def run(action: str) -> int:
    from ..cache import Cache

    cache = Cache()
    if action == "clear":
        n = cache.clear()
        print(f"removed {n} entr{'y' if n == 1 else 'ies'} from {cache.root}")
        return 0
    st = cache.stats()
    lookups = st["hits"] + st["misses"]
    rate = f" ({100.0 * st['hits'] / lookups:.0f}% hits)" if lookups else ""
    print(f"cache directory   {st['dir']}")
    print(f"entries           {st['entries']}")
    print(f"size              {st['bytes']} bytes ({st['bytes'] / 2**20:.1f} MiB)")
    print(f"hits              {st['hits']}{rate}")
    print(f"misses            {st['misses']}")
    pr = st["programs"]
    print(f"programs          {pr['entries']} ({pr['bytes'] / 2**20:.1f} MiB; the device toolchain's results: "
          f"{pr['hits']} hits, {pr['misses']} misses)")
    print(f"partial writes    {st['partial_writes']} (left by interrupted compiles; never read)")
    return 0
