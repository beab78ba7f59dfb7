"""ONNX Runtime's call shapes: `import bulkhead as ort` runs the scripts people have."""
import os

import numpy as np
import pytest

import bulkhead as ort
from conftest import REAL, inputs_of, model_path, reference, small_model


@pytest.mark.parametrize("name", sorted(REAL))
def test_real_models_match_references(name):
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    sess = ort.InferenceSession(model_path(name), sess_options=so, providers=["CPUExecutionProvider"])
    feed = inputs_of(name)
    assert sorted(i.name for i in sess.get_inputs()) == sorted(feed)
    outs = sess.run(None, feed)
    names = [o.name for o in sess.get_outputs()]
    assert len(outs) == len(names)
    for n, got in zip(names, outs):
        ref = reference(name, n)
        assert got.shape == ref.shape and got.dtype == ref.dtype
        assert float(np.max(np.abs(got - ref))) <= REAL[name], n


def test_metadata_has_onnxruntime_shapes():
    sess = ort.InferenceSession(model_path("silero_vad_v5"))
    ins = {i.name: i for i in sess.get_inputs()}
    assert ins["input"].type == "tensor(float)"
    assert ins["sr"].type == "tensor(int64)"
    assert ins["sr"].shape == []
    assert ins["state"].shape == [2, None, 128] or all(isinstance(d, (int, str)) or d is None for d in ins["state"].shape)
    assert all(isinstance(d, (int, str)) or d is None for d in ins["input"].shape)
    assert [o.name for o in sess.get_outputs()] == ["output", "stateN"]
    assert sess.get_providers() == ["CPUExecutionProvider"]
    assert "CPUExecutionProvider" in ort.get_available_providers()
    assert ort.get_device() == "CPU"
    assert isinstance(ort.__version__, str)


def test_symbolic_dimensions_are_names():
    from onnx import TensorProto, helper
    b = small_model([helper.make_node("Relu", ["x"], ["y"])],
                    [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 3, None])],
                    [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 3, None])])
    sess = ort.InferenceSession(b)
    assert sess.get_inputs()[0].shape == ["batch", 3, None]


def test_chosen_outputs_and_run_options():
    sess = ort.InferenceSession(model_path("silero_vad_v5"))
    feed = inputs_of("silero_vad_v5")
    ro = ort.RunOptions()
    ro.timeout_ms = 60000
    (state,) = sess.run(["stateN"], feed, ro)
    assert state.shape == (2, 1, 128)
    np.testing.assert_allclose(state, reference("silero_vad_v5", "stateN"), atol=1e-5)
    assert len(sess.run([], feed)) == 2  # [] = every output, as in ONNX Runtime


def test_bytes_and_pathlike():
    import pathlib
    p = model_path("silero_vad_v5")
    with open(p, "rb") as f:
        a = ort.InferenceSession(f.read())
    b = ort.InferenceSession(pathlib.Path(p))
    feed = inputs_of("silero_vad_v5")
    np.testing.assert_array_equal(a.run(None, feed)[0], b.run(None, feed)[0])


def test_providers():
    p = model_path("silero_vad_v5")
    with pytest.raises(ort.InvalidArgument, match="unknown provider 'CUDAExecutionProvider'"):
        ort.InferenceSession(p, providers=["CUDAExecutionProvider", "CPUExecutionProvider"])
    with pytest.raises(ValueError, match="unknown option"):
        ort.InferenceSession(p, providers=[("CPUExecutionProvider", {"arena_extend_strategy": 1})])
    with pytest.raises(ValueError, match="provider_options has 2 entries"):
        ort.InferenceSession(p, providers=["CPUExecutionProvider"], provider_options=[{}, {}])
    s = ort.InferenceSession(p, providers=["cpu"])
    assert s.get_providers() == ["CPUExecutionProvider"]
    if "VulkanExecutionProvider" in ort.get_available_providers():
        v = ort.InferenceSession(p, providers=[("VulkanExecutionProvider", {"device_id": 0}), "CPUExecutionProvider"])
        assert v.get_providers() == ["VulkanExecutionProvider", "CPUExecutionProvider"]
        np.testing.assert_allclose(v.run(None, inputs_of("silero_vad_v5"))[0], reference("silero_vad_v5", "output"),
                                   atol=1e-4)


def test_session_options_are_checked():
    so = ort.SessionOptions()
    with pytest.raises(AttributeError, match="no option 'intra_op_num_thread'"):
        so.intra_op_num_thread = 2  # a typo is an error, not ignored
    so.inter_op_num_threads = 4  # accepted: bulkhead has no inter-op pool
    so.execution_mode = ort.ExecutionMode.ORT_PARALLEL
    so.intra_op_num_threads = -1
    with pytest.raises(ValueError, match="intra_op_num_threads"):
        ort.InferenceSession(model_path("silero_vad_v5"), sess_options=so)
    so = ort.SessionOptions()
    so.optimized_model_filepath = "/tmp/x.onnx"
    with pytest.raises(NotImplementedError, match="optimized_model_filepath"):
        ort.InferenceSession(model_path("silero_vad_v5"), sess_options=so)
    so = ort.SessionOptions()
    so.bulkhead_options = "threads=1;graph_capture=0"
    ort.InferenceSession(model_path("silero_vad_v5"), sess_options=so)
    so.bulkhead_options = "threads=1;bogus=3"
    with pytest.raises(ValueError, match="unknown session option 'bogus'"):
        ort.InferenceSession(model_path("silero_vad_v5"), sess_options=so)


def test_bad_files(tmp_path):
    with pytest.raises(FileNotFoundError, match="nope.onnx"):
        ort.InferenceSession(str(tmp_path / "nope.onnx"))
    with pytest.raises(ort.NotFound):
        ort.InferenceSession(str(tmp_path / "nope.onnx"))
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"\x08\x07garbage that is not a model")
    with pytest.raises(ort.InvalidModel) as e:
        ort.InferenceSession(str(bad))
    assert isinstance(e.value, ValueError) and "bad.onnx" in str(e.value) and "\n" not in str(e.value)
    with pytest.raises(ort.InvalidModel):
        ort.InferenceSession(b"garbage")
    with pytest.raises(ValueError, match="not a regular file"):
        ort.InferenceSession("/dev/zero")
    with pytest.raises(ValueError, match="directory"):
        ort.InferenceSession(str(tmp_path))
    with pytest.raises(ValueError, match="must be a path or bytes"):
        ort.InferenceSession(12)


def test_bad_inputs():
    sess = ort.InferenceSession(model_path("silero_vad_v5"))
    feed = inputs_of("silero_vad_v5")
    with pytest.raises(ValueError, match="unknown input 'nope'"):
        sess.run(None, dict(feed, nope=np.zeros(1, np.float32)))
    with pytest.raises(ValueError, match="missing input 'sr'"):
        sess.run(None, {k: v for k, v in feed.items() if k != "sr"})
    with pytest.raises(ValueError, match="element type"):
        sess.run(None, dict(feed, input=feed["input"].astype(np.float64)))
    with pytest.raises(ValueError, match="shape"):
        sess.run(None, dict(feed, state=np.zeros((3, 1, 128), np.float32)))
    with pytest.raises(ValueError, match="unknown output 'nope'"):
        sess.run(["nope"], feed)
    with pytest.raises(ValueError, match="input names are str"):
        sess.run(None, {1: feed["input"]})
    with pytest.raises(ValueError, match="cannot be made an array|element"):
        sess.run(None, dict(feed, input=[[1.0, "x"]]))
    with pytest.raises(ort.Error):
        sess.run(None, dict(feed, input=object()))
    # the session stays usable after every error
    assert sess.run(None, feed)[0].shape == (1, 1)


def test_lists_and_scalars_take_the_declared_type():
    sess = ort.InferenceSession(model_path("silero_vad_v5"))
    feed = inputs_of("silero_vad_v5")
    a = sess.run(None, feed)[0]
    b = sess.run(None, dict(feed, sr=16000, input=feed["input"].tolist()))[0]
    np.testing.assert_array_equal(a, b)
