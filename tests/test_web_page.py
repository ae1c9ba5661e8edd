"""examples/web/: the demo page that runs the softmax and gemm ES modules on the visitor's GPU. Built with its
build.sh (the command docs/webgpu.md gives), served over HTTP, and opened in headless Chromium when Chromium finds
a WebGPU adapter here; otherwise the same code (demo.js, which the page imports) runs under Deno. Either way both
kernels must match the JavaScript reference. Skips without either runtime (fails under
TILEC_REQUIRE_TOOLCHAINS=1)."""

from __future__ import annotations

import functools
import http.server
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
WEB = ROOT / "examples" / "web"
sys.path.insert(0, str(ROOT / "tests"))
from chromium_cdp import Chromium, find_chromium  # noqa: E402
from test_webgpu_js import _require, find_deno  # noqa: E402


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """The page and its freshly built modules in a temporary folder, served on localhost."""
    out = tmp_path_factory.mktemp("web")
    for name in ("index.html", "demo.js"):
        shutil.copy(WEB / name, out / name)
    env = {**os.environ, "TILEC": f"{sys.executable} -m tilec", "PYTHONPATH": str(ROOT)}
    r = subprocess.run([str(WEB / "build.sh"), str(out)], capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0, r.stderr
    assert (out / "softmax.js").exists() and (out / "gemm.d.ts").exists()
    handler = functools.partial(_QuietHandler, directory=str(out))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield out, f"http://127.0.0.1:{server.server_address[1]}/"
    server.shutdown()


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args) -> None:
        pass


def test_page_runs_both_kernels_and_matches_the_reference(site):
    out, url = site
    chromium = find_chromium()
    if chromium:
        with Chromium(chromium, url + "index.html") as page:
            state = page.wait_for("(s => s !== 'running' && s)(document.getElementById('status')?.dataset.state)", 600)
            status = page.evaluate("document.getElementById('status').textContent")
            if state == "pass":
                rows = page.evaluate("[...document.querySelectorAll('#results tbody tr')].map(r => r.innerText)")
                assert len(rows) == 2 and all("\tpass\t" in r for r in rows), rows
                if os.environ.get("TILEC_WEB_SCREENSHOT"):  # how docs/webgpu_demo.png was made
                    Path(os.environ["TILEC_WEB_SCREENSHOT"]).write_bytes(page.screenshot())
                return
        assert state == "error", status  # a page that ran must pass; only a missing adapter falls back
        print(f"Chromium ({chromium}) could not run the page ({status}); driving demo.js under Deno instead")
    deno = find_deno()
    _require(deno is not None, "neither Chromium with a WebGPU adapter nor Deno is available")
    driver = out / "drive.js"
    driver.write_text('const {runDemo} = await import("./demo.js");\n'
                      "console.log(JSON.stringify(await runDemo({repeats: 1})));\n")
    env = {**os.environ, "NO_COLOR": "1", "DENO_NO_UPDATE_CHECK": "1"}
    if not os.path.isdir(env.get("XDG_RUNTIME_DIR", "")):
        env["XDG_RUNTIME_DIR"] = tempfile.mkdtemp(prefix="tilec-xdg-")
    r = subprocess.run([deno, "run", "--quiet", "--allow-read", str(driver)], capture_output=True, text=True,
                       env=env, timeout=600, cwd=out)
    assert r.returncode == 0, r.stderr
    results = json.loads(r.stdout.strip().splitlines()[-1])
    assert [x["kernel"] for x in results] == ["softmax", "gemm"]
    assert all(x["ok"] for x in results), results


def test_docs_screenshot_is_a_png():
    assert (ROOT / "docs" / "webgpu_demo.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_npm_package_directory(tmp_path):
    """`--emit npm -o DIR` once per .tile file: the modules, their types and a package.json exporting both."""
    from tilec.cli.main import main as tilec_main

    pkg = tmp_path / "kernels"
    assert tilec_main([str(ROOT / "samples" / "softmax.tile"), "--target", "webgpu", "--emit", "npm", "-o",
                       str(pkg)]) == 0
    assert tilec_main([str(ROOT / "samples" / "gemm.tile"), "--target", "webgpu", "-D", "dtype=f32", "-D",
                       "block_M=64", "-D", "block_N=64", "-D", "block_K=16", "--emit", "npm", "-o", str(pkg)]) == 0
    meta = json.loads((pkg / "package.json").read_text())
    assert meta["type"] == "module" and meta["name"] == "kernels"
    assert meta["exports"] == {f"./{s}": {"types": f"./{s}.d.ts", "default": f"./{s}.js"} for s in ("gemm", "softmax")}
    for s in ("gemm", "softmax"):
        assert (pkg / f"{s}.js").read_text().count("export const WGSL") == 1
        assert f"export function {s}(" in (pkg / f"{s}.d.ts").read_text()
    meta["version"] = "2.0.0"  # the user's edits survive a rebuild
    (pkg / "package.json").write_text(json.dumps(meta))
    assert tilec_main([str(ROOT / "samples" / "softmax.tile"), "--target", "webgpu", "--emit", "npm", "-o",
                       str(pkg)]) == 0
    assert json.loads((pkg / "package.json").read_text())["version"] == "2.0.0"


def test_more_storage_buffers_than_webgpus_default(tmp_path):
    """mha_bwd's flash_bwd binds 9 tensors: refused by default (the error names the flag), built with
    --max-storage-buffers 9, and its module then asks the adapter for 9 storage buffers a stage."""
    from tilec.cli.main import main as tilec_main

    port = [str(ROOT / "examples" / "tilelang" / "mha_bwd_bhsd.tile"), "--target", "webgpu", "-D", "block_M=16",
            "-D", "block_N=16", "-o", str(tmp_path / "bwd.js")]
    assert tilec_main(port) == 1
    assert tilec_main([*port, "--max-storage-buffers", "9"]) == 0
    assert "const NEED={f16:1,limits:{maxStorageBuffersPerShaderStage:9}};" in (tmp_path / "bwd.js").read_text()
