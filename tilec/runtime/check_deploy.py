"""`python -m tilec.runtime.check_deploy PACKAGE`: `tilec check-deploy` where only tilec.runtime, numpy and the CUDA
driver are installed (tilec/runtime/package.py does the work)."""

from __future__ import annotations

import sys

from .package import run_check


def main(argv: list[str] | None = None) -> int:
    import argparse

    ap = argparse.ArgumentParser(prog="python -m tilec.runtime.check_deploy",
                                 description="Check a tilec package on this GPU and driver (tilec check-deploy).")
    ap.add_argument("package")
    ap.add_argument("--report", help="write the JSON report here (default: PACKAGE/check-deploy.json)")
    ap.add_argument("--device", type=int, default=0)
    ap.add_argument("--no-jit", action="store_true", help="refuse PTX images (as TILEC_NO_JIT=1)")
    args = ap.parse_args(argv)
    return run_check(args.package, args.report, args.device, True if args.no_jit else None)


if __name__ == "__main__":
    sys.exit(main())
