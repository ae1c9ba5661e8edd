"""The first hour of a new user (issue #29's polish): tilec tune's summary names each reason for pruning once,
not once per candidate."""

from types import SimpleNamespace

import pytest

from tilec.cli.tune import _summary


def test_tune_summary_collapses_candidates_pruned_for_one_reason():
    cands = [SimpleNamespace(index=i, status="pruned", reason="needs 300 KB of shared memory") for i in range(384)]
    cands += [SimpleNamespace(index=384, status="built", reason=""),
              SimpleNamespace(index=385, status="failed", reason="ptxas: out of registers")]
    text = _summary(SimpleNamespace(candidates=cands))
    assert text.splitlines() == [
        "386 candidates: 1 built, 1 failed, 384 pruned",
        "  384 pruned (cand0, cand1, cand2 and 381 more): needs 300 KB of shared memory",
        "  1 failed (cand385): ptxas: out of registers"]


def test_bench_without_a_driver_says_so_before_compiling(monkeypatch, capsys):
    import ctypes
    from pathlib import Path

    import pytest

    from tilec.cli import gpu
    from tilec.cli.main import main

    try:
        ctypes.CDLL("libcuda.so.1")
        pytest.skip("this machine has a CUDA driver")
    except OSError:
        pass

    def compiled(args):
        raise AssertionError("compiled before looking for the driver")

    monkeypatch.setattr(gpu, "_load", compiled)
    softmax = str(Path(__file__).resolve().parent.parent / "samples" / "softmax.tile")
    assert main(["bench", softmax, "--target", "sm90", "--size", "M=32,N=64"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("tilec: error: the CUDA driver (libcuda.so.1) is not available"), err
    from tilec.cli import profile

    monkeypatch.setattr(profile, "build", compiled)  # tilec profile too (it compiled for seconds before)
    fa = str(Path(__file__).resolve().parent.parent / "samples" / "flash_attention.tile")
    assert main(["profile", fa, "--target", "sm90", "--size", "B=1,S=128,H=1", "-o", "fa.json"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("tilec profile: error: no GPU here (the CUDA driver (libcuda.so.1) is not available"), err


def test_a_misspelt_name_or_function_gets_a_suggestion():
    import pytest

    import tilec
    from tilec.diagnostics import CompileError

    source = ("const block_N = 64\n"
              "kernel k(A: f32[N], B: out f32[N]):\n"
              "    with Kernel(ceildiv(N, {size}), threads=64) as bx:\n"
              "        X = alloc_fragment((block_N,), f32)\n"
              "        {op}(X)\n"
              "        copy(X, B[bx * block_N])\n")
    for size, op, expected in (("blockN", "clear", "3:28: error: use of undefined name 'blockN'; did you mean "
                                "'block_N'?"),
                               ("block_N", "clera", "5:9: error: call to undefined function 'clera'; did you mean "
                                "'clear'")):
        with pytest.raises(CompileError) as e:
            tilec.compile("k.tile", text=source.format(size=size, op=op))
        shown = "\n".join(str(d) for d in e.value.diagnostics)
        assert expected in tilec._render(e.value), shown


def test_a_subcommand_usage_error_is_one_line(capsys):
    from tilec.cli.main import main

    assert main(["run", "--targte", "sm90", "x.tile"]) == 2
    err = capsys.readouterr().err
    assert err == "tilec run: error: No such option: --targte (Possible options: --target)\n" \
                  "(`tilec run --help` shows the usage)\n"
    assert main(["tune", "--gpus"]) == 2
    assert capsys.readouterr().err.startswith("tilec tune: error: Option '--gpus' requires an argument.\n")


@pytest.mark.parametrize("name", ["run", "bench", "tune", "profile", "layout", "cache"])
def test_subcommand_help_shows_no_type_after_a_switch(name, capsys, monkeypatch):
    from tilec.cli.main import main

    monkeypatch.setenv("COLUMNS", "150")
    assert main([name, "--help"]) == 0
    out = capsys.readouterr().out
    assert "--help" in out and "<bool>" not in out and "<str>" not in out, out
    if name == "run":  # an option with a value keeps what the value looks like; a choice its choices
        assert "M=1000,N=..." in out and "<cpu|cuda>" in out
    if name == "cache":
        assert "<stats|clear>" in out


def test_a_spill_in_a_no_tma_twin_says_which_tensors_reach_it():
    """The README's first command warns of a spill in `gemm__cfg0__no_tma`: the warning says that the kernel is the
    no-TMA twin (launched only for misaligned tensors), and a kernel that is no twin gets the plain warning."""
    from tilec.targets.cuda.backend import _resources

    use = {"registers": 255, "spill_stores": 260, "spill_loads": 336, "stack_bytes": 264, "static_smem_bytes": 0}
    kernels = [{"name": "gemm__cfg0", "shared_bytes": 1024, "fallback": "gemm__cfg0__no_tma"},
               {"name": "gemm__cfg0__no_tma", "shared_bytes": 2048, "internal": True},
               {"name": "other", "shared_bytes": 0}]
    unit = SimpleNamespace(target=SimpleNamespace(arch="sm_90a"), lowered=None, kernels=kernels)
    resources, warnings = _resources([unit], {"sm_90a": {"gemm__cfg0__no_tma": use, "other": use}})
    assert resources["sm_90a"]["gemm__cfg0__no_tma"]["shared_bytes"] == 2048
    twin, plain = sorted(warnings, key=lambda d: "other" in d.message)
    assert twin.message.startswith("kernel 'gemm__cfg0__no_tma' spills 260 bytes") and twin.message.endswith(
        "; it is the no-TMA twin of 'gemm__cfg0', launched only when a tensor's base address or row pitch is not a "
        "multiple of 16 bytes"), twin.message
    assert plain.message.startswith("kernel 'other' spills") and plain.message.endswith("avoid it"), plain.message
