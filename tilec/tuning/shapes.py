"""The shapes a tuning run times: `--size M=4096,N=4096,K=4096` items and named sets (`--shapes llm-gemm`)."""

from __future__ import annotations

import itertools

# GEMM shapes of common LLM layers (N x K of the weight, as in Llama-7B/70B-class models) at token counts from
# one decode batch to a long prefill; plus squares and a ragged shape.
_LLM_NK = [(4096, 4096), (11008, 4096), (4096, 11008), (28672, 8192)]
_LLM_M = [128, 1024, 4096, 16384]

NAMED: dict[str, list[dict[str, int]]] = {
    "llm-gemm": [{"M": m, "N": n, "K": k} for (n, k), m in itertools.product(_LLM_NK, _LLM_M)],
    "square-gemm": [{"M": s, "N": s, "K": s} for s in (1000, 2048, 4096, 8192)],
    # Rows of 128 to 65536 elements; row counts from a decode batch to a prefill; and the short rows (hidden sizes of
    # 768 to 3072) of small models at a hundred to a few thousand tokens, whose rows fit one block or less.
    "rows": [{"M": m, "N": n} for m, n in [(4096, 128), (4096, 1024), (4096, 2048), (4096, 4096), (4096, 8192),
                                           (32768, 8192), (4096, 16384), (4096, 50257), (1024, 65536), (64, 4096),
                                           (256, 768), (1024, 1024), (2048, 1536), (512, 2560), (8192, 3072),
                                           (128, 2048)]],
    # (batch, sequence, heads) for attention at head dims the kernel fixes with -D dim=...: long prefills, short
    # prompts whose few query tiles per head leave the tile size, not the loop, to decide the time, and decode steps
    # (S = 1) of a small and a large batch
    "attention": [{"B": 4, "S": 4096, "H": 32}, {"B": 4, "S": 8192, "H": 32}, {"B": 2, "S": 16384, "H": 16},
                  {"B": 8, "S": 1024, "H": 32}, {"B": 16, "S": 16, "H": 32}, {"B": 8, "S": 128, "H": 32},
                  {"B": 16, "S": 512, "H": 16}, {"B": 4, "S": 1, "H": 32}, {"B": 32, "S": 1, "H": 32}],
}


class ShapeError(ValueError):
    pass


def parse_size(text: str) -> dict[str, int]:
    """`M=4096,N=4096,K=4096` as a dict; ShapeError for anything else."""
    out: dict[str, int] = {}
    for item in text.split(","):
        name, eq, value = item.strip().partition("=")
        if not eq or not name.isidentifier():
            raise ShapeError(f"--size {text}: expected NAME=VALUE[,NAME=VALUE...]")
        try:
            out[name] = int(value, 0)
        except ValueError:
            raise ShapeError(f"--size {text}: '{value}' is not an integer") from None
        if out[name] <= 0:
            raise ShapeError(f"--size {text}: {name} must be positive")
    return out


def resolve(sizes: list[str], named: list[str]) -> list[dict[str, int]]:
    """The shapes of `--size` items and `--shapes` names, in order, without repeats."""
    shapes = [parse_size(s) for s in sizes]
    for n in named:
        if n not in NAMED:
            raise ShapeError(f"--shapes {n}: unknown shape set (known: {', '.join(NAMED)})")
        shapes += NAMED[n]
    seen, out = set(), []
    for s in shapes:
        key = tuple(sorted(s.items()))
        if key not in seen:
            seen.add(key)
            out.append(s)
    return out


def label(shape: dict[str, int]) -> str:
    return ",".join(f"{k}={v}" for k, v in shape.items())
