// Channel shuffles folded into the depthwise convolution that reads them (CPU,
// optimisation level 2).
//
// ShuffleNet mixes the groups of a grouped convolution by a channel shuffle written as
// Reshape [N, G, C/G, H, W] → Transpose (0, 2, 1, 3, 4) → Reshape [N, C, H, W], and a
// depthwise convolution reads the result. Depthwise output channel c' only reads input
// channel c', which after the shuffle is the unshuffled plane (c' mod G)·(C/G) + c'/G: the
// convolution can read those planes where they are. This pass removes the three nodes and
// marks the Conv with `_x_shuffle` = G (an internal attribute: the CPU Conv kernel reads
// its X through that channel map, kernels/dnnl.cc; a path of the kernel that cannot
// copies the shuffled X once itself). A Transpose of a small tensor runs on one thread
// and reads what the previous convolution wrote on the other core: ShuffleNet's 16 cost
// 0.12 ms at 1 thread and 0.42 ms at 2.
//
// Only when every shape involved is known, the intermediate values are read by nothing
// else, and the Conv is a 2-D depthwise one (group = C, W [C, 1, kh, kw] constant float32).
#pragma once

#include "ir/graph.h"

namespace bulkhead::exec {

// Rewrites `g` (a top-level graph); returns how many shuffles were folded. The weights
// must be initializers the caller cannot override (graph inputs with an initializer are
// such defaults unless `input_defaults_constant`: IR < 4 models list every initializer).
int fold_channel_shuffles(ir::Graph& g, bool input_defaults_constant);

}  // namespace bulkhead::exec
