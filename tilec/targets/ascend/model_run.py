"""Run generated AscendC source on tilec's CPU model of the AscendC API (model/kernel_operator.h).

The source is compiled with clang++ (else g++; TILEC_ASCEND_MODEL_CXX picks one) under -fsanitize=address,undefined
together with a small generated main() that
loads each tensor from a file, launches the kernel on min(tiles, cores) model cores and writes the outputs back.
Binaries are cached by the hash of the source and the model headers (TILEC_CACHE_DIR or ~/.cache/tilec), so a
test session compiles each kernel configuration once.

A function of several launches (`with Kernel(...)` blocks sharing alloc_global scratch) runs end to end through the
launcher header tilec ships for it (`-o k.h`): the runner's main() includes that header, sizes one scratch buffer
with its NAME_scratch_bytes and calls its NAME_launch, which places the scratch tensors and launches the stage
kernels in order; the ACL calls the header makes come from the model (model/acl/acl.h), and each stage's NAME_do
runs the stage kernel on the model (build_sequence_runner, run_sequence_on_model).
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
    for f in sorted(MODEL_DIR.rglob("*.h")):
        h.update(f.read_bytes())
    h.update(" ".join(CXXFLAGS).encode())
    return h.hexdigest()


# the runners' main(): a tensor argument's bytes from its file
_LOAD_FILE = ["static std::vector<uint8_t> load(const char* path) {",
              "    std::ifstream f(path, std::ios::binary);",
              "    std::vector<uint8_t> d((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());",
              "    return d;", "}"]


def _read_arguments(host_params, register: str, lines: list[str], given: dict[str, str]) -> tuple[list, list]:
    """The runner's main() reading a kernel's arguments from argv in order (a tensor: a file's bytes, registered with
    the model's global memory through `register`; a scalar: its text), appended to `lines`; `given`: parameters the
    runner makes itself (name -> the expression passed). Returns the call's arguments and the tensors' names."""
    call, tensors = [], []
    for ty, name in host_params:
        if name in given:
            call.append(given[name])
        elif ty == "uint8_t*":
            lines += [f"    const char* {name}_path = argv[a++];",
                      f"    std::vector<uint8_t> {name}_data = load({name}_path);",
                      f"    size_t {name}_bytes = {name}_data.size();",
                      f"    {name}_data.resize({name}_bytes + 64);  // never an empty (null) buffer",
                      f'    {register}({name}_data.data(), {name}_bytes, "{name}");']
            call.append(f"{name}_data.data()")
            tensors.append(name)
        elif ty == "float":
            lines.append(f"    const float {name} = strtof(argv[a++], nullptr);")
            call.append(name)
        else:
            lines.append(f"    const {ty} {name} = ({ty})strtoll(argv[a++], nullptr, 10);")
            call.append(name)
    return call, tensors


def _main_source(program) -> str:
    lines = ["#include <fstream>", "#include <iterator>", '#include "kernel.cpp"', "", *_LOAD_FILE,
             "int main(int argc, char** argv) {",
             "    int a = 1;", "    const uint32_t cores = (uint32_t)atoi(argv[a++]);"]
    # a mixed kernel's GM workspace: allocated below, once the block count is known
    call, tensors = _read_arguments(program.host_params, "AscendC::model::gm_register", lines,
                                    {"workspace": "workspace_data.data()"})
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
    return _compiled(program.name, {"kernel.cpp": source, "main.cpp": main}, ["main.cpp"],
                     "the generated AscendC source does not compile against tilec's model")


def _compiled(name: str, files: dict[str, str], units: list[str], failure: str) -> Path:
    """The runner compiled from `files` (the translation units `units` among them) against the model, cached under
    a hash of the model, the compiler and every file; installed atomically, since parallel test workers may build
    the same runner."""
    cxx = model_compiler()
    key = hashlib.sha256("\0".join([_model_hash(), str(cxx), *files.values()]).encode()).hexdigest()[:24]
    exe = _cache_dir() / f"{name}-{key}"
    if exe.exists():
        return exe
    if cxx is None:
        raise ModelError("running AscendC kernels on tilec's CPU model needs clang++ or g++ (neither is on PATH)")
    with tempfile.TemporaryDirectory(prefix="tilec-ascend-") as tmp:
        for file, text in files.items():
            Path(tmp, file).write_text(text)
        out = Path(tmp, "runner")
        r = subprocess.run([cxx, *CXXFLAGS, f"-I{MODEL_DIR}", f"-I{tmp}", *units, "-o", str(out)], cwd=tmp,
                           capture_output=True, text=True)
        if r.returncode != 0:
            raise ModelError(f"{failure}:\n{r.stderr[-4000:]}")
        part = exe.with_suffix(f".{os.getpid()}.part")
        shutil.copy(out, part)
        os.replace(part, exe)
    return exe


def _argv(host_params, args: dict, tmp: str) -> tuple[list[str], dict]:
    """The runner's arguments after the core count, in `host_params` order (tensors as files in `tmp`), and the
    tensor files by name."""
    import numpy as np

    argv, files = [], {}
    for ty, name in host_params:
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
    return argv, files


def _execute(argv: list[str], files: dict, args: dict, what: str, timeout: float) -> subprocess.CompletedProcess:
    """Run a model runner; read the tensor files back into `args` (in place). Raises ModelError when the model
    reports a failure."""
    import numpy as np

    env = dict(os.environ, ASAN_OPTIONS="detect_leaks=0", UBSAN_OPTIONS="print_stacktrace=1")
    try:
        r = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, env=env)
    except subprocess.TimeoutExpired:
        raise ModelError(f"{what} did not finish on the model within {timeout:.0f} s") from None
    if r.returncode != 0:
        raise ModelError(f"{what} failed on tilec's AscendC model (exit {r.returncode}):\n"
                         f"{(r.stderr.strip() + chr(10) + r.stdout.strip()).strip()[-4000:]}")
    for name, path in files.items():
        arr = args[name]
        got = np.fromfile(path, dtype=arr.dtype)
        if got.size == arr.size:
            arr[...] = got.reshape(arr.shape)
    return r


def run_on_model(exe: Path, program, args: dict, cores: int = 8, timeout: float = 120.0) -> str:
    """Run the kernel on `args` (numpy arrays by parameter name, scalars); outputs are updated in place.
    Returns the model's stderr (warnings). Raises ModelError when the model reports a failure."""
    with tempfile.TemporaryDirectory(prefix="tilec-ascend-run-") as tmp:
        argv, files = _argv(program.host_params, args, tmp)
        return _execute([str(exe), str(cores), *argv], files, args, f"kernel '{program.name}'", timeout).stderr


# --- a function of several launches, through its launcher header ---

def sequence_header(programs, seq) -> str:
    """The launcher header `-o k.h` writes, for `seq` and the kernels it launches (no prefix)."""
    from .launcher import generate_header

    stages = [p for p in programs if p.name in seq.stages]
    return generate_header(stages, "", [seq])


def _sequence_sources(seq, stages: list) -> tuple[str, str]:
    """(main.cpp, stages.cpp): main() includes the launcher header and calls NAME_scratch_bytes and NAME_launch;
    stages.cpp includes the kernel source and defines the ACL entries and each stage's NAME_do on the model."""
    workspace = max((p.workspace_bytes for p in stages), default=0)
    mixed = any(n == "workspace" for p in stages for _, n in p.host_params)
    kernels = ['#include "kernel.cpp"', '#include "acl/acl.h"', "",
               "static int64_t tilec_model_cores = 8;",
               'extern "C" void tilec_model_set_cores(int64_t cores) { tilec_model_cores = cores; }',
               'extern "C" void tilec_model_gm_register(void* data, size_t bytes, const char* name) {',
               "    AscendC::model::gm_register(data, bytes, name);", "}",
               'extern "C" aclError aclrtGetDevice(int32_t* deviceId) { *deviceId = 0; return ACL_SUCCESS; }',
               'extern "C" aclError aclrtGetDeviceInfo(uint32_t, aclrtDevAttr, int64_t* value) {',
               "    *value = tilec_model_cores;", "    return ACL_SUCCESS;", "}"]
    for p in stages:
        sig = ", ".join(f"{t} {n}" for t, n in p.host_params)
        names = ", ".join(n for _, n in p.host_params)
        kernels += [f'extern "C" void {p.name}_do(uint32_t blockDim, void* stream{", " if sig else ""}{sig}) {{',
                    "    (void)stream;  // launches run at once, in order",
                    f"    AscendC::model::launch(KERNEL_TYPE_{p.kernel_type}, blockDim, [&] {{ {p.name}({names}); }});",
                    "}"]
    main = ["#include <cstdio>", "#include <cstdlib>", "#include <fstream>", "#include <iterator>", "#include <vector>",
            '#include "launch.h"', "", *_LOAD_FILE,
            "int main(int argc, char** argv) {",
            "    int a = 1;", "    const int64_t cores = (int64_t)atoll(argv[a++]);",
            "    tilec_model_set_cores(cores);"]
    call, tensors = _read_arguments(seq.host_params, "tilec_model_gm_register", main, {})
    sizes = ", ".join(n for t, n in seq.host_params if t == "int64_t")
    main += [f"    const int64_t scratch_bytes = {seq.name}_scratch_bytes({sizes});",
             "    // one device buffer for every scratch tensor, as a caller allocates it; 0xff bytes read as NaN, so",
             "    // that a stage reading scratch no earlier stage wrote shows",
             "    std::vector<uint8_t> scratch(size_t(scratch_bytes) + 64, 0xff);",
             '    tilec_model_gm_register(scratch.data(), size_t(scratch_bytes), "scratch");',
             '    printf("scratch_bytes %lld\\n", (long long)scratch_bytes);']
    call.append("scratch.data()")
    if mixed:  # each mixed stage's cube/vector hand-over: `cores` groups of its workspace_bytes
        main += [f"    std::vector<uint8_t> workspace(size_t(cores) * {workspace} + 64);",
                 f'    tilec_model_gm_register(workspace.data(), size_t(cores) * {workspace}, "workspace");']
        call.append("workspace.data()")
    main += [f"    const aclError err = {seq.name}_launch(nullptr, {', '.join(call)});",
             f'    if (err != ACL_SUCCESS) {{ fprintf(stderr, "{seq.name}_launch returned %d\\n", err); return 72; }}']
    for name in tensors:
        main.append(f"    {{ std::ofstream f({name}_path, std::ios::binary); "
                    f"f.write((const char*){name}_data.data(), {name}_bytes); }}")
    main += ["    return 0;", "}"]
    return "\n".join(main) + "\n", "\n".join(kernels) + "\n"


def build_sequence_runner(source: str, programs, seq, header: str | None = None) -> Path:
    """The model executable that runs the function `seq` (a LaunchSequence of `programs`) end to end through its
    launcher header (`header`, by default the one tilec generates), compiled once, then cached."""
    stages = [next(p for p in programs if p.name == st) for st in seq.stages]
    header = sequence_header(programs, seq) if header is None else header
    main, kernels = _sequence_sources(seq, stages)
    return _compiled(f"{seq.name}-launch", {"kernel.cpp": source, "launch.h": header, "main.cpp": main,
                                            "stages.cpp": kernels}, ["main.cpp", "stages.cpp"],
                     f"'{seq.name}' (its launcher header and stage kernels) does not compile against tilec's model")


def run_sequence_on_model(exe: Path, seq, args: dict, cores: int = 8, timeout: float = 240.0) -> tuple[str, int]:
    """Run the function `seq` through its NAME_launch on `args` (its parameters and sizes by name; outputs are
    updated in place). Returns (the model's stderr, the scratch bytes NAME_scratch_bytes gave)."""
    with tempfile.TemporaryDirectory(prefix="tilec-ascend-run-") as tmp:
        argv, files = _argv(seq.host_params, args, tmp)
        r = _execute([str(exe), str(cores), *argv], files, args, f"'{seq.name}' (through {seq.name}_launch)", timeout)
    scratch = next((int(line.split()[1]) for line in r.stdout.splitlines() if line.startswith("scratch_bytes ")), -1)
    return r.stderr, scratch
