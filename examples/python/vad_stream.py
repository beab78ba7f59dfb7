#!/usr/bin/python3
"""Voice-activity detection on a stream with Silero VAD v5: the model is called once per
32 ms chunk, and each call's `stateN` is fed back as the next call's `state`.

    /usr/bin/python3 examples/python/vad_stream.py [--model silero_vad_v5/model.onnx]
                                                   [--reference tests/data/silero_loop]

Without --reference it streams 3 seconds of audio made in code (noise, a voiced stretch,
noise) and prints the speech segments found. With --reference DIR it feeds the 40 chunks
of DIR/chunks.npy and checks every call's probability and state against ONNX Runtime's
(DIR/outputs.npy, DIR/states.npy); exit 1 if a probability differs by more than 1e-5 or
a state by more than 3e-5 (the state is fed back 40 times, and float rounding that differs
with the CPU's vector width drifts it by about 1e-5 by the last calls)
"""
import argparse
import os
import sys

import numpy as np

import bulkhead

RATE = 16000
CHUNK = 512    # new samples per call (32 ms)
CONTEXT = 64   # samples of the previous chunk the model sees again


def synthetic_audio(seconds=3.0, seed=7):
    rng = np.random.default_rng(seed)
    t = np.arange(int(seconds * RATE)) / RATE
    audio = 0.01 * rng.standard_normal(t.size)
    voiced = (t > 1.0) & (t < 2.0)
    voice = sum(np.sin(2 * np.pi * 150 * k * t) / k for k in range(1, 8)) * (0.6 + 0.4 * np.sin(2 * np.pi * 4 * t))
    audio[voiced] += 0.3 * voice[voiced]
    return audio.astype(np.float32)


class Stream:
    """One audio stream: the session, the model's state and the last samples seen."""

    def __init__(self, session):
        self.session = session
        self.state = np.zeros((2, 1, 128), np.float32)
        self.context = np.zeros(CONTEXT, np.float32)
        self.sr = np.array(RATE, np.int64)

    def feed(self, chunk):
        """Speech probability of the next 512 samples."""
        x = np.concatenate([self.context, chunk])[None]
        return self.feed_window(x)

    def feed_window(self, window):
        out = self.session.run({"input": window, "state": self.state, "sr": self.sr})
        self.state = out["stateN"]  # fed back: no copy, the array is bulkhead's output buffer
        self.context = window[0, -CONTEXT:]
        return float(out["output"][0, 0])


def segments(probs, threshold=0.5):
    """(start s, end s) of each run of chunks above the threshold."""
    found, start = [], None
    for i, p in enumerate(probs + [0.0]):
        if p >= threshold and start is None:
            start = i
        elif p < threshold and start is not None:
            found.append((start * CHUNK / RATE, i * CHUNK / RATE))
            start = None
    return found


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    root = os.path.dirname(os.path.dirname(here))
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default=os.path.join(root, "..", "shared", "models", "silero_vad_v5", "model.onnx"))
    ap.add_argument("--reference", help="a folder with chunks.npy, outputs.npy, states.npy to check against")
    ap.add_argument("--isolation", default="in-process")
    args = ap.parse_args()

    session = bulkhead.Env().load(args.model, threads=1, isolation=args.isolation)
    stream = Stream(session)
    if args.reference:
        chunks = np.load(os.path.join(args.reference, "chunks.npy"))
        want = np.load(os.path.join(args.reference, "outputs.npy"))
        want_states = np.load(os.path.join(args.reference, "states.npy"))
        worst_p = worst_state = 0.0
        for k in range(chunks.shape[0]):
            p = stream.feed_window(chunks[k][None])
            worst_p = max(worst_p, abs(p - float(want[k])))
            worst_state = max(worst_state, float(np.abs(stream.state[:, 0] - want_states[k]).max()))
        print("%d calls, largest difference from ONNX Runtime %.3g (probability), %.3g (state)"
              % (chunks.shape[0], worst_p, worst_state))
        return 0 if worst_p <= 1e-5 and worst_state <= 3e-5 else 1

    audio = synthetic_audio()
    probs = [stream.feed(audio[i:i + CHUNK]) for i in range(0, audio.size - CHUNK + 1, CHUNK)]
    found = segments(probs)
    print("%d chunks of %d ms" % (len(probs), CHUNK * 1000 // RATE))
    for a, b in found:
        print("  speech %.2f s - %.2f s" % (a, b))
    return 0


if __name__ == "__main__":
    sys.exit(main())
