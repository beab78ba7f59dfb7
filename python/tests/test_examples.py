"""The examples run as a user runs them, with Debian's /usr/bin/python3."""
import os
import subprocess
import sys

import numpy as np

from conftest import MODELS, SOURCE

EXAMPLES = os.path.join(SOURCE, "examples", "python")


def run(script, *args, timeout=600):
    env = dict(os.environ)
    p = subprocess.run([sys.executable, os.path.join(EXAMPLES, script)] + list(args), capture_output=True, text=True,
                       env=env, timeout=timeout)
    print(p.stdout, p.stderr)
    return p


def test_ocr_pipeline_in_process_and_in_workers():
    p = run("ocr_pipeline.py", "--models", MODELS)
    assert p.returncode == 0, p.stderr
    assert "in-process and worker processes agree: yes" in p.stdout
    lines = [l for l in p.stdout.splitlines() if l.startswith("in-process:")]
    assert lines and int(lines[0].split()[1]) >= 2  # the detector found the drawn text lines


def test_vad_stream_matches_onnxruntime_call_by_call():
    p = run("vad_stream.py", "--model", os.path.join(MODELS, "silero_vad_v5", "model.onnx"), "--reference",
            os.path.join(SOURCE, "tests", "data", "silero_loop"))
    assert p.returncode == 0, p.stdout + p.stderr
    assert "40 calls" in p.stdout


def test_vad_stream_finds_the_voiced_stretch():
    p = run("vad_stream.py", "--model", os.path.join(MODELS, "silero_vad_v5", "model.onnx"))
    assert p.returncode == 0, p.stderr
    segs = [l.split() for l in p.stdout.splitlines() if l.strip().startswith("speech")]
    assert segs, p.stdout
    start, end = float(segs[0][1]), float(segs[-1][4])
    assert 0.8 <= start <= 1.3 and 1.7 <= end <= 2.3, p.stdout


def test_dropin_both_apis_match_references_and_each_other(tmp_path):
    a, b = str(tmp_path / "ort.npz"), str(tmp_path / "bulkhead.npz")
    pa = run("dropin.py", "--api", "ort", "--models", MODELS, "--save", a)
    pb = run("dropin.py", "--api", "bulkhead", "--models", MODELS, "--save", b)
    assert pa.returncode == 0 and pb.returncode == 0, pa.stdout + pb.stdout
    za, zb = np.load(a), np.load(b)
    assert sorted(za.files) == sorted(zb.files) and len(za.files) == 4
    for k in za.files:
        np.testing.assert_array_equal(za[k], zb[k])
