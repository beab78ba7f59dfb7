"""Four Python threads running two sessions at once: every result correct, and the runs
overlap in time — run() releases the GIL (measured, not assumed)."""
import threading
import time

import numpy as np

import bulkhead
from conftest import REAL, inputs_of, model_path, reference


def test_four_threads_two_sessions_overlap_and_agree():
    env = bulkhead.Env()
    names = ["ppocrv4_rec", "silero_vad_v5"]
    sessions = {n: env.load(model_path(n), threads=1) for n in names}
    feeds = {n: inputs_of(n) for n in names}
    refs = {n: {o["name"]: reference(n, o["name"]) for o in sessions[n].outputs} for n in names}
    intervals, wrong, errors = [], [], []
    lock = threading.Lock()
    start = threading.Barrier(4)

    def worker(t):
        n = names[t % 2]
        start.wait()
        for i in range(12 if n == "ppocrv4_rec" else 60):
            t0 = time.perf_counter()
            try:
                out = sessions[n].run(feeds[n])
            except Exception as e:  # noqa: BLE001 - reported below
                errors.append(repr(e))
                return
            t1 = time.perf_counter()
            bad = [k for k, v in out.items() if not float(np.max(np.abs(v - refs[n][k]))) <= REAL[n]]
            with lock:
                intervals.append((t, t0, t1))
                if bad:
                    wrong.append((t, i, bad))

    threads = [threading.Thread(target=worker, args=(t,)) for t in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert not errors, errors
    assert not wrong, wrong
    # Time during which runs of two different threads were both in progress.
    overlap = 0.0
    for i, (ta, a0, a1) in enumerate(intervals):
        for tb, b0, b1 in intervals[i + 1:]:
            if ta != tb:
                overlap += max(0.0, min(a1, b1) - max(a0, b0))
    busy = sum(b - a for _, a, b in intervals)
    print("runs %d, busy %.3f s, overlapping %.3f s" % (len(intervals), busy, overlap))
    assert overlap > 0.1 * busy / 4, (overlap, busy)
