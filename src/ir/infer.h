// Shape and type inference over the Graph IR (bulkhead's own; libonnx's knows opsets up
// to 17 only and crashes on some valid newer models).
//
// infer_shapes() walks the topologically sorted nodes of a freshly imported graph and
// records, for every node output, its element type (wherever ONNX defines it) and as
// much of its shape as can be decided: fixed dims, symbolic dims (equal names unify,
// 1 broadcasts) or unknown dims, or an unknown rank. Small integer values are followed
// through "shape sub-graphs" (Shape -> Gather/Slice -> Concat/Unsqueeze -> Cast ->
// Add/Mul/... -> Reshape/Expand/ConstantOfShape/Range/Tile/Slice) so that target shapes
// computed at run time still give static shapes. Initializers are constants, except an
// initializer that is also a graph input of an IR >= 4 model (or of a subgraph): the
// caller may override those, so only their declared type is used.
//
// Declared value_info and graph outputs are never replaced by less information: an
// inferred fixed dim fills a declared unknown or symbolic one; a declared shape that
// conflicts with an inferred fixed shape is kept as declared. Operators and cases it
// cannot decide leave the shape (or rank) unknown; it never guesses.
//
// Errors (kInvalidModel, naming the node and the values): an element type that ONNX
// makes definite conflicts with a declared one, or inputs that ONNX binds to one type
// differ (Add of float32 and int64).
//
// Subgraphs (If/Loop/Scan/SequenceMap bodies) are inferred too, seeing the enclosing
// graph's values; the node's attribute is replaced by the inferred copy, whose
// value_info also records the types of the outer-scope values it reads.
//
// Not thread-safe on one graph: it mutates `g`. Runs at import, before the graph is
// shared.
#pragma once

#include "bulkhead/status.h"
#include "ir/graph.h"

namespace bulkhead::ir {

// Infers `g` (the top-level graph of `m`; m.ir_version decides which initializers are
// constants). Fills g.value_info for every node output and the undeclared parts of
// g.outputs. Error messages name the node and value, without the model's name.
Status infer_shapes(Graph& g, const Model& m);

}  // namespace bulkhead::ir
