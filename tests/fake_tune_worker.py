"""A stand-in for `python -m tilec.runtime.tune_worker --serve FOLDER` (tests/test_tune_pool.py): the same JSON-lines
protocol, with a fake timer instead of a GPU. A candidate's time at a shape is a fixed function of its index and the
shape, scaled per device by FAKE_DEVICE_SCALE (so winners do not depend on which device timed them). It misbehaves on
request: FAKE_DIE_ON=<index> exits the first time that candidate arrives (a marker file in the folder remembers),
FAKE_HANG_ON=<index> never answers for that candidate."""

import json
import os
import sys
import time
from pathlib import Path

folder = Path(sys.argv[-1])
plan = json.loads((folder / "plan.json").read_text())
device = os.environ.get("CUDA_VISIBLE_DEVICES", "?")
scale = 1.0 + 0.03 * int(device) if device.isdigit() else 1.0


def fake_ms(index: int, shape: dict) -> float:
    m = shape["M"]
    return scale * (1.0 + ((index * 7 + m) % 11) / 10.0)


for line in sys.stdin:
    message = json.loads(line)
    index = message.get("index")
    if str(index) == os.environ.get("FAKE_DIE_ON"):
        marker = folder / f"died.{index}"
        if not marker.exists():
            marker.write_text(device)
            os._exit(3)
    if str(index) == os.environ.get("FAKE_HANG_ON"):
        time.sleep(3600)
    if message["op"] == "info":
        reply = {"gpu": "Fake GPU", "uuid": f"GPU-fake-{device}", "cc": "9.0", "cuda_driver": 13000}
    else:
        labels = message.get("shapes") or [",".join(f"{k}={v}" for k, v in s.items()) for s in plan["shapes"]]
        shapes = {",".join(f"{k}={v}" for k, v in s.items()): s for s in plan["shapes"]}
        reply = {"times": {label: fake_ms(index, shapes[label]) for label in labels}}
        if message["op"] == "run":
            reply["check"] = "ok"
    print(json.dumps(reply), flush=True)
