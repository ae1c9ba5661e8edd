"""Run generated AscendC source on tilec's CPU model of the AscendC API (model/kernel_operator.h).

The source is compiled with clang++ (else g++; TILEC_ASCEND_MODEL_CXX picks one) under -fsanitize=address,undefined
together with a small generated main() that
loads each tensor from a file, launches the kernel on min(tiles, cores) model cores and writes the outputs back.
Binaries are cached by the hash of the source and the model headers (TILEC_CACHE_DIR or ~/.cache/tilec), so a
test session compiles each kernel configuration once.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from ...errors import UserFacingError

MODEL_DIR = Path(__file__).parent / "model"
CXXFLAGS = ["-std=c++17", "-O0", "-g", "-fsanitize=address,undefined", "-fno-sanitize-recover=undefined",
            "-DTILEC_ASCEND_MODEL=1", "-pthread"]


class ModelError(UserFacingError):
    """The model refused the kernel: a compile error against the API, or a check that failed while it ran."""


def model_compiler() -> str | None:
    """The C++ compiler for model runners: clang++ first, because with the sanitizers at -O0 it builds a kernel's
    runner about 2.5x faster than g++ (2.2 s against 5.3 s for mha_bwd's kernel), then g++."""
    chosen = os.environ.get("TILEC_ASCEND_MODEL_CXX")
    if chosen:
        return shutil.which(chosen)
    for name in ("clang++", "clang++-19", "clang++-18", "clang++-17", "clang++-16", "clang++-15", "g++"):
        found = shutil.which(name)
        if found:
            return found
    return None


def _cache_dir() -> Path:
    root = os.environ.get("TILEC_CACHE_DIR") or os.path.join(os.path.expanduser("~"), ".cache", "tilec")
    d = Path(root) / "ascend-model"
    d.mkdir(parents=True, exist_ok=True)
    return d


def _model_hash() -> str:
    h = hashlib.sha256()
    for f in sorted(MODEL_DIR.glob("*.h")):
        h.update(f.read_bytes())
    h.update(" ".join(CXXFLAGS).encode())
    return h.hexdigest()


def _main_source(program) -> str:
    lines = ["#include <fstream>", "#include <iterator>", '#include "kernel.cpp"', "",
             "static std::vector<uint8_t> load(const char* path) {",
             "    std::ifstream f(path, std::ios::binary);",
             "    std::vector<uint8_t> d((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());",
             "    return d;", "}",
             "int main(int argc, char** argv) {",
             "    int a = 1;", "    const uint32_t cores = (uint32_t)atoi(argv[a++]);"]
    call = []
    tensors = []
    for ty, name in program.host_params:
        if name == "workspace":  # a mixed kernel's GM workspace: allocated below, once the block count is known
            call.append("workspace_data.data()")
            continue
        if ty == "uint8_t*":
            lines.append(f"    const char* {name}_path = argv[a++];")
            lines.append(f"    std::vector<uint8_t> {name}_data = load({name}_path);")
            lines.append(f"    size_t {name}_bytes = {name}_data.size();")
            lines.append(f"    {name}_data.resize({name}_bytes + 64);  // never an empty (null) buffer")
            lines.append(f'    AscendC::model::gm_register({name}_data.data(), {name}_bytes, "{name}");')
            call.append(f"{name}_data.data()")
            tensors.append(name)
        elif ty == "float":
            lines.append(f"    const float {name} = strtof(argv[a++], nullptr);")
            call.append(name)
        else:
            lines.append(f"    const {ty} {name} = ({ty})strtoll(argv[a++], nullptr, 10);")
            call.append(name)
    sizes = ", ".join(n for t, n in program.host_params if t == "int64_t")
    lines.append(f"    const int64_t tiles = {program.name}_tiles({sizes});")
    lines.append("    const uint32_t blocks = (uint32_t)std::max<int64_t>(1, std::min<int64_t>(tiles, cores));")
    lines.append(f"    std::vector<uint8_t> workspace_data(size_t(blocks) * {program.workspace_bytes} + 64);")
    if program.workspace_bytes:
        lines.append("    AscendC::model::gm_register(workspace_data.data(), "
                     f'size_t(blocks) * {program.workspace_bytes}, "workspace");')
    lines.append(f"    AscendC::model::launch(KERNEL_TYPE_{program.kernel_type}, blocks, [&] {{ "
                 f"{program.name}({', '.join(call)}); }});")
    for name in tensors:
        lines.append(f"    {{ std::ofstream f({name}_path, std::ios::binary); "
                     f"f.write((const char*){name}_data.data(), {name}_bytes); }}")
    lines += ["    return 0;", "}"]
    return "\n".join(lines) + "\n"


def build_runner(source: str, program) -> Path:
    """The model executable for one kernel of `source` (compiled once, then cached)."""
    main = _main_source(program)
    cxx = model_compiler()
    key = hashlib.sha256((_model_hash() + str(cxx) + source + main).encode()).hexdigest()[:24]
    exe = _cache_dir() / f"{program.name}-{key}"
    if exe.exists():
        return exe
    if cxx is None:
        raise ModelError("running AscendC kernels on tilec's CPU model needs clang++ or g++ (neither is on PATH)")
    with tempfile.TemporaryDirectory(prefix="tilec-ascend-") as tmp:
        Path(tmp, "kernel.cpp").write_text(source)
        Path(tmp, "main.cpp").write_text(main)
        out = Path(tmp, "runner")
        cmd = [cxx, *CXXFLAGS, f"-I{MODEL_DIR}", f"-I{tmp}", "main.cpp", "-o", str(out)]
        r = subprocess.run(cmd, cwd=tmp, capture_output=True, text=True)
        if r.returncode != 0:
            raise ModelError(f"the generated AscendC source does not compile against tilec's model:\n"
                             f"{r.stderr[-4000:]}")
        part = exe.with_suffix(f".{os.getpid()}.part")
        shutil.copy(out, part)
        os.replace(part, exe)  # atomic: parallel test workers may build the same runner
    return exe


def run_on_model(exe: Path, program, args: dict, cores: int = 8, timeout: float = 120.0) -> str:
    """Run the kernel on `args` (numpy arrays by parameter name, scalars); outputs are updated in place.
    Returns the model's stderr (warnings). Raises ModelError when the model reports a failure."""
    import numpy as np

    with tempfile.TemporaryDirectory(prefix="tilec-ascend-run-") as tmp:
        argv = [str(exe), str(cores)]
        files = {}
        for ty, name in program.host_params:
            if name == "workspace":
                continue
            v = args[name]
            if ty == "uint8_t*":
                path = Path(tmp, name + ".bin")
                np.ascontiguousarray(v).tofile(path)
                files[name] = path
                argv.append(str(path))
            elif ty == "float":
                argv.append(repr(float(v)))
            else:
                argv.append(str(int(v)))
        env = dict(os.environ, ASAN_OPTIONS="detect_leaks=0", UBSAN_OPTIONS="print_stacktrace=1")
        try:
            r = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, env=env)
        except subprocess.TimeoutExpired:
            raise ModelError(f"kernel '{program.name}' did not finish on the model within {timeout:.0f} s") from None
        if r.returncode != 0:
            raise ModelError(f"kernel '{program.name}' failed on tilec's AscendC model (exit {r.returncode}):\n"
                             f"{r.stderr.strip()[-4000:]}")
        for name, path in files.items():
            arr = args[name]
            got = np.fromfile(path, dtype=arr.dtype)
            if got.size == arr.size:
                arr[...] = got.reshape(arr.shape)
        return r.stderr
