#!/usr/bin/python3
"""Latency of runs that arrive after a pause (a server's sporadic requests), with and
without keeping the OpenMP workers off the caller's CPU (src/backends/cpu/omp_placement.h).

    /usr/bin/python3 bench/paused_runs.py MODEL.onnx INPUT.npy [--threads 2] [--pause-ms 0,10,50]
                                          [--runs 40] [--rounds 3] [--python-dir build/python]

Each round starts one process per variant, alternating: the session runs 20 times back to
back, then --runs times, each after a sleep of the pause; the median, the 90th percentile
and the maximum of those runs are printed per variant and pause, as medians over rounds.
Variants: at --threads with the workers placed (the default), at --threads with
BULKHEAD_CPU_PLACE_WORKERS=0, and at one thread.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

CHILD = r"""
import json, sys, time
sys.path.insert(0, sys.argv[1])
import numpy as np, bulkhead
model, npy, threads, pause, runs = sys.argv[2], sys.argv[3], int(sys.argv[4]), float(sys.argv[5]), int(sys.argv[6])
s = bulkhead.Env().load(model, threads=threads)
x = {s.inputs[0]["name"]: np.load(npy)}
for _ in range(20):
    s.run(x)
ts = []
for _ in range(runs):
    time.sleep(pause)
    a = time.perf_counter()
    s.run(x)
    ts.append((time.perf_counter() - a) * 1e3)
ts.sort()
print(json.dumps({"median": ts[len(ts) // 2], "p90": ts[int(len(ts) * 0.9)], "max": ts[-1]}))
"""


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("model")
    ap.add_argument("input", help="the model's one input, as .npy")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--pause-ms", default="0,10,50")
    ap.add_argument("--runs", type=int, default=40)
    ap.add_argument("--rounds", type=int, default=3)
    here = os.path.dirname(os.path.abspath(__file__))
    ap.add_argument("--python-dir", default=os.path.join(here, "..", "build", "python"))
    a = ap.parse_args()
    for path, what in ((a.model, "model"), (a.input, "input"), (a.python_dir, "--python-dir")):
        if not os.path.exists(path):
            sys.exit("paused_runs: %s '%s' does not exist" % (what, path))
    if a.threads < 2 or a.runs < 1 or a.rounds < 1:
        sys.exit("paused_runs: --threads must be >= 2, --runs and --rounds >= 1")
    try:
        pauses = [float(p) for p in a.pause_ms.split(",")]
    except ValueError:
        sys.exit("paused_runs: --pause-ms must be a list of milliseconds, e.g. 0,10,50")
    variants = [("%d threads, workers placed" % a.threads, a.threads, "1"),
                ("%d threads, not placed" % a.threads, a.threads, "0"),
                ("1 thread", 1, "1")]
    print("| pause ms | variant | median ms | p90 ms | max ms |")
    print("|---|---|---|---|---|")
    for pause in pauses:
        got = {name: [] for name, _, _ in variants}
        for r in range(a.rounds):
            order = variants if r % 2 == 0 else list(reversed(variants))
            for name, threads, place in order:
                env = dict(os.environ, BULKHEAD_CPU_PLACE_WORKERS=place)
                out = subprocess.run([sys.executable, "-c", CHILD, a.python_dir, a.model, a.input, str(threads),
                                      str(pause / 1e3), str(a.runs)], env=env, capture_output=True, text=True)
                if out.returncode != 0:
                    sys.exit("paused_runs: the %s process failed: %s" % (name, out.stderr.strip().splitlines()[-1:]))
                got[name].append(json.loads(out.stdout.strip().splitlines()[-1]))
        for name, _, _ in variants:
            m = {k: statistics.median(g[k] for g in got[name]) for k in ("median", "p90", "max")}
            print("| %g | %s | %.2f | %.2f | %.2f |" % (pause, name, m["median"], m["p90"], m["max"]))


if __name__ == "__main__":
    main()
