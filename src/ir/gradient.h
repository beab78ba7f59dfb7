// The ai.onnx.preview.training Gradient operator, expanded at import into ordinary ONNX
// nodes (reverse-mode differentiation of the graph that computes `y`).
//
// Gradient <xs = [...], y = "...", zs = [...]> (xs..., zs...) -> (dy/dx for each x)
//
// Each output is the gradient of the sum of y's elements with respect to one x (for a
// scalar y, dy/dx), of x's shape; zs are treated as constants. The node's inputs must
// be the values named by xs and then zs, so the expansion differentiates the graph's own
// computation of y. An x that y does not depend on gets a zero gradient.
//
// The expansion uses only standard operators of the model's default opset (which must
// be 9 or later): Shape, ConstantOfShape, Add, Sub, Mul, Div, Neg, Where, Greater,
// MatMul, Transpose, ReduceSum and Reshape. Operators with a rule: Add, Sub, Mul, Div,
// Neg, Identity, Relu, Sigmoid, Tanh, Exp, Log, Sqrt and MatMul (both operands of rank 2
// or more with equal batch dims). Where an operand was broadcast, its gradient is summed
// back to its shape, which needs the shapes to be known at import.
//
// Refusals (kUnsupported / kInvalidModel, naming the Gradient node): an operator on the
// path from xs to y without a rule (naming that node), an element type other than
// float32/float64, inputs that are not xs followed by zs, a y that is not produced in
// the graph, broadcasting whose shapes are not known.
//
// Runs at import, after shape inference (it needs the inferred types); the caller
// re-sorts and re-infers the graph afterwards. Not thread-safe on one graph.
#pragma once

#include "bulkhead/status.h"
#include "ir/graph.h"

namespace bulkhead::ir {

// Replaces every Gradient node of `g` (top level only) by its expansion. `default_opset`
// is the model's opset of the default domain.
Status expand_gradients(Graph& g, int default_opset);

// Whether `g` has a Gradient node at its top level.
bool has_gradient_nodes(const Graph& g);

}  // namespace bulkhead::ir
