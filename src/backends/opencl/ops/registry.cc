// The operators of the OpenCL backend: for each, the opset its kernel's semantics start
// at and the family function that makes it (ops/families.h). create_kernel picks, for a node,
// the entry of its op type with the newest opset not above the model's.

#include "ops/families.h"

namespace bulkhead::opencl {
namespace {

struct Entry {
  const char* op_type;
  int since;
  Result<OpPtr> (*make)(const Node&);
};

const Entry kOps[] = {
    {"Relu", 1, [](const Node& n) { return make_unary(n, UNARY_RELU); }},
    {"LeakyRelu", 1, [](const Node& n) { return make_unary(n, UNARY_LEAKY_RELU); }},
    {"Sigmoid", 1, [](const Node& n) { return make_unary(n, UNARY_SIGMOID); }},
    {"Tanh", 1, [](const Node& n) { return make_unary(n, UNARY_TANH); }},
    {"Exp", 1, [](const Node& n) { return make_unary(n, UNARY_EXP); }},
    {"Log", 1, [](const Node& n) { return make_unary(n, UNARY_LOG); }},
    {"Sqrt", 1, [](const Node& n) { return make_unary(n, UNARY_SQRT); }},
    {"Abs", 1, [](const Node& n) { return make_unary(n, UNARY_ABS); }},
    {"Neg", 1, [](const Node& n) { return make_unary(n, UNARY_NEG); }},
    {"Clip", 1, [](const Node& n) { return make_unary(n, UNARY_CLIP); }},
    {"HardSigmoid", 1, [](const Node& n) { return make_unary(n, UNARY_HARD_SIGMOID); }},
    {"HardSwish", 14, [](const Node& n) { return make_unary(n, UNARY_HARD_SWISH); }},
    {"Elu", 1, [](const Node& n) { return make_unary(n, UNARY_ELU); }},
    {"Selu", 1, [](const Node& n) { return make_unary(n, UNARY_SELU); }},
    {"Erf", 9, [](const Node& n) { return make_unary(n, UNARY_ERF); }},
    {"Gelu", 20, [](const Node& n) { return make_unary(n, UNARY_GELU); }},
    {"Softplus", 1, [](const Node& n) { return make_unary(n, UNARY_SOFTPLUS); }},
    {"Reciprocal", 1, [](const Node& n) { return make_unary(n, UNARY_RECIPROCAL); }},
    {"Floor", 1, [](const Node& n) { return make_unary(n, UNARY_FLOOR); }},
    {"Ceil", 1, [](const Node& n) { return make_unary(n, UNARY_CEIL); }},
    {"Add", 7, [](const Node& n) { return make_binary(n, BINARY_ADD); }},
    {"Sub", 7, [](const Node& n) { return make_binary(n, BINARY_SUB); }},
    {"Mul", 7, [](const Node& n) { return make_binary(n, BINARY_MUL); }},
    {"Div", 7, [](const Node& n) { return make_binary(n, BINARY_DIV); }},
    {"Pow", 7, [](const Node& n) { return make_binary(n, BINARY_POW); }},
    {"Max", 8, [](const Node& n) { return make_binary(n, BINARY_MAX); }},
    {"Min", 8, [](const Node& n) { return make_binary(n, BINARY_MIN); }},
    {"PRelu", 7, [](const Node& n) { return make_binary(n, BINARY_PRELU); }},
    {"Conv", 1, make_conv},
    {"ConvTranspose", 1, make_conv_transpose},
    {"MatMul", 1, make_matmul},
    {"Gemm", 7, make_gemm},  // before 7 Gemm has the `broadcast` attribute: left to the CPU
    {"MaxPool", 1, [](const Node& n) { return make_pool(n, 0); }},
    {"AveragePool", 1, [](const Node& n) { return make_pool(n, 1); }},
    {"GlobalMaxPool", 1, [](const Node& n) { return make_global_pool(n, 0); }},
    {"GlobalAveragePool", 1, [](const Node& n) { return make_global_pool(n, 1); }},
    {"ReduceSum", 1, [](const Node& n) { return make_reduce(n, REDUCE_SUM, 13); }},
    {"ReduceMean", 1, [](const Node& n) { return make_reduce(n, REDUCE_MEAN, 18); }},
    {"ReduceMax", 1, [](const Node& n) { return make_reduce(n, REDUCE_MAX, 18); }},
    {"ReduceMin", 1, [](const Node& n) { return make_reduce(n, REDUCE_MIN, 18); }},
    {"ReduceSumSquare", 1, [](const Node& n) { return make_reduce(n, REDUCE_SUM_SQUARE, 18); }},
    {"ReduceL1", 1, [](const Node& n) { return make_reduce(n, REDUCE_L1, 18); }},
    {"ReduceL2", 1, [](const Node& n) { return make_reduce(n, REDUCE_L2, 18); }},
    {"ReduceLogSumExp", 1, [](const Node& n) { return make_reduce(n, REDUCE_LOG_SUM_EXP, 18); }},
    {"Softmax", 1, [](const Node& n) { return make_softmax(n, false); }},
    {"LogSoftmax", 1, [](const Node& n) { return make_softmax(n, true); }},
    {"BatchNormalization", 7, make_batch_norm},
    {"InstanceNormalization", 1, make_instance_norm},
    {"LayerNormalization", 17, make_layer_norm},
    {"Resize", 10, make_resize},
    {"Concat", 1, make_concat},
    {"Slice", 1, make_slice},
    {"Transpose", 1, make_transpose},
    {"Pad", 1, make_pad},
    {"Gather", 1, make_gather},
    {"Reshape", 1, make_reshape},
    {"Flatten", 1, make_flatten},
    {"Squeeze", 1, make_squeeze},
    {"Unsqueeze", 1, make_unsqueeze},
    {"Identity", 1, make_identity},
};

}  // namespace

std::vector<BhpOpInfo> list_ops() {
  std::vector<BhpOpInfo> ops;
  for (const Entry& e : kOps) ops.push_back(BhpOpInfo{sizeof(BhpOpInfo), "", e.op_type, e.since});
  return ops;
}

Result<OpPtr> make_op_for(const Node& node) {
  const Entry* best = nullptr;
  const std::string op = node.op_type();
  for (const Entry& e : kOps)
    if (op == e.op_type && e.since <= node.opset() && (!best || e.since > best->since)) best = &e;
  if (!best)
    return unsupported(node.where() + "the OpenCL backend has no kernel for this operator at opset " +
                       std::to_string(node.opset()));
  return best->make(node);
}

}  // namespace bulkhead::opencl
