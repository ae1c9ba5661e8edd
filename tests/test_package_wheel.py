"""`tilec package --wheel NAME` (tilec/package_wheel.py): the package directory as an installable wheel -- its
RECORD, reproducibility, the module it installs and what that module's load() calls -- on a stand-in package
directory (the packages the compiler builds are tested in test_deploy_package.py, which also builds the wheel)."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import sys
import zipfile

import pytest

from tilec.diagnostics import CompileError
from tilec.package_wheel import write_wheel

INDEX = {"package_format": 1, "tilec_version": "0", "targets": ["sm80", "sm90"],
         "kernels": [{"kernel": "softmax", "file": "softmax.fatbin"}, {"kernel": "gemm", "file": "gemm.fatbin"}]}


def _package(d, payload: bytes):
    d.mkdir()
    (d / "index.json").write_text(json.dumps(INDEX))
    for n in ("softmax.fatbin", "gemm.fatbin"):
        (d / n).write_bytes(payload + n.encode())
        (d / f"{n}.json").write_text("{}")
    return d


def test_the_wheel_records_every_file_and_is_reproducible(tmp_path):
    payload = os.urandom(int.from_bytes(os.urandom(2), "little") + 1)
    a = write_wheel(_package(tmp_path / "a", payload), "my_kernels", "2.1.0", INDEX)
    b = write_wheel(_package(tmp_path / "b", payload), "my_kernels", "2.1.0", INDEX)
    assert a.name == "my_kernels-2.1.0-py3-none-any.whl" and a.read_bytes() == b.read_bytes()
    with zipfile.ZipFile(a) as z:
        names = z.namelist()
        assert "my_kernels/__init__.py" in names and "my_kernels/kernels/gemm.fatbin" in names
        assert "my_kernels/kernels/index.json" in names and not any(n.endswith(".whl") for n in names)
        record = z.read("my_kernels-2.1.0.dist-info/RECORD").decode().splitlines()
        for line in record:
            path, digest, size = line.rsplit(",", 2)
            if path.endswith("RECORD"):
                assert (digest, size) == ("", "")
                continue
            data = z.read(path)
            want = "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
            assert (digest, int(size)) == (want, len(data)), path
        assert len(record) == len(names)
        meta = z.read("my_kernels-2.1.0.dist-info/METADATA").decode()
        assert "Name: my_kernels\nVersion: 2.1.0\n" in meta and "Requires-Dist: tilec>=" in meta
        assert "Tag: py3-none-any" in z.read("my_kernels-2.1.0.dist-info/WHEEL").decode()
    again = write_wheel(tmp_path / "a", "my_kernels", "2.1.0", INDEX)  # a wheel in the folder is not packed
    assert again.read_bytes() == a.read_bytes()


def test_the_installed_module_loads_its_kernels_folder(tmp_path, monkeypatch):
    wheel = write_wheel(_package(tmp_path / "p", b"x"), "wheel_test_kernels", "1.0", INDEX)
    site = tmp_path / "site"
    with zipfile.ZipFile(wheel) as z:
        z.extractall(site)  # what pip puts in site-packages for a pure wheel
    monkeypatch.syspath_prepend(str(site))
    import tilec.runtime

    seen = {}
    monkeypatch.setattr(tilec.runtime, "load_package", lambda path, no_jit=None: seen.update(path=path, no_jit=no_jit)
                        or "loaded")
    import wheel_test_kernels

    try:
        assert wheel_test_kernels.load(no_jit=True) == "loaded"
        assert seen == {"path": site / "wheel_test_kernels" / "kernels", "no_jit": True}
        assert (seen["path"] / "gemm.fatbin").read_bytes() == b"xgemm.fatbin"
        assert "gemm, softmax" in wheel_test_kernels.__doc__
    finally:
        sys.modules.pop("wheel_test_kernels", None)


@pytest.mark.parametrize("name, version, message", [
    ("my-kernels", "1.0", "must be a Python identifier"),
    ("k", "one", "not a version"),
])
def test_bad_names_and_versions_are_errors(tmp_path, name, version, message):
    with pytest.raises(CompileError, match=message):
        write_wheel(_package(tmp_path / "p", b""), name, version, INDEX)
