// Element-wise work between quantised tensors in one pass (CPU, optimisation level 2).
//
// A QDQ model runs every float operation between two int8 kernels as DequantizeLinear →
// the float ops → QuantizeLinear: one pass over memory per op, in float32 (det's
// activation after each convolution, x·clip(x + 3, 0, 6)/6 then a scale and a shift:
// eight passes; ResNet's residual Add → Relu: five). This pass finds each
// QuantizeLinear whose input is computed only by element-wise float ops from per-tensor
// DequantizeLinear outputs and scalar constants, and replaces the group by one internal
// node — QLinearEltwise, domain "bulkhead" — that reads the quantised tensors, runs the
// ops as a small program on blocks of values in cache, and writes the quantised result.
// Each op computes exactly what its own kernel computes (the same float32 formulas in the
// same order), so the outputs are those of the unfused graph bit for bit.
//
// A DequantizeLinear → op → QuantizeLinear with the same scale, zero point and type on
// both sides, where the op only moves or selects values — MaxPool, Reshape, Flatten,
// Squeeze, Unsqueeze, Transpose, Identity, Slice, Gather, Expand, Tile, DepthToSpace,
// SpaceToDepth, Resize in nearest mode, Concat — becomes the op alone, on the quantised
// tensor (the same values: see try_on_quantized). A Concat whose inputs are quantised
// otherwise reads each of them requantised by a QLinearEltwise of no op (the values
// DequantizeLinear → QuantizeLinear gives). DequantizeLinear → GlobalAveragePool /
// AveragePool → QuantizeLinear becomes one QLinearGlobalAveragePool / QLinearAveragePool
// (backend/qlinear_pool.h; within one quantisation step, not bit for bit).
//
// The node it makes: backend/qlinear_eltwise.h.
#pragma once

#include "backend/qlinear_eltwise.h"
#include "ir/graph.h"

namespace bulkhead::exec {

// Rewrites `g` (a top-level graph); returns how many groups became QLinearEltwise nodes.
// Constants: initializers (not overridable graph inputs, unless `input_defaults_constant`)
// and Constant nodes.
int fuse_quantized_elementwise(ir::Graph& g, bool input_defaults_constant);

}  // namespace bulkhead::exec
