// How much arithmetic the largest node of a graph does, from its weights and the shapes
// known before it runs: a session whose every node is small times its first runs at one
// thread and at the threads asked for, and keeps the faster (session/threads_probe.h).
// Each split node hands half of its output to the other core's cache, and the next node
// reads half of its input from there; whether the second core pays for that with nodes
// this small depends on the machine. ShuffleNet, whose largest layer has 8.4 M
// multiply-adds, ran at 2 threads in 3.84 ms and at 1 in 2.95 on one 2-core machine (ONNX
// Runtime 3.38 at 2 threads), and in 1.49 against 2.05 on another; models with a layer of
// 50 M or more (ResNet, rec, det) gain a third or more from the second everywhere, and
// are not timed.
#pragma once

#include "ir/graph.h"

namespace bulkhead::exec {

// Below this many multiply-adds in every node, a session runs on one thread.
inline constexpr double kSmallModelMacs = 16.0 * 1024 * 1024;

// The most multiply-adds of any one node of `g` (convolutions and matrix products, from
// their weights and output shapes), or +infinity when a node's work cannot be told from
// what is known before a run: a convolution or product whose shapes are not all fixed,
// recurrences, attention, Einsum, and nodes that run subgraphs. Nodes that do no
// multiply-adds count 0 (their cost follows their bytes, which kernels bound themselves).
double largest_node_macs(const ir::Graph& g);

}  // namespace bulkhead::exec
