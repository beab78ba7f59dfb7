"""String tensors through `bulkhead run` and .npy files.

Every conformance case in onnx-backend-data/node whose model takes or gives string tensors
and which the CPU runner passes (expectations/cpu.txt) is run again through the command
line: its .pb inputs are converted to .npy here (numpy and onnx's numpy_helper, Debian's
/usr/bin/python3), `bulkhead run -o` writes the outputs as .npy, and numpy reads them back
and compares them with the expected .pb outputs — exactly for strings, integers and bools,
with the runner's tolerance for floats. numpy is the oracle on both sides: bulkhead's own
.npy reader and writer are what is under test.

Inputs go in as numpy's default '<U{n}' and, in-process, also as UTF-8 bytes ('|S{n}');
the '<U' form also runs with --isolation process (strings across the worker boundary).

Run by ctest (cli_npy_strings_test), which sets BULKHEAD_BINARY and BULKHEAD_SHARED.
"""
import os
import subprocess

import numpy as np
import onnx
import pytest
from onnx import numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.environ.get("BULKHEAD_SOURCE", os.path.dirname(os.path.dirname(HERE)))
SHARED = os.environ.get("BULKHEAD_SHARED", os.path.join(os.path.dirname(SOURCE), "shared"))
BINARY = os.environ.get("BULKHEAD_BINARY", os.path.join(SOURCE, "build", "bulkhead"))
NODE = os.path.join(SHARED, "onnx-backend-data", "node")
EXPECT = os.path.join(SOURCE, "expectations", "cpu.txt")

# Fail loudly — at collection, so no case is silently skipped — when the data is absent.
if not os.path.isdir(NODE):
    raise RuntimeError("the shared test data is missing: %s (set BULKHEAD_SHARED)" % NODE)
if not os.access(BINARY, os.X_OK):
    raise RuntimeError("the bulkhead binary is missing: %s (set BULKHEAD_BINARY)" % BINARY)

STRING = onnx.TensorProto.STRING


def _has_string(t):
    """Whether a TypeProto is, or holds, a string tensor."""
    kind = t.WhichOneof("value")
    if kind == "tensor_type":
        return t.tensor_type.elem_type == STRING
    if kind == "sequence_type":
        return _has_string(t.sequence_type.elem_type)
    if kind == "optional_type":
        return _has_string(t.optional_type.elem_type)
    return False


def _graph_inputs(model):
    inits = {i.name for i in model.graph.initializer}
    return [i for i in model.graph.input if i.name not in inits]


def string_cases():
    with open(EXPECT) as f:
        passing = [line.strip()[len("node/"):] for line in f if line.startswith("node/")]
    cases = []
    for name in passing:
        path = os.path.join(NODE, name, "model.onnx")
        if not os.path.isfile(path):
            raise RuntimeError("%s lists node/%s, which is not in %s" % (EXPECT, name, NODE))
        m = onnx.load(path)
        if any(_has_string(v.type) for v in list(_graph_inputs(m)) + list(m.graph.output)):
            cases.append(name)
    return cases


CASES = string_cases()
VARIANTS = [("U", "in-process"), ("S", "in-process"), ("U", "process")]


def test_the_string_cases_are_found():
    # The expectations list 26 string cases today; finding none would mean the search broke.
    assert len(CASES) >= 20, CASES


def _as_npy_array(a, form):
    """A tensor from a .pb as the array a user would np.save."""
    if a.dtype != object:
        return a
    u = a.astype(np.str_)  # '<U{n}', numpy's own choice of width
    if form == "U":
        return u
    # UTF-8 bytes, '|S{n}' (np.char.encode would make an empty array float64).
    return np.array([s.encode("utf-8") for s in u.flat], dtype=np.bytes_).reshape(u.shape)


def _tensor_only(values, what):
    for v in values:
        if v.type.WhichOneof("value") != "tensor_type":
            pytest.skip("%s '%s' is not a tensor; .npy holds tensors only" % (what, v.name))


@pytest.mark.parametrize("form,isolation", VARIANTS, ids=["U", "S", "U-process"])
@pytest.mark.parametrize("case", CASES)
def test_string_case_through_bulkhead_run(case, form, isolation, tmp_path):
    d = os.path.join(NODE, case)
    model = onnx.load(os.path.join(d, "model.onnx"))
    ins, outs = _graph_inputs(model), list(model.graph.output)
    _tensor_only(ins, "input")
    _tensor_only(outs, "output")
    data = os.path.join(d, "test_data_set_0")
    args = [BINARY, "run", os.path.join(d, "model.onnx"), "-q", "--threads", "1", "--isolation", isolation]
    fed_string = False
    for i, v in enumerate(ins):
        pb = os.path.join(data, "input_%d.pb" % i)
        if not os.path.exists(pb):
            break  # as the runner: an input without a file is left to its default
        a = _as_npy_array(numpy_helper.to_array(onnx.load_tensor(pb)), form)
        fed_string |= a.dtype.kind in "US"
        f = str(tmp_path / ("input_%d.npy" % i))
        np.save(f, a)
        args += ["-i", "%s=%s" % (v.name, f)]
    out_dir = tmp_path / "out"
    args += ["-o", str(out_dir)]
    r = subprocess.run(args, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, "%s\nstdout:\n%s\nstderr:\n%s" % (" ".join(args), r.stdout, r.stderr)

    written = sorted(os.listdir(out_dir))
    assert len(written) == len(outs), written
    got_string = False
    for i, v in enumerate(outs):
        expected = numpy_helper.to_array(onnx.load_tensor(os.path.join(data, "output_%d.pb" % i)))
        f = out_dir / (v.name + ".npy")
        assert f.exists(), "output '%s' was not written: %s" % (v.name, written)
        got = np.load(str(f), allow_pickle=False)
        where = "%s output '%s'" % (case, v.name)
        assert got.shape == expected.shape, "%s: shape %s, expected %s" % (where, got.shape, expected.shape)
        if expected.dtype == object:
            got_string = True
            width = max([len(s) for s in expected.flat] + [1])
            assert got.dtype == np.dtype("<U%d" % width), "%s: dtype %s, expected <U%d" % (where, got.dtype, width)
            assert got.tolist() == expected.astype(np.str_).tolist(), "%s: %r, expected %r" % (where, got, expected)
        elif expected.dtype.kind == "f":
            assert got.dtype == expected.dtype, "%s: dtype %s, expected %s" % (where, got.dtype, expected.dtype)
            np.testing.assert_allclose(got, expected, rtol=1e-3, atol=1e-7, err_msg=where)  # the runner's node tolerance
        else:
            assert got.dtype == expected.dtype, "%s: dtype %s, expected %s" % (where, got.dtype, expected.dtype)
            np.testing.assert_array_equal(got, expected, err_msg=where)
    assert fed_string or got_string, "%s: no string crossed the command line" % case
