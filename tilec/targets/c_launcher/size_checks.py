"""`K_check_sizes`: the C launcher's explanation of a size contract its `K_launch` refuses.

`K_launch` returns CUDA_ERROR_INVALID_VALUE (the HIP launcher: hipErrorInvalidValue) for a negative size or a failed
launch check (a view that does not fit its tensor, a kernel's `assert` on its sizes, a product of sizes past 32
bits: docs/deploy.md#launch-checks). This function runs the same checks, in the same order, without touching the
driver, and writes the sentence tilec.runtime's ArgumentError gives for the same sizes:

    flat: view 'A2' (f32[K]) of 'A' (f32[M, N]) must fit inside its storage: (4 * K) = 52, ((4 * M) * N) = 48
          (sizes M=3, N=4, K=13)                                             (one line)
    gemm: size K = -1 is negative

so a C or C++ caller can report which parameter, which dimension, and the expected and actual values. The header
and the `-c` object both carry it (the object exports every `static inline CUresult` function of the header), and
so does the HIP `-c` object (tilec/targets/hip/launcher.py: `hipError_t K_check_sizes(...)`).
"""

from __future__ import annotations

from collections.abc import Callable


def _c_format(text: str) -> str:
    """`text` as the inside of a C string literal that is also a printf format."""
    out = []
    for ch in text.replace("%", "%%"):
        if ch in '"\\':
            out.append("\\" + ch)
        elif ch == "?":  # never a trigraph
            out.append("\\077")
        elif ch == "\n":
            out.append("\\n")
        elif ord(ch) < 32 or ord(ch) > 126:
            out.extend(f"\\{b:03o}" for b in ch.encode())
        else:
            out.append(ch)
    return "".join(out)


def check_sizes_function(fname: str, kernel: dict, c_name: Callable[[str, set[str]], str],
                         formula_to_c: Callable[[str, dict[str, str]], str], *, result: str = "CUresult",
                         ok: str = "CUDA_SUCCESS", invalid: str = "CUDA_ERROR_INVALID_VALUE",
                         storage: str = "static inline ") -> tuple[str, str]:
    """(doc comment + definition of `fname`, its prototype) for kernel entry `kernel`. `c_name(name, taken)` is how
    the launcher names a C parameter (so the sizes are named as K_launch names them), `formula_to_c(formula, names)`
    translates a size formula to C over 64-bit integers. `result`, `ok`, `invalid`: the API's status type and
    codes (CUDA's; the HIP launcher passes hipError_t's), `storage`: "static inline " in a header, "" for a
    function an object exports."""
    from ...manifest import launch_checks

    checks = launch_checks(kernel)
    taken = {"stream"}
    for prm in kernel["params"]:
        c_name(prm["name"], taken)
    size_c = {s: c_name(s, taken) for s in kernel["sizes"]}
    name = kernel["name"]
    params = [f"int {c}" for c in size_c.values()] + ["char* message", "size_t message_size"]
    shown = ", ".join(f"{s}=%d" for s in size_c)
    shown_args = "".join(f", {c}" for c in size_c.values())
    body = ["  if (message != NULL && message_size > 0) message[0] = '\\0';"]
    for s, c in size_c.items():
        body += [f"  if ({c} < 0) {{",
                 f"    if (message != NULL) snprintf(message, message_size, \"{_c_format(f'{name}: size {s} = ')}%d"
                 f"{_c_format(' is negative')}\", {c});",
                 f"    return {invalid};",
                 "  }"]
    wide = {s: f"((int64_t){c})" for s, c in size_c.items()}
    for chk in checks:
        op = "==" if chk["op"] == "==" else "<="
        text = _c_format(f"{name}: {chk['message']}: {chk['lhs']} = ") + "%lld" + _c_format(f", {chk['rhs']} = ") \
            + "%lld" + (_c_format(" (sizes ") + shown + ")" if size_c else "")
        body += ["  {",
                 f"    const int64_t tilec_lhs = {formula_to_c(chk['lhs'], wide)};",
                 f"    const int64_t tilec_rhs = {formula_to_c(chk['rhs'], wide)};",
                 f"    if (!(tilec_lhs {op} tilec_rhs)) {{",
                 f"      if (message != NULL) snprintf(message, message_size, \"{text}\", (long long)tilec_lhs, "
                 f"(long long)tilec_rhs{shown_args});",
                 f"      return {invalid};",
                 "    }",
                 "  }"]
    if not size_c:
        body += ["  (void)message_size;"]
    body += [f"  return {ok};"]
    proto = f"{storage}{result} {fname}({', '.join(params)})"
    doc = [f"/* {fname}: {ok} when {name}'s launch accepts these sizes, else",
           f" * {invalid} (what the launch returns for them) and, in `message` (if not NULL), the",
           " * size or the check that fails with the values expected and got, as tilec.runtime words it. Calls no",
           " * driver function. */"]
    return "\n".join(doc) + "\n" + proto + " {\n" + "\n".join(body) + "\n}\n", proto + ";"
