# What a run costs after its session was idle past release_idle_after_ms (its arena and
# cache given back, faulted in again by the run) against a session that keeps them, both
# run after the same pause, alternating; medians of 15 runs each.
#   /usr/bin/python3 bench/refault.py MODEL.onnx [PAUSE_S]   (after building: build/python)
# The input: the model's reference input where its folder has one (inputs/NAME.npy), else
# uniform(-1, 1) of the declared shape.
import os
import statistics
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "build", "python"))
import bulkhead  # noqa: E402

if len(sys.argv) < 2:
    sys.exit("usage: refault.py MODEL.onnx [PAUSE_S]")
path = sys.argv[1]
pause = float(sys.argv[2]) if len(sys.argv) > 2 else 0.2
env = bulkhead.Env()
released = env.load(path, threads=1, release_idle_after_ms=50)
kept = env.load(path, threads=1, release_idle_after_ms=-1)
io = released.inputs[0]
npy = os.path.join(os.path.dirname(path), "inputs", io["name"] + ".npy")
x = {io["name"]: np.load(npy) if os.path.exists(npy)
     else np.random.default_rng(1).uniform(-1, 1, io["shape"]).astype(np.float32)}
for s in (released, kept):
    for _ in range(3):
        s.run(x)
times = {"released": [], "kept": []}
for i in range(15):
    order = (("released", released), ("kept", kept)) if i % 2 else (("kept", kept), ("released", released))
    for name, s in order:
        time.sleep(pause)
        t0 = time.perf_counter()
        s.run(x)
        times[name].append((time.perf_counter() - t0) * 1e3)
trimmed = sum(m["trimmed"] for m in released.memory().values())
mr, mk = statistics.median(times["released"]), statistics.median(times["kept"])
print(f"{path}: after {pause * 1e3:.0f} ms pauses, given back {mr:.2f} ms, kept {mk:.2f} ms, "
      f"ratio {mr / mk:.3f} ({trimmed / 2**20:.0f} MiB given back in all)")
