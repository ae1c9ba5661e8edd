"""`tilec check-deploy PACKAGE`: run every kernel of a package on this GPU and driver against the results recorded
when it was built (tilec/deploy_check.py, which `python -m tilec.deploy_check` runs without the CLI)."""

from __future__ import annotations

from typing import Annotated

import typer

from . import params as p


def command(
    package: Annotated[str, typer.Argument(metavar="PACKAGE", help="A directory written by tilec package.",
                                           show_default=False)],
    report: Annotated[str | None, typer.Option("--report", metavar="FILE", help="Where to write the JSON report "
                                               "(default PACKAGE/check-deploy.json).", show_default=False)] = None,
    device: Annotated[int, typer.Option("--device", metavar="N", help="The GPU.")] = 0,
    no_jit: Annotated[bool, typer.Option("--no-jit", help="Refuse PTX images, as TILEC_NO_JIT=1.")] = False,
    debug: p.Debug = False,
) -> None:
    """Check a package on the GPU and driver of this machine: load each artifact (the image the GPU runs: its own
    cubin, a cubin of its major version, or PTX through the driver's JIT), run each kernel on the recorded inputs,
    compare with the recorded reference outputs (tolerances by dtype), print a line per kernel and write a JSON
    report (GPU, driver, per kernel: artifact, image chosen, load time, pass/fail, error). Exit status 0 when every
    kernel passed. Needs numpy and the CUDA driver, no compiler.
    """
    from ..deploy_check import run_check

    p.finish(run_check(package, report, device, True if no_jit else None))
