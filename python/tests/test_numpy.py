"""numpy in and out: every numeric dtype, bool, float16, strings, sequences and optionals;
matching contiguous arrays are read in place, anything else converted once."""
import sys

import numpy as np
import pytest

import bulkhead
from conftest import small_model

DTYPES = [np.float32, np.float64, np.float16, np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32,
          np.uint64, np.bool_]


def identity_model(elem, shape=(2, 3)):
    from onnx import helper
    return small_model([helper.make_node("Identity", ["x"], ["y"])],
                       [helper.make_tensor_value_info("x", elem, list(shape))],
                       [helper.make_tensor_value_info("y", elem, list(shape))])


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_every_dtype_round_trips(env, dtype):
    from onnx import helper
    elem = helper.np_dtype_to_tensor_dtype(np.dtype(dtype)) if hasattr(helper, "np_dtype_to_tensor_dtype") else \
        __import__("onnx").mapping.NP_TYPE_TO_TENSOR_TYPE[np.dtype(dtype)]
    s = env.load(identity_model(elem))
    x = (np.arange(6).reshape(2, 3) % 2 == 1) if dtype is np.bool_ else np.arange(6).reshape(2, 3).astype(dtype)
    y = s.run({"x": x})["y"]
    assert y.dtype == np.dtype(dtype) and y.shape == (2, 3)
    np.testing.assert_array_equal(y, x)
    assert not np.shares_memory(x, y)  # outputs never alias inputs


def test_strings(env):
    from onnx import TensorProto
    s = env.load(identity_model(TensorProto.STRING, (3,)))
    y = s.run({"x": np.array(["alpha", "", "gamma\u00e9"], dtype=object)})["y"]
    assert y.dtype == object and list(y) == ["alpha", "", "gamma\u00e9"]
    assert list(s.run({"x": np.array(["a", "bb", "ccc"])})["y"]) == ["a", "bb", "ccc"]  # '<U3' arrays
    assert list(s.run({"x": ["x", "y", "z"]})["y"]) == ["x", "y", "z"]
    with pytest.raises(ValueError, match="not a str"):
        s.run({"x": np.array(["a", 3, "c"], dtype=object)})


def test_non_contiguous_misaligned_and_big_endian_inputs_are_converted(env):
    from onnx import TensorProto, helper
    b = small_model([helper.make_node("Relu", ["x"], ["y"])],
                    [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 3])],
                    [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 3])])
    s = env.load(b)
    base = np.arange(-12, 12, dtype=np.float32).reshape(4, 6)
    strided = base[:, ::2]
    assert not strided.flags.c_contiguous
    np.testing.assert_array_equal(s.run({"x": strided})["y"], np.maximum(strided, 0))
    raw = np.zeros(4 * 3 * 4 + 1, np.uint8)[1:].view(np.float32).reshape(4, 3)  # misaligned view
    raw[:] = base[:, :3]
    assert not raw.flags.aligned
    np.testing.assert_array_equal(s.run({"x": raw})["y"], np.maximum(base[:, :3], 0))
    be = base[:, :3].astype(">f4")
    np.testing.assert_array_equal(s.run({"x": be})["y"], np.maximum(base[:, :3], 0))
    fortran = np.asfortranarray(base[:, :3])
    np.testing.assert_array_equal(s.run({"x": fortran})["y"], np.maximum(base[:, :3], 0))


def test_inputs_are_not_leaked_or_kept(env):
    from onnx import TensorProto
    s = env.load(identity_model(TensorProto.FLOAT))
    x = np.ones((2, 3), np.float32)
    before = sys.getrefcount(x)
    for _ in range(100):
        s.run({"x": x})
    assert sys.getrefcount(x) == before


def test_outputs_own_bulkhead_buffers(env):
    from onnx import TensorProto
    s = env.load(identity_model(TensorProto.FLOAT))
    y = s.run({"x": np.ones((2, 3), np.float32)})["y"]
    assert y.base is not None and not y.flags.owndata  # a view over bulkhead's buffer, no copy
    assert y.flags.writeable and y.flags.c_contiguous
    del s  # the array keeps its buffer alive after the session is gone
    assert float(y.sum()) == 6.0


def test_sequences_and_optionals(env):
    from onnx import TensorProto, helper
    seq = small_model([helper.make_node("SequenceConstruct", ["a", "b"], ["s"]),
                       helper.make_node("ConcatFromSequence", ["s"], ["y"], axis=0)],
                      [helper.make_tensor_value_info("a", TensorProto.FLOAT, [2]),
                       helper.make_tensor_value_info("b", TensorProto.FLOAT, [2])],
                      [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4]),
                       helper.make_tensor_sequence_value_info("s", TensorProto.FLOAT, [2])], opset=17)
    s = env.load(seq)
    out = s.run({"a": np.array([1, 2], np.float32), "b": np.array([3, 4], np.float32)})
    np.testing.assert_array_equal(out["y"], [1, 2, 3, 4])
    assert isinstance(out["s"], list) and len(out["s"]) == 2
    np.testing.assert_array_equal(out["s"][1], [3, 4])
    assert s.outputs[1]["kind"] == "sequence" and s.outputs[1]["type"] == "seq(tensor(float))"

    seq_in = small_model([helper.make_node("SequenceLength", ["s"], ["n"])],
                         [helper.make_tensor_sequence_value_info("s", TensorProto.FLOAT, None)],
                         [helper.make_tensor_value_info("n", TensorProto.INT64, [])])
    s = env.load(seq_in)
    assert int(s.run({"s": [np.zeros(2, np.float32)] * 3})["n"]) == 3
    with pytest.raises(ValueError, match="pass a list of arrays"):
        s.run({"s": np.zeros(2, np.float32)})

    opt = small_model([helper.make_node("OptionalHasElement", ["o"], ["has"])],
                      [helper.make_value_info("o", helper.make_optional_type_proto(
                          helper.make_tensor_type_proto(TensorProto.FLOAT, [2])))],
                      [helper.make_tensor_value_info("has", TensorProto.BOOL, [])], opset=18)
    s = env.load(opt)
    assert bool(s.run({"o": np.zeros(2, np.float32)})["has"]) is True
    assert bool(s.run({"o": None})["has"]) is False
