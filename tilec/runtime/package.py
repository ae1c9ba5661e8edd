"""Artifact packages on the deployment side: `load_package`, the kernels of a package built by `tilec package`
(tilec/packaging.py), each from the artifact that suits this GPU and driver. tilec/deploy_check.py checks a package
on a GPU with what this module reads."""

from __future__ import annotations

import json
import os
from pathlib import Path

from ..errors import UserFacingError
from ..manifest import choose_image

INDEX_NAME = "index.json"
READ_FORMATS = (1,)
_RANK = {"exact": 0, "same_major": 1, "jit": 2}  # the better image first


class PackageError(UserFacingError, RuntimeError):
    pass


def read_index(package: str | os.PathLike) -> dict:
    path = Path(package) / INDEX_NAME
    try:
        index = json.loads(path.read_text())
    except FileNotFoundError:
        raise PackageError(f"{package}: not a tilec package (no {INDEX_NAME}; build one with tilec package)") from None
    except ValueError as e:
        raise PackageError(f"{path}: not a tilec package index ({e})") from None
    if index.get("package_format") not in READ_FORMATS:
        raise PackageError(f"{path}: package format {index.get('package_format')!r} is not one this tilec.runtime "
                           f"reads ({', '.join(map(str, READ_FORMATS))})")
    return index


class Package:
    """The kernels of a package as attributes (`pkg.softmax(x)`), each loaded from the artifact picked for GPU
    `device`: among the package's artifacts holding it, one the driver can load, with the best image for this GPU
    (built for exactly it, else a cubin of its major version, else PTX)."""

    def __init__(self, package, device: int = 0, no_jit: bool | None = None):
        from .cuda_driver import Driver

        self.path = Path(package)
        self.index = read_index(package)
        drv = Driver.get(device)
        major, minor = drv.compute_capability()
        self.device_cc, self.driver = major * 10 + minor, drv.driver_version()
        self.no_jit = no_jit
        self.chosen: dict[str, dict] = {}  # kernel -> its index row
        for row in self.index["kernels"]:
            rank = self._rank(row)
            if rank is not None and (row["kernel"] not in self.chosen or rank < self._rank(self.chosen[row["kernel"]])):
                self.chosen[row["kernel"]] = row
        self._modules: dict[str, object] = {}

    def _rank(self, row: dict):
        if self.driver < int(row.get("oldest_driver") or 0):
            return None
        manifest = json.loads((self.path / row["manifest"]).read_text())
        choice = choose_image(manifest, self.device_cc)
        return None if choice is None else _RANK[choice.how]

    def module(self, kernel: str):
        """The tilec.runtime Module holding `kernel`, loaded for this GPU."""
        row = self.chosen.get(kernel)
        if row is None:
            known = sorted({r["kernel"] for r in self.index["kernels"]})
            if kernel in known:
                raise PackageError(f"{self.path}: no artifact of kernel '{kernel}' loads on this GPU "
                                   f"(sm_{self.device_cc}, CUDA driver {self.driver // 1000}."
                                   f"{self.driver % 1000 // 10})")
            raise PackageError(f"{self.path} has no kernel '{kernel}' (kernels: {', '.join(known)})")
        mod = self._modules.get(row["file"])
        if mod is None:
            from .loader import load

            mod = self._modules[row["file"]] = load(self.path / row["file"], self.path / row["manifest"],
                                                    no_jit=self.no_jit)
        return mod

    def __getattr__(self, kernel: str):
        if kernel.startswith("_") or "chosen" not in self.__dict__:
            raise AttributeError(kernel)
        return getattr(self.module(kernel), kernel)

    def __dir__(self):
        return [*super().__dir__(), *self.__dict__.get("chosen", {})]


def load_package(package: str | os.PathLike, device: int = 0, no_jit: bool | None = None) -> Package:
    """The kernels of a package built by `tilec package`, for GPU `device` (see Package)."""
    return Package(package, device, no_jit)
