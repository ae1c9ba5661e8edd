"""Make the checkout importable (`import tilec`) without installing it, and `tests/` helpers
(`import filecheck`) importable from every test module."""

import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
for p in (ROOT, ROOT / "tests"):
    if str(p) not in sys.path:
        sys.path.insert(0, str(p))

# Keep the test suite's compile cache out of the user's ~/.cache (one fresh directory per run).
os.environ.setdefault("TILEC_CACHE_DIR", tempfile.mkdtemp(prefix="tilec-test-cache-"))
# Samples build without their tuning databases (samples/*.tune.json) unless a test asks: tests of a lowering look
# at one kernel per sample; tests/test_tuning.py covers the databases.
os.environ.setdefault("TILEC_TUNE_DB", "")


def _hide_nvcc() -> None:
    """TILEC_TEST_WITHOUT_NVCC=1 (.ci/run's second run; scripts/test.sh --without-nvcc): the machine the README
    describes, with no CUDA toolkit on PATH, where tilec builds with NVRTC. Each PATH folder that holds nvcc is
    replaced by a folder of links to everything else in it. The tests that need nvcc itself skip in that run
    (they ran in the first); NVRTC must be there, or the run would test nothing."""
    import shutil

    shims = Path(tempfile.mkdtemp(prefix="tilec-test-no-nvcc-"))
    folders = []
    for i, folder in enumerate(os.environ.get("PATH", "").split(os.pathsep)):
        if folder and (Path(folder) / "nvcc").exists():
            shim = shims / str(i)
            shim.mkdir()
            for entry in Path(folder).iterdir():
                if entry.name != "nvcc":
                    (shim / entry.name).symlink_to(entry)
            folder = str(shim)
        folders.append(folder)
    os.environ["PATH"] = os.pathsep.join(folders)
    assert shutil.which("nvcc") is None, "TILEC_TEST_WITHOUT_NVCC=1: nvcc is still on PATH"
    from tilec.targets.cuda.locate import nvrtc_lib

    if nvrtc_lib() is None:
        raise SystemExit("TILEC_TEST_WITHOUT_NVCC=1 needs NVRTC (pip nvidia-cuda-nvrtc): it tests tilec's NVRTC builds")
    os.environ.pop("TILEC_REQUIRE_TOOLCHAINS", None)


if os.environ.get("TILEC_TEST_WITHOUT_NVCC") == "1":
    _hide_nvcc()


# Under pytest-xdist (scripts/test.sh: -n 2 --dist loadfile) a worker takes a whole file at a time, in the order
# of collection: the longest files go first, so that the last file handed out is a short one and neither worker
# waits for the other at the end. Only the order of the files changes (a file's tests keep theirs); in one process
# nothing is reordered. The list is an estimate (the files of the slowest tests of a sequential CI run and the
# files with the most interpreter or toolchain work), not a measurement per file: refine it from the durations
# scripts/test.sh prints (--durations). A file not listed goes after these, in collection order. (2026-12-02, a
# partial -n 2 run on a loaded machine: test_examples_tilelang.py, test_threads.py, test_webgpu_js.py and
# test_samples.py were the four longest files measured, in that order.)
LONGEST_FIRST = [
    "test_examples_tilelang.py",
    "test_threads.py",
    "test_webgpu_js.py",
    "test_examples_tilelang_targets.py",
    "test_fuzzer.py",
    "test_samples.py",
    "test_ascend.py",
    "test_workgroup_sizes.py",
    "test_cuda_backend.py",
    "test_fuzz.py",
    "test_deploy.py",
    "test_webgpu_js.py",
    "test_hopper.py",
    "test_cli_fuzz.py",
    "test_cli_nvcc.py",
]


def pytest_collection_modifyitems(session, config, items):
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        return
    rank = {name: i for i, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))  # stable: each file's order kept
