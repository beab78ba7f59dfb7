#!/usr/bin/python3
"""What a call costs from Python, next to C++ and the C API (bench/api_bench.cc).

    /usr/bin/python3 bench/python_bench.py [--build build] [--calls 20000]

Runs api_bench (C++ and C API medians), then the same models from Python, both with
bulkhead's API (Session.run, returning a dict) and with ONNX Runtime's call shape
(InferenceSession.run, returning a list), and prints the medians of per-call times and
the overhead of each over C++. The `shape` model's work does not depend on its input, so
its time across input sizes shows whether the input is copied (a copy of 64 MiB costs
~10 ms here; no copy: flat).
"""
import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np


def median_us(calls, fn):
    for _ in range(20):
        fn()
    t = []
    clock = time.perf_counter
    for _ in range(calls):
        a = clock()
        fn()
        t.append((clock() - a) * 1e6)
    return statistics.median(t)


def main():
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default=os.path.join(root, "build"))
    ap.add_argument("--calls", type=int, default=20000)
    args = ap.parse_args()
    sys.path.insert(0, os.path.join(args.build, "python"))
    import bulkhead

    bench = os.path.join(args.build, "tests", "api_bench")
    rows = {}
    out = subprocess.run([bench, "--calls", str(args.calls)], check=True, capture_output=True, text=True).stdout
    for line in out.splitlines()[1:]:
        api, model, *size, us = line.split()
        rows[(api, model, " ".join(size))] = float(us)

    with tempfile.TemporaryDirectory() as d:
        subprocess.run([bench, "--models-out", d], check=True)
        env = bulkhead.Env()
        add = env.load(os.path.join(d, "add.onnx"), threads=1)
        shape = env.load(os.path.join(d, "shape.onnx"), threads=1)
        so = bulkhead.SessionOptions()
        so.intra_op_num_threads = 1
        add_ort = bulkhead.InferenceSession(os.path.join(d, "add.onnx"), so)
        shape_ort = bulkhead.InferenceSession(os.path.join(d, "shape.onnx"), so)
    x = np.array([[1, 2, 3, 4]], np.float32)
    feed = {"x": x, "z": x}
    rows[("python", "add", "32 B")] = median_us(args.calls, lambda: add.run(feed))
    rows[("ort-py", "add", "32 B")] = median_us(args.calls, lambda: add_ort.run(None, feed))
    for size, label in ((4096, "4 KiB"), (1 << 20, "1 MiB"), (16 << 20, "16 MiB"), (64 << 20, "64 MiB")):
        big = {"x": np.zeros(size // 4, np.float32)}
        n = max(100, args.calls // 100)
        rows[("python", "shape", label)] = median_us(n, lambda: shape.run(big))
        rows[("ort-py", "shape", label)] = median_us(n, lambda: shape_ort.run(None, big))

    print("%-7s %-6s %-8s %10s %14s" % ("api", "model", "input", "median_us", "over_c++_us"))
    for api in ("c++", "c", "python", "ort-py"):
        for (a, model, size), us in rows.items():
            if a == api:
                base = rows.get(("c++", model, size))
                print("%-7s %-6s %-8s %10.2f %14s" % (api, model, size, us, "" if api == "c++" else "%+.2f" % (us - base)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
