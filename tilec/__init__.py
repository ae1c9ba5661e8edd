"""tilec: an ahead-of-time compiler for tile-level GPU kernels.

`tilec.compile` is the one pipeline entry point used by the CLI, the Python API and the tests.
Importing this package is cheap: the compiler proper is imported on first use, so that
tilec.runtime works where only numpy and the GPU driver are installed.
"""

__version__ = "0.1.0"


def compile(*args, **kwargs):  # noqa: A001  (the natural name for a compiler's entry point)
    from .driver import compile as _compile

    return _compile(*args, **kwargs)


__all__ = ["compile", "__version__"]
