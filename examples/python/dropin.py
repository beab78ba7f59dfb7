#!/usr/bin/python3
"""The same script with ONNX Runtime's call shapes and with bulkhead's own API.

    /usr/bin/python3 examples/python/dropin.py --api ort        # `import bulkhead as ort`
    /usr/bin/python3 examples/python/dropin.py --api bulkhead   # bulkhead.Env().load(...)

Runs the three real models on their inputs, prints each output's largest difference from
the reference outputs, and exits 1 if one is past its tolerance. Moving a script from
ONNX Runtime to bulkhead is the first line of the `ort` branch below.
"""
import argparse
import os
import sys

import numpy as np

MODELS = {"ppocrv4_det": 1e-4, "ppocrv4_rec": 1e-4, "silero_vad_v5": 1e-5}


def load_feed(folder):
    d = os.path.join(folder, "inputs")
    return {f[:-4]: np.load(os.path.join(d, f)) for f in sorted(os.listdir(d)) if f.endswith(".npy")}


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--api", choices=["ort", "bulkhead"], required=True)
    ap.add_argument("--models", default=os.path.join(here, "..", "..", "..", "shared", "models"))
    ap.add_argument("--save", help="write every output to this .npz file")
    args = ap.parse_args()

    if args.api == "ort":
        import bulkhead as ort  # was: import onnxruntime as ort

        def run(path, feed):
            so = ort.SessionOptions()
            so.intra_op_num_threads = 1
            sess = ort.InferenceSession(path, sess_options=so, providers=["CPUExecutionProvider"])
            names = [o.name for o in sess.get_outputs()]
            return dict(zip(names, sess.run(None, feed)))
    else:
        import bulkhead
        env = bulkhead.Env()

        def run(path, feed):
            return env.load(path, threads=1).run(feed)

    failed, saved = False, {}
    for name, tol in MODELS.items():
        folder = os.path.join(args.models, name)
        out = run(os.path.join(folder, "model.onnx"), load_feed(folder))
        for oname, value in out.items():
            ref = np.load(os.path.join(folder, "outputs", oname + ".npy"))
            diff = float(np.max(np.abs(value - ref))) if value.shape == ref.shape else float("inf")
            ok = diff <= tol
            failed |= not ok
            saved["%s/%s" % (name, oname)] = value
            print("%-14s %-18s max|diff| %.3g %s" % (name, oname, diff, "ok" if ok else "TOO FAR"))
    if args.save:
        np.savez(args.save, **saved)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
