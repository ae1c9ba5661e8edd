"""Headless Chromium driven over the DevTools protocol on a pipe (`--remote-debugging-pipe`: JSON messages ending
in a NUL byte, commands on the child's fd 3, replies on its fd 4), with no library: open a page with WebGPU
enabled, evaluate expressions in it until one says the page is done, take a screenshot. For tests/test_web_page.py.

Chromium's WebGPU without a GPU: Dawn on SwiftShader (Chromium's own Vulkan on the CPU), which
`--use-webgpu-adapter=swiftshader` selects; it finds no adapter on Mesa's lavapipe here.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
import tempfile
import time

WEBGPU_FLAGS = ["--headless=new", "--no-sandbox", "--enable-unsafe-webgpu", "--enable-features=Vulkan",
                "--ignore-gpu-blocklist", "--disable-gpu-sandbox", "--use-webgpu-adapter=swiftshader",
                "--hide-scrollbars", "--no-first-run", "--disable-dev-shm-usage"]


def find_chromium() -> str | None:
    for name in (os.environ.get("TILEC_CHROMIUM"), "chromium", "chromium-browser", "google-chrome"):
        path = name and shutil.which(name)
        if path:
            return path
    return None


class Chromium:
    """One headless Chromium showing `url`; `evaluate` runs JavaScript in the page (promises awaited)."""

    def __init__(self, chromium: str, url: str, size: tuple[int, int] = (900, 640)) -> None:
        to_child, self._to_chrome = os.pipe()
        self._from_chrome, from_child = os.pipe()

        def at_fds_3_and_4() -> None:  # in the child: the pipe ends where Chromium looks for them
            a, b = os.dup(to_child), os.dup(from_child)
            os.dup2(a, 3)
            os.dup2(b, 4)
            os.set_inheritable(3, True)
            os.set_inheritable(4, True)

        env = {**os.environ}
        if not os.path.isdir(env.get("XDG_RUNTIME_DIR", "")):
            env["XDG_RUNTIME_DIR"] = tempfile.mkdtemp(prefix="tilec-xdg-")
        self._profile = tempfile.mkdtemp(prefix="tilec-chromium-")
        self._proc = subprocess.Popen(
            [chromium, *WEBGPU_FLAGS, "--remote-debugging-pipe", f"--user-data-dir={self._profile}",
             f"--window-size={size[0]},{size[1]}", url],
            preexec_fn=at_fds_3_and_4, close_fds=False, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        os.close(to_child)
        os.close(from_child)
        self._buf, self._id = b"", 0
        page = next(t for t in self.call("Target.getTargets")["targetInfos"] if t["type"] == "page")
        self._session = self.call("Target.attachToTarget", {"targetId": page["targetId"], "flatten": True})["sessionId"]

    def call(self, method: str, params: dict | None = None, session: str | None = None) -> dict:
        self._id += 1
        msg = {"id": self._id, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        os.write(self._to_chrome, json.dumps(msg).encode() + b"\0")
        while True:
            while b"\0" not in self._buf:
                chunk = os.read(self._from_chrome, 1 << 16)
                if not chunk:
                    raise RuntimeError("Chromium closed its DevTools pipe")
                self._buf += chunk
            raw, self._buf = self._buf.split(b"\0", 1)
            reply = json.loads(raw)
            if reply.get("id") == self._id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply["result"]

    def evaluate(self, expression: str):
        r = self.call("Runtime.evaluate", {"expression": expression, "returnByValue": True, "awaitPromise": True},
                      self._session)
        if "exceptionDetails" in r:
            raise RuntimeError(r["exceptionDetails"].get("exception", {}).get("description", str(r)))
        return r["result"].get("value")

    def wait_for(self, expression: str, timeout: float):
        """The first truthy value of `expression`, polled each half second (None after `timeout` seconds)."""
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            value = self.evaluate(expression)
            if value:
                return value
            time.sleep(0.5)
        return None

    def screenshot(self) -> bytes:
        return base64.b64decode(self.call("Page.captureScreenshot", {"format": "png"}, self._session)["data"])

    def close(self) -> None:
        try:
            self.call("Browser.close")
        except (RuntimeError, OSError):
            pass
        try:
            self._proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()
        for fd in (self._to_chrome, self._from_chrome):
            os.close(fd)
        shutil.rmtree(self._profile, ignore_errors=True)

    def __enter__(self) -> Chromium:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
