// The operator families (ops/<family>.cc), each making the Op for its operators from a
// node, and the table of them all (registry.cc).
#pragma once

#include <vector>

#include "ops/op.h"

namespace bulkhead::opencl {

// The operators of the backend, for list_ops; the Op for a node (BH_UNSUPPORTED for an
// operator or opset the backend lacks).
std::vector<BhpOpInfo> list_ops();
Result<OpPtr> make_op_for(const Node& node);

Result<OpPtr> make_unary(const Node& n, int code);
Result<OpPtr> make_binary(const Node& n, int code);
// y = a op b with numpy broadcasting (elementwise.cc), for the ops that need one inside.
Status dispatch_binary(Call& call, const Tensor& a, const Tensor& b, const Tensor& y, int op);

Result<OpPtr> make_conv(const Node& n);
Result<OpPtr> make_conv_transpose(const Node& n);
Result<OpPtr> make_matmul(const Node& n);
Result<OpPtr> make_gemm(const Node& n);
Result<OpPtr> make_pool(const Node& n, int kind);  // 0 max, 1 average
Result<OpPtr> make_global_pool(const Node& n, int kind);

Result<OpPtr> make_reduce(const Node& n, int op, int axes_input_since);
Result<OpPtr> make_softmax(const Node& n, bool log);
Result<OpPtr> make_batch_norm(const Node& n);
Result<OpPtr> make_instance_norm(const Node& n);
Result<OpPtr> make_layer_norm(const Node& n);

Result<OpPtr> make_transpose(const Node& n);
Result<OpPtr> make_concat(const Node& n);
Result<OpPtr> make_slice(const Node& n);
Result<OpPtr> make_pad(const Node& n);
Result<OpPtr> make_gather(const Node& n);
Result<OpPtr> make_resize(const Node& n);

Result<OpPtr> make_reshape(const Node& n);
Result<OpPtr> make_flatten(const Node& n);
Result<OpPtr> make_squeeze(const Node& n);
Result<OpPtr> make_unsqueeze(const Node& n);
Result<OpPtr> make_identity(const Node& n);

}  // namespace bulkhead::opencl
