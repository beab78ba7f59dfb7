#!/usr/bin/python3
"""A QDQ model with every pattern bulkhead runs on int8 kernels, for comparing with ONNX Runtime.

    /usr/bin/python3 bench/qdq_patterns.py OUT_DIR

writes OUT_DIR/qdq_patterns.onnx and OUT_DIR/xq.npy (its input, uint8 [1, 8, 12, 12]),
both the same on every run (fixed seeds). The model is written the way quantisers write
QDQ models (opset 13, per-channel int8 weights, int32 biases of scale x_scale·w_scale,
uint8 activations) and chains, each between DequantizeLinear and QuantizeLinear:

    Conv (3x3, bias) → Relu     Sigmoid · x (SiLU)     Tanh     LeakyRelu     Add (residual)
    MaxPool (same scale)        AveragePool (pads counted)      ConvTranspose (2x2, stride 2, per channel axis 1)
    Resize (nearest) and Concat of two scales                   GlobalAveragePool → Flatten → Gemm (transB, bias)
    Reshape and Transpose (same scale)                          MatMul (per column)

Compare the two runtimes tensor by tensor with bench/qdq_steps.py:

    /usr/bin/python3 bench/qdq_steps.py OUT_DIR/qdq_patterns.onnx -i xq=OUT_DIR/xq.npy --local all

and see which node each pattern became with `bulkhead run OUT_DIR/qdq_patterns.onnx
-i xq=OUT_DIR/xq.npy --profile`. Needs Debian's python3-onnx and python3-numpy.
"""
import os
import sys


def main():
    if len(sys.argv) != 2 or sys.argv[1].startswith("-"):
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        sys.exit(2)
    try:
        import numpy as np
        import onnx
        from onnx import TensorProto as T
        from onnx import helper as h
        from onnx import numpy_helper as nh
    except ImportError as e:
        print(f"qdq_patterns: needs Debian's python3-onnx and python3-numpy ({e}); run it with /usr/bin/python3",
              file=sys.stderr)
        sys.exit(2)
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    rng = np.random.default_rng(5)
    inits, nodes = [], []

    def init(name, arr):
        inits.append(nh.from_array(arr, name))
        return arr

    def n(op, ins, outs, **kw):
        nodes.append(h.make_node(op, ins, outs, **kw))

    def qdq(v, scale, zero, name=None):
        """Quantise `v` to uint8 (scale, zero) and dequantise it: the QDQ pair between ops."""
        name = name or v
        if name + "_s" not in {t.name for t in inits}:
            init(name + "_s", np.array(scale, np.float32))
            init(name + "_z", np.array(zero, np.uint8))
        n("QuantizeLinear", [v, name + "_s", name + "_z"], [v + "_q"])
        n("DequantizeLinear", [v + "_q", name + "_s", name + "_z"], [v + "_d"])
        return v + "_d"

    def weights(name, shape, axis, x_scale, bias=True):
        """int8 weights per output channel on `axis`, and an int32 bias of scale x_scale·w_scale."""
        m = shape[axis]
        init(name, rng.integers(-127, 128, shape).astype(np.int8))
        ws = init(name + "_s", (rng.random(m) * 0.004 + 0.002).astype(np.float32))
        init(name + "_z", np.zeros(m, np.int8))
        n("DequantizeLinear", [name, name + "_s", name + "_z"], [name + "_f"], axis=axis)
        if not bias:
            return name + "_f", None
        init(name + "_b", rng.integers(-500, 500, m).astype(np.int32))
        init(name + "_bs", (np.float32(x_scale) * ws).astype(np.float32))
        n("DequantizeLinear", [name + "_b", name + "_bs"], [name + "_bf"], axis=0)
        return name + "_f", name + "_bf"

    # x: uint8 [1, 8, 12, 12], scale 0.04, zero point 120.
    init("x_s", np.array(0.04, np.float32))
    init("x_z", np.array(120, np.uint8))
    n("DequantizeLinear", ["xq", "x_s", "x_z"], ["x"])
    w, b = weights("w0", (16, 8, 3, 3), 0, 0.04)
    n("Conv", ["x", w, b], ["c0"], pads=[1, 1, 1, 1])
    n("Relu", ["c0"], ["r0"])
    r0 = qdq("r0", 0.05, 0)
    n("Sigmoid", [r0], ["sg"])
    n("Mul", [r0, "sg"], ["si"])
    si = qdq("si", 0.03, 20)
    n("Tanh", [si], ["th"])
    th = qdq("th", 0.008, 128)
    n("LeakyRelu", [th], ["lr"], alpha=0.1)
    lr = qdq("lr", 0.008, 128)
    n("Add", [lr, si], ["ad"])
    ad = qdq("ad", 0.035, 60)
    n("MaxPool", [ad], ["mp"], kernel_shape=[2, 2], strides=[1, 1], pads=[0, 0, 1, 1])
    mp = qdq("mp", 0.035, 60, "ad")  # the same scale and zero point: the MaxPool runs on the int8 tensor
    n("AveragePool", [mp], ["ap"], kernel_shape=[3, 3], strides=[1, 1], pads=[1, 1, 1, 1], count_include_pad=1)
    ap = qdq("ap", 0.03, 55)
    w, b = weights("wd", (16, 6, 2, 2), 1, 0.03)
    n("ConvTranspose", [ap, w, b], ["d"], strides=[2, 2])
    d = qdq("d", 0.06, 100)
    init("rsc", np.array([1, 1, 2, 2], np.float32))
    n("Resize", [ap, "", "rsc"], ["rs"], mode="nearest")
    rs = qdq("rs", 0.03, 55, "ap")
    n("Concat", [d, rs], ["cat"], axis=1)
    cat = qdq("cat", 0.06, 100, "d")
    n("GlobalAveragePool", [cat], ["gap"])
    gap = qdq("gap", 0.01, 5)
    n("Flatten", [gap], ["fl"])
    fl = qdq("fl", 0.01, 5, "gap")
    w, b = weights("wg", (10, 22), 0, 0.01)
    n("Gemm", [fl, w, b], ["gm"], transB=1)
    gm = qdq("gm", 0.02, 128)
    init("shape", np.array([1, 2, 5], np.int64))
    n("Reshape", [gm, "shape"], ["rh"])
    rh = qdq("rh", 0.02, 128, "gm")
    n("Transpose", [rh], ["tr"], perm=[0, 2, 1])
    tr = qdq("tr", 0.02, 128, "gm")
    w, _ = weights("wm", (2, 7), 1, 0.02, bias=False)
    n("MatMul", [tr, w], ["mm"])
    init("y_s", np.array(0.01, np.float32))
    init("y_z", np.array(128, np.uint8))
    n("QuantizeLinear", ["mm", "y_s", "y_z"], ["yq"])
    g = h.make_graph(nodes, "qdq_patterns", [h.make_tensor_value_info("xq", T.UINT8, [1, 8, 12, 12])],
                     [h.make_tensor_value_info("yq", T.UINT8, [1, 5, 7]),
                      h.make_tensor_value_info("cat_q", T.UINT8, [1, 22, 24, 24])], inits)
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 13)])
    m.ir_version = 8
    onnx.checker.check_model(m)
    onnx.save(m, os.path.join(out, "qdq_patterns.onnx"))
    np.save(os.path.join(out, "xq.npy"), rng.integers(0, 256, (1, 8, 12, 12)).astype(np.uint8))
    print(f"wrote {os.path.join(out, 'qdq_patterns.onnx')} and {os.path.join(out, 'xq.npy')}")


if __name__ == "__main__":
    main()
