"""tilec kernels as PyTorch operators: `torch.library` custom ops that torch.compile can trace.

    import tilec.runtime as rt, tilec.torch
    mod = rt.load("softmax.cubin")
    softmax = tilec.torch.op(mod.softmax)          # torch.ops.tilec.softmax
    y = softmax(x)                                 # eager: launched on torch's current stream
    f = torch.compile(lambda x: softmax(x) * 2, fullgraph=True)

An op's schema comes from the kernel's manifest entry: its inputs (tensors, then scalars as
`float`, `int` or `bool`, in the kernel's order) and, when every output's shape follows from the
inputs' sizes, the outputs as return values — the runtime allocates them, and the op's fake
(meta) implementation derives their shapes the same way, so torch.compile knows them without
running anything. When an output has a size no input gives (a gemm's N may appear only in C), the
op takes every parameter in order and writes the outputs in place (they are declared mutated in
the schema; torch.compile functionalizes such ops).

Needs torch (imported by this module only); tilec.runtime itself never imports it.
"""

from __future__ import annotations

import types

import torch

from .runtime.arrays import TORCH_NAMES

_SCHEMA_SCALARS = {"f16": "float", "bf16": "float", "f32": "float", "f64": "float", "bool": "bool"}
_registered: dict[tuple[str, str], tuple[object, object]] = {}  # (namespace, name) -> (kernel, op)
_libraries: dict[str, torch.library.Library] = {}  # kept alive: dropping a Library unregisters its ops


def _scalar_type(dtype: str) -> str:
    return _SCHEMA_SCALARS.get(dtype, "int")


def output_sizes_known(entry: dict) -> bool:
    """Whether every output's shape follows from the inputs: each size in an output's shape also
    appears in an input tensor's shape."""
    given = {d for p in entry["params"] if p["kind"] == "tensor" and not p.get("output") for d in p["shape"]}
    return all(isinstance(d, int) or d in given
               for p in entry["params"] if p["kind"] == "tensor" and p.get("output") for d in p["shape"])


def schema(kernel, name: str) -> str:
    """The op's schema: functional (outputs returned) when output_sizes_known, else in place."""
    params = kernel.entry["params"]

    def arg(p: dict, alias: str | None = None) -> str:
        if p["kind"] == "tensor":
            return f"Tensor{f'({alias}!)' if alias else ''} {p['name']}"
        return f"{_scalar_type(p['dtype'])} {p['name']}"

    outs = [p for p in params if p["kind"] == "tensor" and p.get("output")]
    if output_sizes_known(kernel.entry):
        ins = ", ".join(arg(p) for p in params if p not in outs)
        ret = "Tensor" if len(outs) == 1 else f"({', '.join('Tensor' for _ in outs)})"
        return f"{name}({ins}) -> {ret if outs else '()'}"
    aliases = iter("abcdefghijklmnopqrstuvwxyz")
    return f"{name}({', '.join(arg(p, next(aliases) if p in outs else None) for p in params)}) -> ()"


def fake_outputs(kernel, args):
    """The outputs of a functional op, as empty tensors of the right dtype, shape and device: the
    runtime's size rules applied to the inputs' (possibly symbolic) sizes."""
    params = kernel.entry["params"]
    inputs = [p for p in params if not (p["kind"] == "tensor" and p.get("output"))]
    sizes: dict = {}
    like = None
    for p, a in zip(inputs, args, strict=True):
        if p["kind"] != "tensor":
            continue
        like = a if like is None else like
        torch._check(a.dim() == len(p["shape"]),
                     lambda p=p, a=a: f"{kernel.name}: '{p['name']}' has {a.dim()} dimension(s), expected "
                                      f"{len(p['shape'])}")
        for axis, want in enumerate(p["shape"]):
            got = a.shape[axis]
            if isinstance(want, int):
                torch._check(got == want, lambda p=p, axis=axis, want=want:
                             f"{kernel.name}: dimension {axis} of '{p['name']}' must be {want}")
            elif want in sizes:
                torch._check(got == sizes[want], lambda want=want: f"{kernel.name}: inputs disagree on size {want}")
            else:
                sizes[want] = got
        torch._check(a.dtype == getattr(torch, TORCH_NAMES[p["dtype"]]),
                     lambda p=p, a=a: f"{kernel.name}: '{p['name']}' has dtype {a.dtype}, expected {p['dtype']}")
    outs = []
    for p in params:
        if p["kind"] == "tensor" and p.get("output"):
            shape = [d if isinstance(d, int) else sizes[d] for d in p["shape"]]
            outs.append(like.new_empty(shape, dtype=getattr(torch, TORCH_NAMES[p["dtype"]])))
    return outs[0] if len(outs) == 1 else tuple(outs)


def op(kernel, name: str | None = None, namespace: str = "tilec"):
    """Register a tilec.runtime kernel as the custom op torch.ops.<namespace>.<name> (default: the
    kernel's name) and return it. Registering the same kernel again returns the same op; another
    kernel under a taken name is refused (pass `name=`)."""
    name = name or kernel.name
    key = (namespace, name)
    if key in _registered:
        known, registered = _registered[key]
        if known is kernel:
            return registered
        raise ValueError(f"torch.ops.{namespace}.{name} is already another kernel; register this one with name=")
    lib = _libraries.get(namespace)
    if lib is None:
        lib = _libraries[namespace] = torch.library.Library(namespace, "FRAGMENT")
    lib.define(schema(kernel, name))
    functional = output_sizes_known(kernel.entry)

    def run_on_gpu(*args):
        out = kernel(*args)  # torch's current stream; omitted outputs allocated on the inputs' device
        return out if functional else None

    def fake(*args):
        return fake_outputs(kernel, args) if functional else None

    lib.impl(name, run_on_gpu, "CUDA")
    torch.library.register_fake(f"{namespace}::{name}", fake, lib=lib)
    registered = getattr(getattr(torch.ops, namespace), name)
    _registered[key] = (kernel, registered)
    return registered


def register(module, namespace: str = "tilec", prefix: str = ""):
    """Every kernel of a loaded module as an op (torch.ops.<namespace>.<prefix><kernel>), returned
    as attributes of a namespace object: `ops = tilec.torch.register(mod); ops.softmax(x)`."""
    return types.SimpleNamespace(**{k: op(kernel, prefix + k, namespace) for k, kernel in module.kernels.items()})
