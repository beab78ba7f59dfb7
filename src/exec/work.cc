#include "exec/work.h"

#include "backend/qlinear_conv_transpose.h"
#include "backend/qlinear_gemm.h"

#include <algorithm>
#include <limits>
#include <set>
#include <string>

namespace bulkhead::exec {
namespace {

constexpr double kUnknown = std::numeric_limits<double>::infinity();

// The fixed dims of `v` (an initializer or a value with a known shape); false if any is not.
bool dims_of(const ir::Graph& g, const std::string& v, std::vector<int64_t>* out) {
  out->clear();
  if (v.empty()) return false;
  if (auto it = g.initializers.find(v); it != g.initializers.end()) {
    for (int64_t d : it->second.shape()) out->push_back(d);
    return true;
  }
  const ir::ValueInfo* vi = g.info(v);
  if (!vi || vi->type != ir::ValueType::kTensor || !vi->shape) return false;
  for (const ir::Dim& d : *vi->shape) {
    if (!d.fixed()) return false;
    out->push_back(d.value);
  }
  return true;
}

double product(const std::vector<int64_t>& d, size_t from = 0) {
  double p = 1;
  for (size_t i = from; i < d.size(); ++i) p *= static_cast<double>(d[i]);
  return p;
}

double node_macs(const ir::Graph& g, const ir::Node& n) {
  for (const auto& [name, a] : n.attrs)
    if (a.type == ir::AttrType::kGraph || a.type == ir::AttrType::kGraphs) return kUnknown;
  // (Loop, If and Scan carry their subgraphs as attributes: caught above.)
  static const std::set<std::string> opaque = {"LSTM", "GRU", "RNN", "Attention", "MultiHeadAttention", "Einsum",
                                               "FlexAttention", "LinearAttention"};
  if (opaque.count(n.op_type)) return kUnknown;
  const std::string& op = n.op_type;
  std::vector<int64_t> w, y, a;
  if (op == "Conv" || op == "ConvInteger" || op == "QLinearConv") {
    const size_t wi = op == "QLinearConv" ? 3 : 1;
    if (n.inputs.size() <= wi || n.outputs.empty() || !dims_of(g, n.inputs[wi], &w) || !dims_of(g, n.outputs[0], &y) ||
        w.size() < 3)
      return kUnknown;
    return product(y) * product(w, 1);  // each output: C/G x kernel multiply-adds
  }
  if (op == "ConvTranspose" || op == kQLinearConvTranspose) {
    const size_t wi = op == "ConvTranspose" ? 1 : 3;
    if (n.inputs.size() <= wi || !dims_of(g, n.inputs[wi], &w) || !dims_of(g, n.inputs[0], &a) || w.size() < 3)
      return kUnknown;
    return product(a) * product(w, 1);  // each input: M/G x kernel multiply-adds
  }
  if (op == "MatMul" || op == "MatMulInteger" || op == "QLinearMatMul" || op == "Gemm" || op == kQLinearGemm) {
    if (n.inputs.empty() || n.outputs.empty() || !dims_of(g, n.inputs[0], &a) || !dims_of(g, n.outputs[0], &y) ||
        a.empty())
      return kUnknown;
    int64_t k = a.back();
    if (op == "Gemm" && n.attr_int("transA", 0) && a.size() == 2) k = a[0];
    return product(y) * static_cast<double>(k);
  }
  return 0;
}

}  // namespace

double largest_node_macs(const ir::Graph& g) {
  double most = 0;
  for (const auto& n : g.nodes) {
    if (!n.domain.empty()) {
      // The optimiser's own nodes: QLinearGemm and QLinearConvTranspose are products,
      // QLinearEltwise does no multiply-adds; any other domain's work is not known here.
      if (n.domain != "bulkhead") return kUnknown;
      if (n.op_type == kQLinearGemm || n.op_type == kQLinearConvTranspose) most = std::max(most, node_macs(g, n));
      if (most == kUnknown) break;
      continue;
    }
    most = std::max(most, node_macs(g, n));
    if (most == kUnknown) break;
  }
  return most;
}

}  // namespace bulkhead::exec
