"""Shared fixtures: the real models in ../shared/models and small models made in code."""
import os
import sys

import numpy as np
import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.path.dirname(os.path.dirname(HERE))
SHARED = os.environ.get("BULKHEAD_SHARED", os.path.join(os.path.dirname(SOURCE), "shared"))
MODELS = os.path.join(SHARED, "models")
REAL = {"ppocrv4_det": 1e-4, "ppocrv4_rec": 1e-4, "silero_vad_v5": 1e-5}

if not os.path.isdir(MODELS):
    raise RuntimeError("the shared test data is missing: %s (set BULKHEAD_SHARED)" % MODELS)


def model_path(name):
    return os.path.join(MODELS, name, "model.onnx")


def inputs_of(name):
    d = os.path.join(MODELS, name, "inputs")
    return {f[:-4]: np.load(os.path.join(d, f)) for f in sorted(os.listdir(d)) if f.endswith(".npy")}


def reference(name, output):
    return np.load(os.path.join(MODELS, name, "outputs", output + ".npy"))


def small_model(nodes, inputs, outputs, initializers=(), opset=17):
    """Serialized bytes of a model made with onnx.helper."""
    from onnx import helper
    g = helper.make_graph(nodes, "g", inputs, outputs, list(initializers))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    return m.SerializeToString()


@pytest.fixture(scope="session")
def env():
    import bulkhead
    return bulkhead.Env()
