"""An ES module from a .tile file's WGSL and its manifest entries (`-o k.js`, `--emit esm`), and its TypeScript
declarations (`k.d.ts`, written beside it).

The module holds the WGSL, one description per kernel (bindings, uniform fields, shapes, and the manifest's size
formulas — grid, formula dimensions, launch checks, scratch — translated to JavaScript functions here, so the
module parses nothing at run time) and the launcher in esm_runtime.js; it exports an async function per public
kernel (a multi-launch kernel is one function that runs its stages in one submission). No dependency: only the
WebGPU API (`navigator.gpu`, or a GPUDevice passed in). docs/webgpu.md#for-web-developers shows its use.
"""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

from ...manifest import INTERNAL_KEY, launch_checks

RUNTIME = Path(__file__).with_name("esm_runtime.js")
EXPORTED = ("TilecError", "useDevice", "getDevice", "call")  # the launcher's own exports: no kernel may take them
# WebGPU's default limits (what a device has unless requested): a kernel needing more makes getDevice ask for more
DEFAULT_LIMITS = {"maxComputeWorkgroupStorageSize": 16384, "maxStorageBuffersPerShaderStage": 8,
                  "maxComputeInvocationsPerWorkgroup": 256, "maxComputeWorkgroupSizeX": 256}
_JS_OPS = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*"}
_TS_ARRAYS = {"f32": "Float32Array", "i32": "Int32Array", "u32": "Uint32Array", "f16": "F16Array",
              "bf16": "Uint16Array", "i8": "Int8Array", "u8": "Uint8Array", "bool": "Uint8Array",
              "i16": "Int16Array", "u16": "Uint16Array", "f8e4m3": "Uint8Array", "f8e5m2": "Uint8Array"}


class _Code(str):
    """JavaScript source to place as it is (a function), not as a JSON string."""


def js_formula(text: str) -> str:
    """A manifest size formula (integers, names, + - * // %, ceildiv/min/max) as a JavaScript expression over `s`."""

    def walk(n: ast.AST) -> str:
        if isinstance(n, ast.Constant) and type(n.value) is int:
            return str(n.value)
        if isinstance(n, ast.Name):
            return f"s.{n.id}"
        if isinstance(n, ast.BinOp) and type(n.op) in _JS_OPS:
            return f"({walk(n.left)}{_JS_OPS[type(n.op)]}{walk(n.right)})"
        if isinstance(n, ast.BinOp) and isinstance(n.op, ast.FloorDiv):
            return f"Math.floor({walk(n.left)}/{walk(n.right)})"
        if isinstance(n, ast.BinOp) and isinstance(n.op, ast.Mod):  # Python's %: the sign of the divisor
            a, b = walk(n.left), walk(n.right)
            return f"({a}-{b}*Math.floor({a}/{b}))"
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == "ceildiv":
            return f"(-Math.floor(-({walk(n.args[0])})/{walk(n.args[1])}))"
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id in ("min", "max"):
            return f"Math.{n.func.id}({','.join(walk(a) for a in n.args)})"
        raise ValueError(f"not a size formula: {text}")

    return walk(ast.parse(text, mode="eval").body)


def _fn(text: str) -> _Code:
    return _Code(f"(s)=>{js_formula(text)}")


def _dim(d):
    """A shape entry: a number, a size's name, or [function, text] for a formula of sizes."""
    return d if isinstance(d, int) or str(d).isidentifier() else [_fn(d), d]


def _js(v) -> str:
    if isinstance(v, _Code):
        return str(v)
    if isinstance(v, dict):
        return "{" + ",".join(f"{k if k.isidentifier() else json.dumps(k)}:{_js(x)}" for k, x in v.items()) + "}"
    if isinstance(v, list | tuple):
        return "[" + ",".join(_js(x) for x in v) + "]"
    if isinstance(v, bool):
        return "1" if v else "0"
    return json.dumps(v, separators=(",", ":"))


def _lean(d: dict) -> dict:
    """Without the fields that are false or empty (the launcher reads a missing one as such)."""
    return {k: v for k, v in d.items() if v not in (None, False, [], {})}


def _params(params: list[dict]) -> list[dict]:
    return [_lean({"name": p["name"], "t": p["kind"] == "tensor", "dtype": p["dtype"], "out": bool(p.get("output")),
                   "shape": [_dim(d) for d in p.get("shape", [])]}) for p in params]


def _kernel(e: dict, line: int | None) -> dict:
    abi = e["abi"]
    uni = abi.get("uniform")
    return _lean({
        "name": e["name"], "line": line, "params": _params(e["params"]), "sizes": e["sizes"],
        "entry": abi["entry_point"] if abi["entry_point"] != e["name"] else None,  # (default: the name)
        "threads": e["threads"], "wg": abi.get("workgroup_storage_bytes", 0),
        "f16": "shader-f16" in abi.get("features", []),
        "b": [[[p["name"] for p in e["params"]].index(b["param"]), b["binding"], b["access"] != "read"]
              for b in abi["bindings"]],  # [parameter index, binding, read_write]
        "u": uni and {"binding": uni["binding"], "size": uni["size"],
                      "fields": [[f["name"], f["offset"], f["type"]] for f in uni["fields"]]},
        "grid": _Code(f"(s)=>[{','.join(js_formula(g) for g in e['grid'])}]"),
        "checks": [[_fn(c["lhs"]), c["op"], _fn(c["rhs"]), c["message"], c["lhs"], c["rhs"]]
                   for c in launch_checks(e)],
    })


def _launches(seq: dict, line: int | None) -> dict:
    # no "zeroed": esm_runtime.js creates each scratch buffer per call, and WebGPU zero-fills a new buffer
    return {"name": seq["name"], "line": line, "params": _params(seq["params"]), "sizes": seq["sizes"],
            "stages": [[st["kernel"], st["args"]] for st in seq["stages"]],
            "scratch": [{"name": b["name"], "shape": [_dim(d) for d in b["shape"]], "bytes": _fn(b["bytes"])}
                        for b in seq["scratch"]]}


def launcher() -> str:
    """esm_runtime.js with its comments and the spaces JavaScript does not need taken out (line breaks stay, so
    automatic semicolon insertion reads it as before); strings and template literals are copied as they are. The
    file has no regular-expression literals, which this scan would not know from a division."""
    src, out, i, depth = RUNTIME.read_text(), [], 0, []  # depth: brace counts of the open `${` of templates

    def space_needed(a: str, b: str) -> bool:
        word = (a.isalnum() or a in "_$") and (b.isalnum() or b in "_$")
        return word or (a in "+-" and a == b)

    while i < len(src):
        ch = src[i]
        if ch == "/" and src.startswith("//", i):
            i = src.index("\n", i)
        elif ch.isspace():
            j = i
            while j < len(src) and src[j].isspace():
                j += 1
            gap = "\n" if "\n" in src[i:j] else " "
            prev = out[-1][-1] if out and out[-1] else "\n"
            if gap == "\n" and (prev in "{,;([" or src[j:j + 1] in ("}", ")", "]", ".")):
                gap = ""  # a line break there never ends a statement
            if j < len(src) and prev != "\n" and (gap == "\n" or (gap and space_needed(prev, src[j]))):
                out.append(gap)
            i = j
        elif ch in "'\"" or (ch == "`") or (ch == "}" and depth and depth[-1] == 0):
            if ch == "}":
                depth.pop()
            j, quote = i + 1, "`" if ch in "`}" else ch
            while src[j] != quote and not (quote == "`" and src.startswith("${", j)):
                j += 2 if src[j] == "\\" else 1
            if quote == "`" and src[j] == "$":
                depth.append(0)
                j += 1
            out.append(src[i:j + 1])
            i = j + 1
        else:
            if depth and ch == "{":
                depth[-1] += 1
            elif depth and ch == "}":
                depth[-1] -= 1
            out.append(ch)
            i += 1
    return re.sub(r"\(([A-Za-z_$][\w$]*)\)=>", r"\1=>", "".join(out).strip())  # (x)=> is x=> (no string has it)


def public_names(kernels: list[dict], launches: list[dict]) -> list[str]:
    return [e["name"] for e in kernels if not e.get(INTERNAL_KEY)] + [s["name"] for s in launches]


def generate(wgsl: str, kernels: list[dict], launches: list[dict], lines: dict[str, int], source_name: str,
             output_name: str) -> str:
    """The ES module: WGSL, kernel descriptions, the launcher, an exported async function per public kernel."""
    specs = {e["name"]: _kernel(e, lines.get(e["name"])) for e in kernels}
    for seq in launches:
        specs[seq["name"]] = _launches(seq, lines.get(seq["stages"][0]["kernel"]))
    most = {"maxComputeWorkgroupStorageSize": max(k.get("wg", 0) for k in specs.values()),
            "maxStorageBuffersPerShaderStage": max(len(k.get("b", [])) for k in specs.values()),
            "maxComputeInvocationsPerWorkgroup": max(k.get("threads", 1) for k in specs.values())}
    most["maxComputeWorkgroupSizeX"] = most["maxComputeInvocationsPerWorkgroup"]  # (one-dimensional workgroups)
    need = {"f16": any(k.get("f16") for k in specs.values()),
            "limits": {n: v for n, v in most.items() if v > DEFAULT_LIMITS[n]}}
    text = wgsl.replace("\\", "\\\\").replace("`", "\\`").replace("${", "\\${")
    out = [f"// WebGPU kernels of {source_name}, by tilec",
           f'// @ts-self-types="./{Path(output_name).stem}.d.ts"',  # (Deno's way to the types; TypeScript finds them)
           f"const SOURCE={json.dumps(source_name)};",
           f"export const WGSL = `{text}`;",
           "const K={"]
    out += [f"{json.dumps(name)}:{_js(spec)}," for name, spec in specs.items()]
    out += ["};", f"const NEED={_js(need)};", launcher()]
    for name in public_names(kernels, launches):
        if name not in EXPORTED:  # (a kernel named like the launcher's exports is reached through call())
            out.append(f"export const {name}=(...a)=>call({json.dumps(name)},a);")
    return "\n".join(out) + "\n"


def _ts_tensor(p: dict) -> str:
    return f"Tensor<{_TS_ARRAYS.get(p['dtype'], 'ArrayBufferView')}>"


def declarations(manifest: dict) -> str:
    """The module's TypeScript declarations, from its manifest alone."""
    kernels = manifest.get("kernels", [])
    launches = manifest.get("launches") or []
    entries = {e["name"]: e for e in kernels}
    entries.update({s["name"]: s for s in launches})
    out = [f"// Generated by tilec from {manifest.get('source', manifest.get('binary', ''))}: the kernels' signatures.",
           "// A tensor is a typed array, a GPUBuffer (STORAGE usage), or {data, shape} (a shape may also be a",
           "// `shape` property of the array or buffer); outputs may be left out, and are then allocated and returned.",
           "export type F16Array = Uint16Array | ArrayBufferView;  // a Float16Array, or Uint16Array of f16 bits",
           "export type Shaped<D> = (D | GPUBuffer) & { shape?: readonly number[] };",
           "export type Tensor<D> = Shaped<D> | { data: D | GPUBuffer; shape: readonly number[] };",
           "export interface CallOptions { device?: GPUDevice; sizes?: Record<string, number> }",
           "export class TilecError extends Error { kernel: string; line?: number }",
           "export function useDevice(device: GPUDevice): void;",
           "export function getDevice(): Promise<GPUDevice>;",
           "export function call(kernel: string, args: unknown[]): Promise<unknown>;",
           "export const WGSL: string;"]
    for name in public_names(kernels, launches):
        if name in EXPORTED:
            continue
        params = entries[name]["params"]
        sig = ", ".join(f"{p['name']}: {'out ' if p.get('output') else ''}{p['dtype']}"
                        + (f"[{', '.join(map(str, p['shape']))}]" if p["kind"] == "tensor" else "") for p in params)
        outs = [p for p in params if p.get("output")]
        shaped = [f"Shaped<{_TS_ARRAYS.get(p['dtype'], 'ArrayBufferView')}>" for p in outs]
        ret = "void" if not outs else shaped[0] if len(outs) == 1 else f"[{', '.join(shaped)}]"

        def arg(p):
            kind = _ts_tensor(p) if p["kind"] == "tensor" else "boolean" if p["dtype"] == "bool" else "number"
            return f"{p['name']}: {kind}"

        out.append(f"/** {name}({sig}) */")
        out.append(f"export function {name}({', '.join([*map(arg, params), 'options?: CallOptions'])}): "
                   f"Promise<{ret}>;")
        if outs:
            ins = [p for p in params if not p.get("output")]
            out.append(f"export function {name}({', '.join([*map(arg, ins), 'options?: CallOptions'])}): "
                       f"Promise<{ret}>;")
    return "\n".join(out) + "\n"


def package_json(directory: str, modules: list[str]) -> str:
    """package.json of an npm package directory of modules (`--emit npm -o DIR`, once per .tile file): an export
    per module with its types. Fields of an existing package.json other than exports and files are kept."""
    path = Path(directory) / "package.json"
    try:
        pkg = json.loads(path.read_text())
    except (OSError, ValueError):
        pkg = {}
    if not isinstance(pkg, dict):
        pkg = {}
    stems = sorted(Path(m).stem for m in modules)
    pkg.setdefault("name", Path(directory).resolve().name.lower())
    pkg.setdefault("version", "0.1.0")
    pkg.setdefault("description", "WebGPU kernels compiled by tilec")
    pkg["type"] = "module"
    pkg["sideEffects"] = False
    pkg["exports"] = {f"./{s}": {"types": f"./{s}.d.ts", "default": f"./{s}.js"} for s in stems}
    pkg["files"] = [f"{s}{ext}" for s in stems for ext in (".js", ".d.ts")]
    return json.dumps(pkg, indent=2) + "\n"
