"""Reading the text of tilec's `print` back (tilec/ops/print.py gives the format): for comparing a device's
output with the interpreter's where values may differ in the last digits (f32 sums in another order), and
where concurrent blocks interleave their lines. Standard library only (it runs on the GPU machine too)."""

from __future__ import annotations


def print_lines(text: str) -> dict[str, list[float]]:
    """{line's prefix up to ': ' (block, thread, label, buffer and index): its values}, for every printed line;
    a prefix seen twice (a print in a loop) keeps its lines in order under `prefix #n`."""
    out: dict[str, list[float]] = {}
    for line in text.splitlines():
        head, sep, values = line.rpartition(": ")
        if not sep or not line.startswith("[block ("):
            continue
        key, n = head, 1
        while key in out:
            n += 1
            key = f"{head} #{n}"
        out[key] = [float(v) for v in values.split()]
    return out


def compare_prints(got: str, want: str, rtol: float = 0.0, atol: float = 0.0) -> list[str]:
    """What differs between two print outputs (empty: the same lines, in any order, values within tolerance)."""
    g, w = print_lines(got), print_lines(want)
    problems = [f"missing: {k}" for k in w if k not in g] + [f"unexpected: {k}" for k in g if k not in w]
    for k in w.keys() & g.keys():
        a, b = g[k], w[k]
        if len(a) != len(b) or any(abs(x - y) > atol + rtol * abs(y) and not (x != x and y != y)
                                   for x, y in zip(a, b, strict=False)):
            problems.append(f"{k}: got {a}, want {b}")
    return sorted(problems)
