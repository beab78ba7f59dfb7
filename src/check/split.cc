#include "check/split.h"

#include <algorithm>
#include <fstream>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <unordered_map>
#include <unordered_set>

#include "ir/onnx_import.h"
#include "onnx/onnx_pb.h"

namespace bulkhead::check {
namespace {

// Every name a node reads: its inputs and, for control flow, the names its subgraphs use
// (those defined inside the subgraph are harmless extras: nothing outside produces them).
void names_read(const onnx::NodeProto& n, std::vector<std::string>& out) {
  for (const auto& i : n.input())
    if (!i.empty()) out.push_back(i);
  std::function<void(const onnx::GraphProto&)> walk = [&](const onnx::GraphProto& g) {
    for (const auto& sn : g.node()) names_read(sn, out);
    for (const auto& o : g.output()) out.push_back(o.name());
  };
  for (const auto& a : n.attribute()) {
    if (a.has_g()) walk(a.g());
    for (const auto& g : a.graphs()) walk(g);
  }
}

}  // namespace

// Resolves an external initializer into raw_data so the parts are self-contained.
Status inline_external(onnx::TensorProto& t, const std::string& dir) {
  if (t.data_location() != onnx::TensorProto::EXTERNAL) return Status::ok();
  BH_ASSIGN_OR_RETURN(Tensor x, ir::tensor_from_proto(t, ir::DataFolder{dir}));
  if (x.dtype() == DataType::kString) return unsupported("initializer '" + t.name() + "': external string data");
  onnx::TensorProto r;
  r.set_name(t.name());
  r.set_data_type(t.data_type());
  for (auto d : t.dims()) r.add_dims(d);
  std::string raw(dtype_packed_nbytes(x.dtype(), x.numel()), '\0');
  dtype_pack(x.dtype(), x.raw(), x.numel(), raw.data());  // sub-byte types are packed in files
  r.set_raw_data(std::move(raw));
  t = std::move(r);
  return Status::ok();
}

Result<SplitResult> split_model(const std::string& path, double fraction, const std::vector<std::string>& at) {
  BH_ASSIGN_OR_RETURN(std::string bytes, io::read_regular_file(path, io::kDefaultMaxFileBytes, "model"));
  onnx::ModelProto model;
  if (bytes.empty() || !model.ParseFromString(bytes))
    return invalid_model("'" + path + "' is not a valid ONNX model");
  std::string dir = path.find('/') == std::string::npos ? "." : path.substr(0, path.find_last_of('/'));
  const onnx::GraphProto& g = model.graph();
  const int n = g.node_size();
  if (n < 2) return invalid_argument("'" + path + "' has " + std::to_string(n) + " node(s): nothing to split");

  // Topological order (stable: file order among ready nodes).
  std::unordered_map<std::string, int> producer;
  for (int i = 0; i < n; ++i)
    for (const auto& o : g.node(i).output())
      if (!o.empty()) producer[o] = i;
  std::vector<std::vector<int>> deps(n), users(n);
  std::vector<int> pending(n, 0);
  for (int i = 0; i < n; ++i) {
    std::vector<std::string> rd;
    names_read(g.node(i), rd);
    std::set<int> ds;
    for (auto& r : rd) {
      auto it = producer.find(r);
      if (it != producer.end() && it->second != i) ds.insert(it->second);
    }
    for (int d : ds) deps[i].push_back(d), users[d].push_back(i), ++pending[i];
  }
  std::vector<int> order;
  std::set<int> ready;
  for (int i = 0; i < n; ++i)
    if (!pending[i]) ready.insert(i);
  while (!ready.empty()) {
    int i = *ready.begin();
    ready.erase(ready.begin());
    order.push_back(i);
    for (int u : users[i])
      if (--pending[u] == 0) ready.insert(u);
  }
  if (static_cast<int>(order.size()) != n) return invalid_model("'" + path + "': the graph has a cycle");

  std::vector<bool> in_front(n, false);
  if (!at.empty()) {
    std::vector<int> stack;
    for (const auto& name : at) {
      auto it = producer.find(name);
      if (it == producer.end()) return invalid_argument("no node of '" + path + "' produces a value named '" + name + "'");
      stack.push_back(it->second);
    }
    while (!stack.empty()) {
      int i = stack.back();
      stack.pop_back();
      if (in_front[i]) continue;
      in_front[i] = true;
      for (int d : deps[i]) stack.push_back(d);
    }
  } else {
    if (!(fraction > 0 && fraction < 1)) return invalid_argument("split fraction must be between 0 and 1, got " + std::to_string(fraction));
    int k = std::clamp(static_cast<int>(fraction * n + 0.5), 1, n - 1);
    for (int j = 0; j < k; ++j) in_front[order[j]] = true;
  }

  std::unordered_set<std::string> graph_inputs, initializers, graph_outputs;
  for (const auto& i : g.input()) graph_inputs.insert(i.name());
  for (const auto& t : g.initializer()) initializers.insert(t.name());
  for (const auto& o : g.output()) graph_outputs.insert(o.name());

  // What each part reads.
  std::vector<std::string> front_reads, back_reads;
  for (int i : order) names_read(g.node(i), in_front[i] ? front_reads : back_reads);
  std::unordered_set<std::string> back_read_set(back_reads.begin(), back_reads.end());
  std::unordered_set<std::string> front_read_set(front_reads.begin(), front_reads.end());

  // Constant nodes are weights, not activations: a part that reads one gets its own copy
  // rather than a boundary input.
  auto is_constant = [&](int i) { return g.node(i).op_type() == "Constant" && g.node(i).input_size() == 0; };
  SplitResult r;
  std::unordered_set<std::string> boundary_set;
  for (int i : order) {
    if (!in_front[i]) continue;
    ++r.front_nodes;
    for (const auto& o : g.node(i).output()) {
      if (o.empty() || is_constant(i)) continue;
      if (graph_outputs.count(o))
        return invalid_argument("model output '" + o + "' is computed before the cut; cut later (or name other values with --at)");
      if (back_read_set.count(o) && boundary_set.insert(o).second) r.boundary.push_back(o);
    }
  }
  r.back_nodes = n - r.front_nodes;
  if (r.boundary.empty()) return invalid_argument("nothing crosses the cut: the two parts are independent");
  for (const auto& name : back_read_set)
    if (graph_inputs.count(name) && !initializers.count(name))
      return invalid_argument("the part after the cut reads the model input '" + name +
                              "'; cut later so that only values computed before the cut cross it");

  // Element types of the boundary values: declared value_info, else bulkhead's inference.
  std::unordered_map<std::string, const onnx::ValueInfoProto*> declared;
  for (const auto& vi : g.value_info()) declared[vi.name()] = &vi;
  std::optional<ir::Model> inferred;
  auto boundary_info = [&](const std::string& name) -> Result<onnx::ValueInfoProto> {
    auto it = declared.find(name);
    if (it != declared.end() && it->second->type().tensor_type().elem_type() != 0) return *it->second;
    if (!inferred) {
      BH_ASSIGN_OR_RETURN(auto m, ir::load_model(path));
      inferred = std::move(m);
    }
    const ir::ValueInfo* vi = inferred->graph->info(name);
    if (!vi || vi->dtype == DataType::kUndefined || vi->type != ir::ValueType::kTensor)
      return unsupported("cannot tell the element type of the cut value '" + name + "' (cut elsewhere, or add value_info)");
    onnx::ValueInfoProto p;
    p.set_name(name);
    auto* tt = p.mutable_type()->mutable_tensor_type();
    tt->set_elem_type(static_cast<int32_t>(vi->dtype));
    if (vi->shape) {
      auto* sh = tt->mutable_shape();
      for (const auto& d : *vi->shape) {
        auto* dim = sh->add_dim();
        if (d.fixed()) dim->set_dim_value(d.value);
        else if (!d.param.empty()) dim->set_dim_param(d.param);
      }
    }
    return p;
  };

  auto build = [&](bool front) -> Result<std::string> {
    onnx::ModelProto part = model;
    onnx::GraphProto* pg = part.mutable_graph();
    pg->clear_node();
    pg->clear_input();
    pg->clear_output();
    pg->clear_initializer();
    pg->clear_value_info();
    pg->set_name(g.name() + (front ? "_front" : "_back"));
    const auto& reads = front ? front_read_set : back_read_set;
    if (!front)  // constants computed before the cut that the back part reads
      for (int i : order)
        if (in_front[i] && is_constant(i) && reads.count(g.node(i).output(0))) *pg->add_node() = g.node(i);
    for (int i : order)
      if (in_front[i] == front) *pg->add_node() = g.node(i);
    for (const auto& t : g.initializer())
      if (reads.count(t.name())) {
        onnx::TensorProto* c = pg->add_initializer();
        *c = t;
        BH_RETURN_IF_ERROR(inline_external(*c, dir));
      }
    if (front) {
      for (const auto& in : g.input())
        if (reads.count(in.name())) *pg->add_input() = in;
      for (const auto& b : r.boundary) {
        BH_ASSIGN_OR_RETURN(auto vi, boundary_info(b));
        *pg->add_output() = vi;
      }
    } else {
      for (const auto& b : r.boundary) {
        BH_ASSIGN_OR_RETURN(auto vi, boundary_info(b));
        *pg->add_input() = vi;
      }
      for (const auto& in : g.input())  // IR < 4: initializers listed as inputs
        if (reads.count(in.name()) && initializers.count(in.name())) *pg->add_input() = in;
      for (const auto& o : g.output()) *pg->add_output() = o;
    }
    for (const auto& vi : g.value_info())
      if (reads.count(vi.name()) && !boundary_set.count(vi.name())) *pg->add_value_info() = vi;
    std::string out;
    if (!part.SerializeToString(&out)) return internal_error("serialising the split model failed");
    return out;
  };
  BH_ASSIGN_OR_RETURN(r.front, build(true));
  BH_ASSIGN_OR_RETURN(r.back, build(false));
  return r;
}

}  // namespace bulkhead::check
