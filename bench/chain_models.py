#!/usr/bin/python3
"""Models whose run is almost all fixed cost per node: chains of 200 nodes on tiny tensors.

    /usr/bin/python3 bench/chain_models.py OUT_DIR
    build/bulkhead run OUT_DIR/conv_chain.onnx -i OUT_DIR/x4.npy -t 1 -r 3000 -q

Writes relu_chain.onnx (Relu on float32[1,16]), conv_chain.onnx (1x1 Conv, 16 -> 16
channels, on float32[1,16,4,4]) and maxpool_chain.onnx (3x3 MaxPool, stride 1, padded, on
the same), each 200 nodes deep, and their inputs x2.npy and x4.npy. A run's median divided
by 200 is what a node costs beyond its arithmetic (which here is a few thousand
multiply-adds): the executor, the kernel's checks and plan lookup, and oneDNN's call.
Needs Debian's python3-onnx and python3-numpy.
"""
import os
import sys

import numpy as np
from onnx import TensorProto, helper, numpy_helper, save

DEPTH = 200


def chain(kind, shape):
    nodes, prev, inits = [], "x", []
    for i in range(DEPTH):
        out = "y" if i == DEPTH - 1 else "t%d" % i
        if kind == "Conv":
            nodes.append(helper.make_node("Conv", [prev, "w", "b"], [out], kernel_shape=[1, 1]))
        elif kind == "MaxPool":
            nodes.append(helper.make_node("MaxPool", [prev], [out], kernel_shape=[3, 3], pads=[1, 1, 1, 1]))
        else:
            nodes.append(helper.make_node(kind, [prev], [out]))
        prev = out
    if kind == "Conv":
        c = shape[1]
        inits = [numpy_helper.from_array((np.eye(c, dtype=np.float32) * 0.9).reshape(c, c, 1, 1), "w"),
                 numpy_helper.from_array(np.zeros(c, np.float32), "b")]
    g = helper.make_graph(nodes, kind.lower() + "_chain", [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, shape)], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: chain_models.py OUT_DIR")
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    save(chain("Relu", [1, 16]), os.path.join(out, "relu_chain.onnx"))
    save(chain("Conv", [1, 16, 4, 4]), os.path.join(out, "conv_chain.onnx"))
    save(chain("MaxPool", [1, 16, 4, 4]), os.path.join(out, "maxpool_chain.onnx"))
    rng = np.random.default_rng(1)
    np.save(os.path.join(out, "x2.npy"), rng.random((1, 16), dtype=np.float32))
    np.save(os.path.join(out, "x4.npy"), rng.random((1, 16, 4, 4), dtype=np.float32))


if __name__ == "__main__":
    main()
