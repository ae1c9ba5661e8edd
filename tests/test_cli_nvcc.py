"""The command line as nvcc users write it (tilec/cli): every nvcc spelling builds samples/vector_add.tile, two
-gencode's make one fatbin with both architectures, -O / -Xptxas / -Xcompiler reach the toolchain and the cache
key, "did you mean", exit statuses, --version anywhere, completion scripts (bash completes a target name), colour
(--color, NO_COLOR), and each subcommand's own help."""

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tilec.cli.compile import namespace
from tilec.cli.flags import UsageError
from tilec.cli.main import main as tilec_main
from tilec.options import CompileOptions

ROOT = Path(__file__).resolve().parent.parent
VECTOR_ADD = str(ROOT / "samples" / "vector_add.tile")


def _require(tool, what: str):
    if tool:
        return tool
    if os.environ.get("TILEC_REQUIRE_TOOLCHAINS") == "1":
        pytest.fail(f"{what} is required (TILEC_REQUIRE_TOOLCHAINS=1) but was not found")
    pytest.skip(f"{what} not found")


def _cuobjdump() -> str | None:
    try:
        import nvidia

        for loc in nvidia.__path__:
            for cand in Path(loc).glob("*/bin/cuobjdump"):
                return str(cand)
    except ImportError:
        pass
    return shutil.which("cuobjdump")


@pytest.fixture(scope="module")
def nvcc():
    return _require(shutil.which("nvcc"), "nvcc")


# ---------------------------------------------------------------------------- parsing (no build)


@pytest.mark.parametrize("argv, targets", [
    (["-arch=sm_90"], "sm90"),
    (["-arch", "sm_80"], "sm80"),
    (["--gpu-architecture=sm_90a"], "sm90"),
    (["--gpu-architecture", "compute_86"], "sm86"),
    (["-arch=compute_80", "-code=sm_80,sm_86"], "sm80,sm86"),
    (["-gencode", "arch=compute_80,code=sm_80", "-gencode=arch=compute_90a,code=sm_90a"], "sm80,sm90"),
    (["--generate-code", "arch=compute_80,code=[sm_80,sm_86]"], "sm80,sm86"),
    (["-t", "sm80", "-gencode", "arch=compute_80,code=sm_80", "-arch=sm_90"], "sm80,sm90"),
    (["-arch=sm_75"], "sm_75"),  # unknown: the build reports it
    (["-t", "sm_80"], "sm_80"),  # --target alone: as written
    ([], None),
])
def test_nvcc_architecture_spellings_become_targets(argv, targets):
    assert namespace(["k.tile", *argv]).target == targets


def test_nvcc_value_spellings():
    a = namespace(["-DN=1", "-D", "M=2", "--define-macro=K=3", "-Iinc", "-I", "lib", "k.tile", "-O2", "-Xptxas",
                   "-v,-warn-spills", "--ptxas-options=-O1", "-Xcompiler", "-Wall", "--toolchain-args=-w,-Wextra",
                   "-res-usage", "--output-file", "k.cubin", "-lineinfo", "-G", "-MD", "-MF", "k.d", "-MT", "a",
                   "-MT", "b", "-MP"])
    assert a.file == "k.tile" and a.output == "k.cubin"
    assert a.defines == ["N=1", "M=2", "K=3"] and a.include_dirs == ["inc", "lib"]
    assert a.opt_level == 2
    assert a.ptxas_args == ["-v", "-warn-spills", "-O1"]
    assert a.toolchain_args == ["-Wall", "-w", "-Wextra"]
    assert a.resource_usage and a.lineinfo and a.G and a.MD and a.MP
    assert a.MF == "k.d" and a.MT == ["a", "b"]
    assert namespace(["k.tile", "-O", "0"]).opt_level == 0
    assert namespace(["k.tile", "-M"]).M and namespace(["k.tile", "-MM"]).M
    assert namespace(["k.tile", "-c"]).emit == "object"


@pytest.mark.parametrize("argv, message", [
    (["k.tile", "--targte", "sm90"], "did you mean --target?"),
    (["k.tile", "-lineinf"], "did you mean -lineinfo"),
    (["k.tile", "-O4"], "-O '4': expected 0, 1, 2 or 3"),
    (["k.tile", "-gencode", "sm_90"], "expected arch=compute_XX,code=sm_XX"),
    (["k.tile", "-gencode", "arch=compute_80,code=compute_80"], "tilec embeds machine code only"),
    (["k.tile", "-arch=native"], "expected an architecture such as sm_90"),
    (["k.tile", "--compiler", "nvccc"], "--compiler 'nvccc': expected one of nvcc, nvrtc"),
    (["k.tile", "-o"], "-o needs a value"),
    (["k.tile", "j.tile"], "one FILE at a time"),
    (["k.tile", "-c", "--emit", "cu"], "-c writes an object"),
    (["k.tile", "-G=1"], "takes no value"),
    (["k.tile", "--no-c"], "ambiguous option '--no-c': --no-cache, --no-color"),
])
def test_bad_command_lines_are_usage_errors(argv, message):
    with pytest.raises(UsageError) as e:
        namespace(argv)
    assert message in e.value.message


def test_unique_prefixes_of_long_options_still_work():
    """argparse accepted `--resource` for `--resource-usage`; scripts written for it keep working."""
    a = namespace(["k.tile", "--resource", "--verify", "--manif", "m.json", "--targ=sm80"])
    assert a.resource_usage and a.verify_ir and a.manifest == "m.json" and a.target == "sm80"


def test_subcommands_take_unique_prefixes_too(capsys):
    assert tilec_main(["run", VECTOR_ADD, "--dev", "cpu", "--si", "N=10", "--see", "3"]) == 0
    assert "C: f16[10]" in capsys.readouterr().out
    assert tilec_main(["run", VECTOR_ADD, "--targte", "sm80"]) == 2
    err = capsys.readouterr().err
    assert "--target" in err and "-target" not in err.replace("--target", "")


def test_opt_level_and_pass_through_are_part_of_the_cache_key():
    base = CompileOptions.make("sm90")
    keys = {json.dumps(o.key(), sort_keys=True) for o in (
        base, base.replace(opt_level=0), base.replace(opt_level=3), base.replace(ptxas_args=("-v",)),
        base.replace(toolchain_args=("-w",)))}
    assert len(keys) == 5


# ---------------------------------------------------------------------------- exit statuses, messages


def test_exit_statuses_and_did_you_mean(tmp_path, capsys):
    assert tilec_main([VECTOR_ADD, "--targte", "sm90"]) == 2
    assert "did you mean --target?" in capsys.readouterr().err
    assert tilec_main(["run", VECTOR_ADD, "--targte", "sm90"]) == 2
    assert "--target" in capsys.readouterr().err
    assert tilec_main([]) == 2  # no FILE
    assert capsys.readouterr().err == ("tilec: error: no input FILE (a .tile source; `tilec targets` lists the "
                                       "targets)\n(`tilec --help` shows the usage)\n")  # the hint once
    assert tilec_main(["tagrets"]) == 2
    assert "did you mean targets?" in capsys.readouterr().err
    assert tilec_main([str(tmp_path / "missing.tile"), "-o", str(tmp_path / "x.cu")]) == 1
    bad = tmp_path / "bad.tile"
    bad.write_text("kernel k(A: f32[N]):\n    with Kernel(1, threads=32) as bx:\n        nosuch(A)\n")
    assert tilec_main([str(bad), "-o", str(tmp_path / "x.cu")]) == 1
    err = capsys.readouterr().err
    assert f"{bad}:3:9: error:" in err and "\n          nosuch(A)\n" in err and "\n          ^" in err


@pytest.mark.parametrize("argv", [["--version"], ["-V"], [VECTOR_ADD, "-o", "x.cu", "--version"],
                                  ["-arch=sm_90", "-V", VECTOR_ADD], ["run", VECTOR_ADD, "--version"],
                                  ["targets", "-V"]])
def test_version_anywhere(argv, capsys):
    assert tilec_main(argv) == 0
    assert capsys.readouterr().out.strip() == "tilec 0.1.0"


def test_version_as_an_options_value_is_not_the_version_flag(tmp_path, capsys):
    """`-Xptxas -V` passes -V to ptxas: it is a value, so the command compiles (here to CUDA source)."""
    out = tmp_path / "k.cu"
    assert tilec_main([VECTOR_ADD, "-t", "sm90", "-Xptxas", "-V", "-o", str(out)]) == 0
    assert "tilec 0.1.0" not in capsys.readouterr().out and out.exists()


def test_xptxas_needs_a_cuda_target(tmp_path, capsys):
    assert tilec_main([VECTOR_ADD, "-t", "webgpu", "-Xptxas", "-v", "-o", str(tmp_path / "k.wgsl")]) == 1
    assert "-Xptxas: the webgpu target has no ptxas step" in capsys.readouterr().err


# ---------------------------------------------------------------------------- builds


@pytest.mark.parametrize("argv, archs", [
    (["-arch=sm_90"], ["sm_90a"]),
    (["-arch", "sm_80"], ["sm_80"]),
    (["--gpu-architecture=sm_90a"], ["sm_90a"]),
    (["-arch=compute_80", "-code=sm_80"], ["sm_80"]),
    (["-gencode", "arch=compute_80,code=sm_80"], ["sm_80"]),
    (["-arch=sm_80", "-O0", "-Xptxas", "-warn-spills", "-Xcompiler", "-w", "-res-usage", "-lineinfo"], ["sm_80"]),
    (["-arch=sm_80", "-DN_unused=1", "-I", str(ROOT / "samples"), "-MD", "-MP"], ["sm_80"]),
])
def test_each_nvcc_form_builds_vector_add(nvcc, tmp_path, argv, archs):
    out = tmp_path / "v.cubin"
    assert tilec_main([VECTOR_ADD, *argv, "--output-file", str(out)]) == 0
    assert out.stat().st_size > 1000
    assert json.loads(Path(str(out) + ".json").read_text())["archs"] == archs


def test_two_gencodes_make_one_fatbin_with_both(nvcc, tmp_path):
    out = tmp_path / "v.fatbin"
    assert tilec_main([VECTOR_ADD, "-gencode", "arch=compute_80,code=sm_80", "-gencode",
                       "arch=compute_90a,code=sm_90a", "-o", str(out), "--no-cache"]) == 0
    listing = subprocess.run([_require(_cuobjdump(), "cuobjdump (pip nvidia-cuda-cuobjdump)"), "--list-elf",
                              str(out)], capture_output=True, text=True, check=True).stdout
    assert "sm_80" in listing and "sm_90a" in listing, listing


def test_opt_level_and_pass_through_reach_nvcc(nvcc, tmp_path, capsys):
    assert tilec_main([VECTOR_ADD, "-arch=sm_80", "-O1", "-Xptxas", "-warn-spills", "--toolchain-args=-w", "--dryrun",
                       "-o", str(tmp_path / "v.cubin")]) == 0
    cmd = capsys.readouterr().out
    assert "-Xptxas -O1 -Xptxas -warn-spills" in cmd and cmd.rstrip().endswith(" -w"), cmd


def test_opt_level_and_pass_through_reach_nvrtc(tmp_path, capsys):
    from tilec.targets.cuda.nvrtc import find_lib

    _require(find_lib(), "NVRTC (pip nvidia-cuda-nvrtc)")
    assert tilec_main([VECTOR_ADD, "-arch=sm_80", "--compiler", "nvrtc", "-O2", "-Xptxas", "-v", "--dryrun",
                       "-Xcompiler", "--extra-device-vectorization", "-o", str(tmp_path / "v.cubin")]) == 0
    cmd = capsys.readouterr().out
    assert "--ptxas-options=-O2 --ptxas-options=-v --extra-device-vectorization" in cmd, cmd


def test_opt_level_and_pass_through_reach_hipcc_and_clang():
    from tilec.targets.hip.toolchain import command

    cmd = command("clang", "clang-19", "gfx942", "k.hip", "k.hsaco", "hsaco", opt_level=1, extra=("-w",))
    assert "-O1" in cmd and "-O3" not in cmd and cmd[cmd.index("-w") + 1] == "-c"
    assert "-O3" in command("clang", "clang-19", "gfx942", "k.hip", "k.hsaco", "hsaco")


def test_compile_only_object(tmp_path, capsys):
    """-c: a relocatable object where a back end writes the "object" kind, else a clear error (not a usage dump)."""
    from tilec.cli.build import output_kinds

    out = tmp_path / "k.o"
    rc = tilec_main([VECTOR_ADD, "-arch=sm_90", "-c", "-o", str(out)])
    if "object" in output_kinds().values():
        assert rc == 0 and out.exists()
    else:
        assert rc == 1
        assert "-c: this tilec cannot write a relocatable object" in capsys.readouterr().err


# ---------------------------------------------------------------------------- help, colour, completion


def test_help_groups_options_like_nvcc(capsys):
    assert tilec_main(["--help"]) == 0
    out = capsys.readouterr().out
    for panel in ("Commands", "Targets", "Outputs", "Preprocessing and dependencies", "Toolchain",
                  "Diagnostics and display", "Examples"):
        assert f"─ {panel} ─" in out, panel
    for name in ("-gencode", "-Xptxas", "-res-usage", "--completion", "run", "targets"):
        assert name in out


@pytest.mark.parametrize("name", ["run", "bench", "tune", "targets", "cache"])
def test_each_subcommand_has_its_own_help(name, capsys):
    assert tilec_main([name, "--help"]) == 0
    out = capsys.readouterr().out
    assert f"Usage: tilec {name}" in out
    assert "targets:" not in out and "toolchains:" not in out  # `tilec targets --help` is help, not the list


def _warning_source(tmp_path) -> str:
    src = tmp_path / "w.tile"
    src.write_text(Path(VECTOR_ADD).read_text())
    return str(src)


@pytest.mark.parametrize("flags, env, tty, colored", [
    ([], {}, False, False),
    ([], {}, True, True),
    ([], {"NO_COLOR": "1"}, True, False),
    (["--color=always"], {}, False, True),
    (["--color=always"], {"NO_COLOR": "1"}, False, True),
    (["--color", "never"], {}, True, False),
    (["--no-color"], {}, True, False),
])
def test_color_follows_the_flag_the_terminal_and_no_color(tmp_path, monkeypatch, capsys, flags, env, tty, colored):
    monkeypatch.delenv("NO_COLOR", raising=False)
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    monkeypatch.setattr(sys.stderr, "isatty", lambda: tty)
    src = _warning_source(tmp_path)
    assert tilec_main([src, "-D", "nosuch=1", "-o", str(tmp_path / "k.cu"), "--no-cache", *flags]) == 0
    err = capsys.readouterr().err
    assert "warning:" in err
    assert ("\x1b[" in err) == colored, err


def test_completion_scripts_generate(capsys):
    for shell, marker in (("bash", "complete -o filenames -F _tilec_complete tilec"), ("zsh", "#compdef tilec"),
                          ("fish", "complete -c tilec")):
        assert tilec_main(["--completion", shell]) == 0
        text = capsys.readouterr().out
        assert marker in text and "tilec __complete" in text
        checker = shutil.which(shell)
        if checker:  # the shell parses it (bash -n, zsh -n, fish -n)
            r = subprocess.run([checker, "-n"], input=text, capture_output=True, text=True)
            assert r.returncode == 0, r.stderr
    assert tilec_main(["--completion", "tcsh"]) == 2


def test_completion_candidates(tmp_path, monkeypatch):
    from tilec.cli.completion import candidates

    monkeypatch.chdir(tmp_path)
    (tmp_path / "k.tile").write_text("")
    (tmp_path / "notes.txt").write_text("")
    (tmp_path / "lib").mkdir()
    assert set(candidates(["tilec", ""], 1)) >= {"run", "targets", "k.tile", "lib/"}
    assert "notes.txt" not in candidates(["tilec", ""], 1)
    assert candidates(["tilec", "k.tile", "--targ"], 2) == ["--target"]
    assert "sm90" in candidates(["tilec", "k.tile", "--target", "sm"], 3)
    assert "--target=sm80" in candidates(["tilec", "k.tile", "--target=sm"], 2)
    assert "sm80" in candidates(["tilec", "k.tile", "--target", "=", "sm"], 4)  # bash splits at =
    assert "sm_90a" in candidates(["tilec", "k.tile", "-arch", "sm_9"], 3)
    assert candidates(["tilec", "k.tile", "--compiler", ""], 3) == ["nvcc", "nvrtc", "auto"]
    assert candidates(["tilec", "k.tile", "-I", ""], 3) == ["lib/"]
    assert "--check" in candidates(["tilec", "run", "k.tile", "--ch"], 3)
    assert "webgpu" in candidates(["tilec", "run", "k.tile", "--target", "w"], 4)


def _tilec_on_path(tmp_path) -> dict:
    """An environment whose PATH has a `tilec` running this checkout."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    wrapper = bindir / "tilec"
    wrapper.write_text(f"#!/bin/sh\nexec {sys.executable} -m tilec \"$@\"\n")
    wrapper.chmod(0o755)
    return dict(os.environ, PATH=f"{bindir}{os.pathsep}{os.environ['PATH']}",
                PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))


# each shell with the script loaded completes `tilec k.tile --target sm`; zsh's compadd is replaced by a printer
SHELL_TESTS = {
    "bash": ("source <(tilec --completion bash)\nCOMP_WORDS=(tilec k.tile --target sm)\nCOMP_CWORD=3\n"
             "_tilec_complete\nprintf '%s\\n' \"${COMPREPLY[@]}\"\n"),
    "zsh": ("source <(tilec --completion zsh)\ncompadd() { shift $(( ${@[(i)--]} )); print -l -- \"$@\"; }\n"
            "words=(tilec k.tile --target sm); CURRENT=4; _tilec\n"),
    "fish": "tilec --completion fish | source\ncomplete -C'tilec k.tile --target sm'\n",
}


@pytest.mark.parametrize("shell", sorted(SHELL_TESTS))
def test_shell_completes_a_target_name(shell, tmp_path):
    """The shell, with the script sourced, proposes the targets after --target (bash: COMP_WORDS set and the
    completion function called)."""
    path = shutil.which(shell)
    if path is None:
        if shell == "bash":
            _require(None, "bash")
        pytest.skip(f"{shell} not installed")
    r = subprocess.run([path], input=SHELL_TESTS[shell], capture_output=True, text=True, env=_tilec_on_path(tmp_path),
                       cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    words = set(r.stdout.split())
    assert {"sm80", "sm90", "sm100"} <= words, r.stdout
    assert "webgpu" not in words


# ---------------------------------------------------------------------------- progress


def test_no_progress_on_a_pipe_or_when_quiet(monkeypatch):
    from tilec.cli.build import _toolchain_spinner

    args = type("A", (), {"quiet": False, "dryrun": False})()
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)
    assert _toolchain_spinner(args, ("sm80", "sm90")).enabled
    assert not _toolchain_spinner(args, ("sm90",)).enabled  # one target: nothing to show
    args.quiet = True
    assert not _toolchain_spinner(args, ("sm80", "sm90")).enabled
    args.quiet = False
    monkeypatch.setattr(sys.stderr, "isatty", lambda: False)
    assert not _toolchain_spinner(args, ("sm80", "sm90")).enabled


def test_help_color_follows_the_flag(capsys, monkeypatch):
    monkeypatch.delenv("NO_COLOR", raising=False)
    assert tilec_main(["--help"]) == 0
    assert "\x1b[" not in capsys.readouterr().out  # a pipe: no colour, no styles
    assert tilec_main(["--help", "--color=always"]) == 0
    assert "\x1b[" in capsys.readouterr().out
    monkeypatch.setenv("NO_COLOR", "1")
    assert tilec_main(["targets", "--help", "--color=always"]) == 0
    assert "\x1b[" in capsys.readouterr().out
    assert tilec_main(["targets", "--help"]) == 0
    assert "\x1b[" not in capsys.readouterr().out


def test_spinner_starts_and_stops_on_a_terminal(monkeypatch, capsys):
    from tilec.cli.progress import Spinner

    spinner = Spinner("building sm80, sm90", enabled=True)
    spinner.start()
    assert spinner.live is not None
    spinner.stop()
    assert spinner.live is None
    idle = Spinner("building", enabled=False)
    idle.start()
    assert idle.live is None
    capsys.readouterr()


# ---------------------------------------------------------------------------- nvcc's flags under NVRTC


@pytest.fixture(scope="module")
def nvrtc():
    from tilec.targets.cuda.locate import nvrtc_lib

    return _require(nvrtc_lib(), "NVRTC (pip nvidia-cuda-nvrtc)")


def test_nvcc_flags_do_what_nvcc_does_under_nvrtc(nvrtc, tmp_path, capsys):
    """-Xptxas -v prints ptxas's lines (from ptxas's report in NVRTC's log, recorded in the manifest: a cache hit
    prints them too), --keep DIR keeps NVRTC's source, PTX, cubin and log, --dryrun says that NVRTC is a call and
    not a command, and -MT "a b" is written as given."""
    out = tmp_path / "v.cubin"
    base = [VECTOR_ADD, "-arch=sm_80", "--compiler", "nvrtc", "-o", str(out)]
    for _ in range(2):  # built, then from the cache
        assert tilec_main([*base, "-Xptxas", "-v"]) == 0
        err = capsys.readouterr().err
        assert "ptxas info    : Compiling entry function 'vector_add' for 'sm_80'" in err, err
        assert re.search(r"ptxas info    : Used \d+ registers, \d+ bytes smem", err), err
    keep = tmp_path / "keep"
    keep.mkdir()
    assert tilec_main([*base, f"--keep={keep}"]) == 0
    stem = "vector_add.tilec-keep"  # never a source's name (tilec/outputs.py keep_stem)
    assert sorted(p.name for p in keep.iterdir()) == [f"{stem}.cu", f"{stem}.cubin", f"{stem}.log", f"{stem}.ptx"]
    assert "__global__" in (keep / f"{stem}.cu").read_text() and ".entry vector_add" in \
        (keep / f"{stem}.ptx").read_text()
    assert (keep / f"{stem}.cubin").read_bytes() == out.read_bytes()
    from tilec.cli.compile_flags import COMPILE_FLAGS
    from tilec.cli.flags import parse

    for order in (["--keep-dir", "kd", "--keep"], ["--keep", "--keep-dir", "kd"], ["--keep-dir=kd"]):
        assert parse(COMPILE_FLAGS, ["k.tile", *order])["keep"] == "kd", order  # nvcc's: kd holds them
    assert parse(COMPILE_FLAGS, ["k.tile", "--keep"])["keep"] == "."
    capsys.readouterr()
    assert tilec_main([*base, "--dryrun"]) == 0
    shown = capsys.readouterr().out
    assert shown.startswith("# NVRTC, in process (no command to run): nvrtcCompileProgram(vector_add.cu, "), shown
    assert tilec_main([*base, "-M", "-MT", "a b", "-MT", "c$d"]) == 0
    assert capsys.readouterr().out.startswith("a b c$$d: \\\n")
