#include "exec/executor.h"

#include <algorithm>
#include <chrono>
#include <map>

#include "common/sizes.h"
#include "io/file.h"
#include <unordered_set>

namespace bulkhead::exec {

Status check_tensor_limit(uint64_t max_bytes, DataType dtype, const Shape& shape, const std::string& what) {
  if (!max_bytes || dtype == DataType::kString) return Status::ok();
  size_t bytes = 0;
  if (!checked_nbytes(dtype, shape, &bytes)) return shape_size_error(dtype, shape).with_context(what);
  if (bytes <= max_bytes) return Status::ok();
  return Status(StatusCode::kResourceExhausted, what + dtype_name(dtype) + shape_to_string(shape) + " would be " +
                                                    io::format_bytes(bytes) + ", more than the session's max_tensor_bytes of " +
                                                    io::format_bytes(max_bytes));
}

Status RunLimits::check_time(const std::string& where) const {
  if (!expired()) return Status::ok();
  return Status(StatusCode::kDeadlineExceeded,
                "the run took longer than its time limit of " + std::to_string(timeout_ms) + " ms (stopped before " + where + ")");
}

Status RunLimits::check_tensor(DataType dtype, const Shape& shape, const std::string& what) const {
  return check_tensor_limit(max_tensor_bytes, dtype, shape, what);
}

namespace {

DataType type_of(const std::string& name, const ir::Graph& g, const CompiledGraph* parent) {
  auto it = g.initializers.find(name);
  if (it != g.initializers.end()) return it->second.dtype();
  if (const ir::ValueInfo* vi = g.info(name)) return vi->dtype;
  if (parent && parent->graph) return type_of(name, *parent->graph, nullptr);
  return DataType::kUndefined;
}

// Operators whose result is not a function of their inputs alone.
bool is_nondeterministic(const ir::Node& n) {
  static const char* kOps[] = {"RandomNormal", "RandomUniform", "RandomNormalLike", "RandomUniformLike",
                               "Multinomial",  "Bernoulli",     "Dropout"};
  for (const char* op : kOps)
    if (n.op_type == op) return true;
  return false;
}

// Runs one kernel at compile time on constant inputs.
class FoldContext final : public KernelContext {
 public:
  FoldContext(const ir::Node& node, std::vector<Value> inputs, Allocator& alloc, uint64_t max_tensor_bytes)
      : node_(node), inputs_(std::move(inputs)), outputs_(node.outputs.size()), alloc_(alloc), max_tensor_bytes_(max_tensor_bytes) {}
  int num_inputs() const override { return static_cast<int>(inputs_.size()); }
  const Value* input_value(int i) const override {
    return i >= 0 && i < num_inputs() && !inputs_[i].is_none() ? &inputs_[i] : nullptr;
  }
  int num_outputs() const override { return static_cast<int>(outputs_.size()); }
  bool output_wanted(int i) const override { return i >= 0 && i < num_outputs() && !node_.outputs[i].empty(); }
  Result<Tensor> allocate_output(int i, DataType dtype, const Shape& shape) override {
    if (i < 0 || i >= num_outputs()) return internal_error(where() + "output index out of range");
    BH_RETURN_IF_ERROR(check_tensor_limit(max_tensor_bytes_, dtype, shape, where() + "output " + std::to_string(i) + " "));
    BH_ASSIGN_OR_RETURN(Tensor t, Tensor::allocate(alloc_, dtype, shape));
    outputs_[i] = Value(t);
    return t;
  }
  Status set_output(int i, Value v) override {
    if (i < 0 || i >= num_outputs()) return internal_error(where() + "output index out of range");
    outputs_[i] = std::move(v);
    return Status::ok();
  }
  Result<Tensor> allocate_scratch(DataType dtype, const Shape& shape) override {
    BH_RETURN_IF_ERROR(check_tensor_limit(max_tensor_bytes_, dtype, shape, where() + "scratch "));
    return Tensor::allocate(alloc_, dtype, shape);
  }
  int threads() const override { return 1; }
  Result<std::vector<Value>> run_subgraph(const std::string&, std::vector<Value>) override {
    return internal_error(where() + "cannot fold a node with subgraphs");
  }
  const std::string& where() const override { return where_; }
  std::vector<Value>& outputs() { return outputs_; }

 private:
  const ir::Node& node_;
  const std::string where_ = node_.label() + ": ";
  std::vector<Value> inputs_, outputs_;
  Allocator& alloc_;
  uint64_t max_tensor_bytes_;
};

// The element type and static shape of a tensor value, when the graph knows them.
bool static_tensor(const ir::Graph& g, const std::string& name, DataType* dt, Shape* shape) {
  const ir::ValueInfo* vi = g.info(name);
  if (!vi || vi->type != ir::ValueType::kTensor || !vi->shape) return false;
  if (vi->dtype == DataType::kUndefined || vi->dtype == DataType::kString) return false;
  shape->clear();
  for (const auto& d : *vi->shape) {
    if (!d.fixed()) return false;
    shape->push_back(d.value);
  }
  *dt = vi->dtype;
  return true;
}

// Finds the Concats whose inputs can be written in place (ConcatGroup in executor.h) and
// gives their producers' outputs a view into the Concat's output.
void plan_concat_views(CompiledGraph& cg, const ir::Graph& graph, const CompileOptions& opts) {
  const size_t ns = static_cast<size_t>(cg.num_slots);
  std::vector<int> producer(ns, -1), producer_out(ns, -1), reads(ns, 0);
  std::vector<bool> graph_output(ns, false);
  for (int s : cg.output_slots) graph_output[s] = true;
  for (size_t i = 0; i < cg.steps.size(); ++i) {
    const Step& st = cg.steps[i];
    for (int s : st.in)
      if (s >= 0) reads[s]++;
    for (const auto& [a, sub] : st.subgraphs)
      for (const auto& [here, there] : sub->outer) reads[there] += 2;  // never a view
    for (size_t k = 0; k < st.out.size(); ++k)
      if (st.out[k] >= 0) {
        producer[st.out[k]] = static_cast<int>(i);
        producer_out[st.out[k]] = static_cast<int>(k);
      }
  }
  auto on_host = [&](const Step& st) { return opts.placements[st.placement].device->compute_domain().is_host(); };
  for (size_t c = 0; c < cg.steps.size(); ++c) {
    const Step& cs = cg.steps[c];
    const ir::Node& n = *cs.node;
    if (n.op_type != "Concat" || !n.domain.empty() || cs.in.size() < 2 || cs.out.size() != 1 || cs.out[0] < 0 ||
        !on_host(cs))
      continue;
    DataType dt;
    Shape full;
    if (!static_tensor(graph, n.outputs[0], &dt, &full) || full.empty()) continue;
    const int r = static_cast<int>(full.size());
    int64_t axis = n.attr_int("axis", 1);
    if (axis < 0) axis += r;
    if (axis < 0 || axis >= r) continue;
    // Declared shapes: their products need not fit (a model may declare any size).
    int64_t outer = 1, inner = 1;
    bool fits = true;
    for (int d = 0; d < axis; ++d) fits = fits && checked_mul(outer, full[d], &outer);
    for (int d = static_cast<int>(axis) + 1; d < r; ++d) fits = fits && checked_mul(inner, full[d], &inner);
    if (!fits || outer != 1) continue;
    const size_t row_bytes = static_cast<size_t>(inner) * dtype_size(dt);
    std::vector<std::pair<int, OutputView>> views;
    size_t offset = 0;
    bool ok = true;
    for (size_t k = 0; k < cs.in.size() && ok; ++k) {
      const int s = cs.in[k];
      // Made by an earlier step here on the host, read by this Concat alone.
      ok = s >= 0 && producer[s] >= 0 && static_cast<size_t>(producer[s]) < c && reads[s] == 1 && !graph_output[s];
      if (!ok) break;
      const Step& ps = cg.steps[producer[s]];
      DataType idt;
      Shape is;
      ok = on_host(ps) && ps.node->op_type != "Concat" && static_tensor(graph, n.inputs[k], &idt, &is) && idt == dt &&
           static_cast<int>(is.size()) == r;
      for (int d = 0; ok && d < r; ++d) ok = d == axis || is[d] == full[d];
      if (!ok) break;
      views.emplace_back(s, OutputView{static_cast<int>(cg.concat_groups.size()), offset, is});
      offset += static_cast<size_t>(is[axis]) * row_bytes;
    }
    if (!ok || offset != static_cast<size_t>(full[axis]) * row_bytes) continue;
    cg.concat_groups.push_back({cs.out[0], dt, full});
    for (auto& [s, v] : views) {
      Step& ps = cg.steps[producer[s]];
      if (ps.out_view.empty()) ps.out_view.resize(ps.out.size());
      ps.out_view[producer_out[s]] = std::move(v);
    }
  }
}

}  // namespace

Result<std::unique_ptr<CompiledGraph>> compile(const ir::Graph& graph, const CompileOptions& opts,
                                               const CompiledGraph* parent) {
  auto cg = std::make_unique<CompiledGraph>();
  cg->graph = &graph;
  cg->node_count_per_placement.assign(opts.placements.size(), 0);
  auto slot = [&](const std::string& name) -> int {
    auto it = cg->slot_of.find(name);
    if (it != cg->slot_of.end()) return it->second;
    int s = cg->num_slots++;
    cg->slot_of[name] = s;
    cg->slot_name.push_back(name);
    return s;
  };
  for (const auto& in : graph.inputs) cg->input_slots.push_back(slot(in.name));
  std::unordered_set<std::string> graph_inputs;
  for (const auto& in : graph.inputs) graph_inputs.insert(in.name);
  for (const auto& [name, t] : graph.initializers) {
    cg->constants.emplace_back(slot(name), Value(t));
    // A subgraph input shadows nothing here; an overridable top-level input is not constant.
    bool overridable = graph_inputs.count(name) && (parent || opts.overridable.count(name));
    if (!overridable) cg->constant_values[name] = t;
  }
  for (const auto& name : graph.outer_refs) {
    if (cg->slot_of.count(name)) continue;
    if (!parent) return invalid_model("graph '" + graph.name + "': value '" + name + "' is used but never produced");
    auto p = parent->slot_of.find(name);
    if (p == parent->slot_of.end())
      return invalid_model("subgraph '" + graph.name + "': value '" + name + "' is not defined in any enclosing graph");
    auto pc = parent->constant_values.find(name);
    if (pc != parent->constant_values.end()) {
      // Constant in the enclosing graph: a constant here too.
      cg->constants.emplace_back(slot(name), Value(pc->second));
      cg->constant_values[name] = pc->second;
    } else {
      cg->outer.emplace_back(slot(name), p->second);
    }
  }

  std::unordered_set<std::string> defined;
  for (auto& [n, s] : cg->slot_of) defined.insert(n);
  std::map<std::pair<std::string, int>, Tensor> resident;  // constants already on a device
  for (const auto& node : graph.nodes) {
    Step step;
    step.node = &node;
    step.where = node.label() + ": ";
    for (const auto& in : node.inputs) {
      if (in.empty()) { step.in.push_back(-1); continue; }
      if (!defined.count(in)) return invalid_model(node.label() + ": input '" + in + "' is never produced");
      step.in.push_back(slot(in));
    }
    for (const auto& out : node.outputs) {
      step.out.push_back(out.empty() ? -1 : slot(out));
      if (!out.empty()) defined.insert(out);
    }
    KernelInfo info{node, {}, {}, opts.threads, &graph};
    info.shared = opts.shared;
    bool all_constant = true;
    for (const auto& in : node.inputs) {
      auto it = in.empty() ? cg->constant_values.end() : cg->constant_values.find(in);
      bool is_const = it != cg->constant_values.end();
      all_constant = all_constant && (in.empty() || is_const);
      info.input_types.push_back(in.empty() ? DataType::kUndefined : is_const ? it->second.dtype() : type_of(in, graph, parent));
      info.constant_inputs.push_back(is_const ? it->second : Tensor());
    }
    // Placement: the first device in the session's list that has this operator and
    // accepts this node.
    std::vector<std::string> seen;
    std::string backends;
    for (const auto& pl : opts.placements) {
      const std::string& b = pl.device->info().backend;
      if (std::find(seen.begin(), seen.end(), b) != seen.end()) continue;
      seen.push_back(b);
      backends += (backends.empty() ? "" : " or ") + b;
    }
    Status last = unsupported(node.label() + ": operator " + (node.domain.empty() ? "" : node.domain + ".") +
                              node.op_type + " (opset " + std::to_string(node.opset) + ") is not supported by " +
                              (backends.empty() ? std::string("any device") : backends));
    bool placed = false;
    for (size_t p = 0; p < opts.placements.size() && !placed; ++p) {
      // Subgraph bodies run where their control-flow node runs, on the host: If, Loop
      // and Scan read conditions and carried values on the CPU between iterations.
      if (parent && !opts.placements[p].device->compute_domain().is_host()) continue;
      const KernelFactory* f = opts.placements[p].device->kernels().find(node.domain, node.op_type, node.opset);
      if (!f) continue;
      auto k = (*f)(info);
      if (!k.is_ok()) { last = k.status(); continue; }
      step.kernel = std::move(k).value();
      step.placement = static_cast<int>(p);
      placed = true;
    }
    if (!placed) return last;
    // Constant folding: a deterministic node without subgraphs whose inputs are all known
    // is computed once, here, and its outputs become constants of the graph.
    bool has_graph_attr = false;
    for (const auto& [aname, a] : node.attrs) has_graph_attr = has_graph_attr || a.type == ir::AttrType::kGraph || a.type == ir::AttrType::kGraphs;
    if (opts.fold_constants && all_constant && !has_graph_attr && !is_nondeterministic(node) &&
        opts.placements[step.placement].device->compute_domain().is_host()) {
      std::vector<Value> ins;
      for (const auto& in : node.inputs) ins.push_back(in.empty() ? Value() : Value(cg->constant_values[in]));
      // Shared: folded into host memory of their own and interned, so that sessions of one
      // model hold one copy and none holds another session's allocator alive.
      std::shared_ptr<Allocator> fold_alloc = opts.shared ? std::shared_ptr<Allocator>(HostAllocator::create("shared constants"))
                                                          : opts.placements[step.placement].allocator;
      FoldContext fc(node, std::move(ins), *fold_alloc, opts.max_tensor_bytes);
      bool folded = step.kernel->compute(fc).is_ok();
      for (size_t i = 0; folded && i < node.outputs.size(); ++i)
        folded = node.outputs[i].empty() || fc.outputs()[i].is_tensor();
      if (folded) {
        for (size_t i = 0; i < node.outputs.size(); ++i) {
          if (node.outputs[i].empty()) continue;
          Value v = fc.outputs()[i];
          if (opts.shared) v.tensor = opts.shared->intern(v.tensor);
          cg->constants.emplace_back(step.out[i], v);
          cg->constant_values[node.outputs[i]] = v.tensor;
        }
        cg->folded_nodes++;
        continue;
      }
    }
    cg->node_count_per_placement[step.placement]++;
    // Constants read by a step on a device: copied into its domain once, here.
    const Placement& pl = opts.placements[step.placement];
    if (opts.router && !pl.device->compute_domain().is_host()) {
      step.resident.resize(node.inputs.size());
      for (size_t i = 0; i < node.inputs.size(); ++i) {
        if (!info.input_is_constant(i)) continue;
        const Tensor& c = info.constant_inputs[i];
        if (c.dtype() == DataType::kString || c.domain() == pl.device->compute_domain()) continue;
        auto key = std::make_pair(node.inputs[i], step.placement);
        auto cached = resident.find(key);
        if (cached == resident.end()) {
          BH_ASSIGN_OR_RETURN(Tensor on_device, Tensor::allocate(*pl.allocator, c.dtype(), c.shape()));
          BH_RETURN_IF_ERROR(opts.router->copy(c, on_device).with_context(node.label() + ": constant '" + node.inputs[i] + "': "));
          cached = resident.emplace(key, on_device).first;
        }
        step.resident[i] = Value(cached->second);
      }
    }
    for (const auto& [aname, a] : node.attrs) {
      if (a.type != ir::AttrType::kGraph || !a.g) continue;
      BH_ASSIGN_OR_RETURN(auto sub, compile(*a.g, opts, cg.get()));
      for (size_t p = 0; p < sub->node_count_per_placement.size(); ++p)
        cg->node_count_per_placement[p] += sub->node_count_per_placement[p];
      step.subgraphs[aname] = std::move(sub);
    }
    cg->steps.push_back(std::move(step));
  }
  for (const auto& out : graph.outputs) {
    auto it = cg->slot_of.find(out.name);
    if (it == cg->slot_of.end()) {
      if (!parent) return invalid_model("graph output '" + out.name + "' is never produced");
      return invalid_model("subgraph '" + graph.name + "': output '" + out.name + "' is never produced");
    }
    cg->output_slots.push_back(it->second);
  }

  plan_concat_views(*cg, graph, opts);

  // Steps read the graph's constants from Step::resident, bound here once, so that a run
  // copies into its frame (and destroys) only the constants something else reads there:
  // graph outputs, and defaults a caller may override (not in constant_values).
  {
    std::unordered_map<int, size_t> constant_at;  // slot -> index in cg->constants
    for (size_t k = 0; k < cg->constants.size(); ++k) constant_at[cg->constants[k].first] = k;
    std::vector<bool> in_frame(cg->num_slots, false);
    for (int s : cg->output_slots) in_frame[s] = true;
    for (auto& st : cg->steps)
      for (size_t i = 0; i < st.in.size(); ++i) {
        const int s = st.in[i];
        auto c = s < 0 ? constant_at.end() : constant_at.find(s);
        if (c == constant_at.end()) continue;
        if (st.resident.size() > i && !st.resident[i].is_none()) continue;  // a device's copy
        if (!cg->constant_values.count(cg->slot_name[s])) continue;  // a default: in the frame
        const Value& v = cg->constants[c->second].second;
        // Bound only where the step reads it as it is: a constant in another domain goes
        // through the frame and the run's copy into the step's domain, as before.
        if (v.is_tensor() && v.tensor.dtype() != DataType::kString &&
            v.tensor.domain() != opts.placements[st.placement].device->compute_domain()) {
          in_frame[s] = true;
          continue;
        }
        if (st.resident.size() < st.in.size()) st.resident.resize(st.in.size());
        st.resident[i] = v;
      }
    std::vector<std::pair<int, Value>> kept;
    for (auto& [slot, v] : cg->constants)
      if (in_frame[slot] || !cg->constant_values.count(cg->slot_name[slot])) kept.emplace_back(slot, std::move(v));
    cg->constants = std::move(kept);
  }

  // Release points: the last step that reads a slot, directly or from a subgraph.
  std::vector<int> last_use(cg->num_slots, -1);
  std::vector<bool> keep(cg->num_slots, false);
  for (int s : cg->output_slots) keep[s] = true;
  for (auto& [s, v] : cg->constants) keep[s] = true;
  for (auto& [s, p] : cg->outer) keep[s] = true;
  for (size_t i = 0; i < cg->steps.size(); ++i) {
    auto& st = cg->steps[i];
    for (int s : st.in)
      if (s >= 0) last_use[s] = static_cast<int>(i);
    for (auto& [a, sub] : st.subgraphs)
      for (auto& [here, there] : sub->outer) last_use[there] = static_cast<int>(i);
    for (int s : st.out)
      if (s >= 0 && last_use[s] < 0) last_use[s] = static_cast<int>(i);  // unused outputs die at once
  }
  for (int s = 0; s < cg->num_slots; ++s)
    if (!keep[s] && last_use[s] >= 0) cg->steps[last_use[s]].release.push_back(s);
  // Inputs whose memory a step may write its output over.
  std::vector<bool> made_here(cg->num_slots, false);
  for (const auto& st : cg->steps)
    for (int s : st.out)
      if (s >= 0) made_here[s] = true;
  for (int s : cg->input_slots) made_here[s] = false;
  for (size_t i = 0; i < cg->steps.size(); ++i) {
    auto& st = cg->steps[i];
    if (!st.subgraphs.empty()) continue;
    st.donatable.assign(st.in.size(), false);
    for (size_t k = 0; k < st.in.size(); ++k) {
      int s = st.in[k];
      if (s < 0 || keep[s] || !made_here[s] || last_use[s] != static_cast<int>(i)) continue;
      st.donatable[k] = std::count(st.in.begin(), st.in.end(), s) == 1;
    }
  }
  cg->capturable = !parent && graph.all_shapes_static();
  for (const auto& st : cg->steps) cg->capturable = cg->capturable && st.subgraphs.empty();
  cg->nodes_per_placement.assign(opts.placements.size(), {});
  for (const auto& st : cg->steps) cg->nodes_per_placement[st.placement].push_back(st.node);
  return cg;
}

namespace {

class StepContext final : public KernelContext {
 public:
  StepContext(const CompiledGraph& g, const Step& step, std::vector<Value>& frame, std::vector<Value>& moved_inputs,
              const RunContext& rc, Allocator& alloc)
      : g_(g), step_(step), frame_(frame), inputs_(moved_inputs), rc_(rc), alloc_(alloc) {}

  int num_inputs() const override { return static_cast<int>(step_.in.size()); }
  const Value* input_value(int i) const override {
    if (i < 0 || i >= num_inputs() || step_.in[i] < 0) return nullptr;
    const Value& v = inputs_[i];
    if (v.is_none() && !v.is_optional) return nullptr;
    return &v;
  }
  int num_outputs() const override { return static_cast<int>(step_.out.size()); }
  bool output_wanted(int i) const override { return i >= 0 && i < num_outputs() && step_.out[i] >= 0; }
  Result<Tensor> allocate_output(int i, DataType dtype, const Shape& shape) override {
    if (i < 0 || i >= num_outputs()) return internal_error(where() + "output index " + std::to_string(i) + " out of range");
    if (rc_.limits) BH_RETURN_IF_ERROR(rc_.limits->check_tensor(dtype, shape, where() + "output " + std::to_string(i) + " "));
    BH_ASSIGN_OR_RETURN(Tensor t, allocate_or_view(i, dtype, shape));
    if (step_.out[i] >= 0) {
      frame_[step_.out[i]] = Value(t);
      set_[i] = true;
    }
    return t;
  }
  Status set_output(int i, Value value) override {
    if (i < 0 || i >= num_outputs()) return internal_error(where() + "output index " + std::to_string(i) + " out of range");
    if (step_.out[i] >= 0) {
      frame_[step_.out[i]] = std::move(value);
      set_[i] = true;
    }
    return Status::ok();
  }
  Result<Tensor> allocate_scratch(DataType dtype, const Shape& shape) override {
    if (rc_.limits) BH_RETURN_IF_ERROR(rc_.limits->check_tensor(dtype, shape, where() + "scratch "));
    return Tensor::allocate(alloc_, dtype, shape);
  }
  Result<Tensor> reuse_input_as_output(int i, int o, DataType dtype, const Shape& shape) override {
    if (i < 0 || i >= num_inputs() || o < 0 || o >= num_outputs() || step_.out[o] < 0) return Tensor();
    if (static_cast<size_t>(i) >= step_.donatable.size() || !step_.donatable[i]) return Tensor();
    if (static_cast<size_t>(o) < step_.out_view.size() && step_.out_view[o].group >= 0) return Tensor();
    const Value& v = inputs_[i];
    if (!v.is_tensor() || v.tensor.dtype() != dtype || v.tensor.shape() != shape || v.tensor.offset() != 0 || !v.tensor.raw())
      return Tensor();
    // Held here and by the input's frame slot, by nothing else (no view, no alias).
    if (v.tensor.buffer().use_count() != 2) return Tensor();
    Tensor t = v.tensor;
    frame_[step_.out[o]] = Value(t);
    set_[o] = true;
    return t;
  }
  int threads() const override { return rc_.threads; }
  Result<std::vector<Value>> run_subgraph(const std::string& attr, std::vector<Value> inputs) override {
    auto it = step_.subgraphs.find(attr);
    if (it == step_.subgraphs.end()) return invalid_model(where() + "has no graph attribute '" + attr + "'");
    if (rc_.limits) {
      ++subgraph_runs_;
      if (rc_.limits->max_loop_iterations && subgraph_runs_ > rc_.limits->max_loop_iterations)
        return Status(StatusCode::kResourceExhausted, where() + "would run its body more than the session's max_loop_iterations of " +
                                                          std::to_string(rc_.limits->max_loop_iterations) + " times");
      // The message (and its strings) only once the deadline has passed.
      if (rc_.limits->expired())
        return rc_.limits->check_time("iteration " + std::to_string(subgraph_runs_) + " of " + step_.node->label());
    }
    return run(*it->second, std::move(inputs), rc_, &frame_);
  }
  const std::string& where() const override { return step_.where; }
  void* device_run_state() const override {
    return rc_.device_states ? (*rc_.device_states)[step_.placement].get() : nullptr;
  }
  bool was_set(int i) const { return set_[i]; }
  void reset_flags() { set_.assign(step_.out.size(), false); }

 private:
  // Output i in its part of a Concat's output (ConcatGroup), allocated here by the first
  // of its producers; a buffer of its own otherwise.
  Result<Tensor> allocate_or_view(int i, DataType dtype, const Shape& shape) {
    if (static_cast<size_t>(i) >= step_.out_view.size() || step_.out_view[i].group < 0)
      return Tensor::allocate(alloc_, dtype, shape);
    const OutputView& v = step_.out_view[i];
    const ConcatGroup& grp = g_.concat_groups[v.group];
    if (dtype != grp.dtype || shape != v.shape) return Tensor::allocate(alloc_, dtype, shape);
    Value& whole = frame_[grp.slot];
    if (!whole.is_tensor()) {
      BH_ASSIGN_OR_RETURN(Tensor t, Tensor::allocate(alloc_, grp.dtype, grp.shape));
      whole = Value(t);
    }
    return Tensor(dtype, shape, whole.tensor.buffer(), whole.tensor.offset() + v.offset);
  }

  const CompiledGraph& g_;
  const Step& step_;
  std::vector<Value>& frame_;
  std::vector<Value>& inputs_;
  const RunContext& rc_;
  Allocator& alloc_;
  std::vector<bool> set_ = std::vector<bool>(step_.out.size(), false);
  int64_t subgraph_runs_ = 0;  // this call's subgraph runs (loop iterations)
};

// Runs the steps of `g` with `rc` as given (run() adds the per-run device states).
Result<std::vector<Value>> run_steps(const CompiledGraph& g, std::vector<Value> inputs, const RunContext& rc,
                                     const std::vector<Value>* outer);

}  // namespace

Result<std::vector<Value>> run(const CompiledGraph& g, std::vector<Value> inputs, const RunContext& rc,
                               const std::vector<Value>* outer) {
  if (inputs.size() > g.input_slots.size())
    return invalid_argument("graph '" + g.graph->name + "' takes " + std::to_string(g.input_slots.size()) +
                            " inputs, got " + std::to_string(inputs.size()));
  const auto& placements = rc.opts->placements;
  // A top-level run allocates through each session allocator's run allocator, where it
  // makes one (the CPU's lifetime-planned arena), and finishes them after everything
  // else of the run has gone, its device states included: only outputs are left.
  std::vector<std::shared_ptr<RunAllocator>> run_allocators;
  struct Finish {
    std::vector<std::shared_ptr<RunAllocator>>& ras;
    bool ok = false;
    ~Finish() {
      for (auto& ra : ras)
        if (ra) ra->finish(ok);
    }
  } finish{run_allocators};
  // A top-level run asks each device for its per-run state (Device::begin_run); the
  // states are destroyed here after run_steps returns, so they outlast every kernel of
  // the run. Devices that make none (the CPU) leave this vector empty: no allocation.
  std::vector<std::shared_ptr<void>> device_states;
  RunContext with_states;
  const RunContext* rcp = &rc;
  if (!outer) {
    for (size_t p = 0; p < placements.size(); ++p)
      if (auto ra = placements[p].allocator->open_run()) {
        run_allocators.resize(placements.size());
        run_allocators[p] = std::move(ra);
      }
    for (size_t p = 0; p < placements.size(); ++p) {
      RunStart start{placements[p].allocator.get(), &g.nodes_per_placement[p], &inputs, g.capturable};
      if (auto st = placements[p].device->begin_run(start)) {
        device_states.resize(placements.size());
        device_states[p] = std::move(st);
      }
    }
    if (!device_states.empty() || !run_allocators.empty()) {
      with_states = rc;
      if (!device_states.empty()) with_states.device_states = &device_states;
      if (!run_allocators.empty()) with_states.run_allocators = &run_allocators;
      rcp = &with_states;
    }
  }
  auto outs = run_steps(g, std::move(inputs), *rcp, outer);
  // The run's last writes complete before its outputs are handed back (and before the
  // per-run states go).
  for (size_t p = 0; p < device_states.size(); ++p)
    if (device_states[p]) {
      Status s = placements[p].device->flush(device_states[p].get());
      if (!s.is_ok() && outs.is_ok()) outs = s;
    }
  // A top-level run hands back outputs the CPU can read: device-local ones are copied to
  // host memory here, while the run still owns its device state (a replayed capture
  // reuses its memory in the next run).
  if (!outer && outs.is_ok()) {
    auto to_host = [&](Tensor& t) -> Status {
      if (t.dtype() == DataType::kString || t.numel() == 0 || t.raw()) return Status::ok();
      Tensor h = Tensor::host(t.dtype(), t.shape());
      BH_RETURN_IF_ERROR(rc.router->copy(t, h));
      t = h;
      return Status::ok();
    };
    for (size_t i = 0; i < outs->size(); ++i) {
      Value& v = (*outs)[i];
      Status s = v.is_tensor() ? to_host(v.tensor) : Status::ok();
      for (auto& t : v.sequence)
        if (s.is_ok()) s = to_host(t);
      if (!s.is_ok()) return s.with_context("graph output " + std::to_string(i) + ": ");
    }
  }
  finish.ok = outs.is_ok();  // finished after device_states go (declared before them)
  return outs;
}

namespace {

Result<std::vector<Value>> run_steps(const CompiledGraph& g, std::vector<Value> inputs, const RunContext& rc,
                                     const std::vector<Value>* outer) {
  std::vector<Value> frame(g.num_slots);
  for (const auto& [s, v] : g.constants) frame[s] = v;
  if (outer)
    for (const auto& [here, there] : g.outer) frame[here] = (*outer)[there];
  for (size_t i = 0; i < inputs.size(); ++i)
    if (!inputs[i].is_none() || inputs[i].is_optional) frame[g.input_slots[i]] = std::move(inputs[i]);

  const auto& placements = rc.opts->placements;
  // Before a value made on a device is copied elsewhere, that device finishes the run's
  // work recorded so far (Device::flush).
  auto flush_domain = [&](const Domain& d) -> Status {
    if (!rc.device_states) return Status::ok();
    for (size_t p = 0; p < placements.size(); ++p)
      if ((*rc.device_states)[p] && placements[p].device->compute_domain() == d)
        return placements[p].device->flush((*rc.device_states)[p].get());
    return Status::ok();
  };
  std::vector<Value> step_inputs;
  for (const Step& st : g.steps) {
    if (rc.limits && rc.limits->expired()) return rc.limits->check_time(st.node->label());
    Allocator& alloc = rc.allocator(st.placement);
    const Domain& dom = placements[st.placement].device->compute_domain();
    step_inputs.assign(st.in.size(), Value());
    for (size_t i = 0; i < st.in.size(); ++i) {
      if (st.in[i] < 0) continue;
      if (i < st.resident.size() && !st.resident[i].is_none()) {
        step_inputs[i] = st.resident[i];
        continue;
      }
      const Value& v = frame[st.in[i]];
      // Inputs in another domain are copied into this step's domain through the router (I2).
      if (v.is_tensor() && v.tensor.dtype() != DataType::kString && v.tensor.domain() != dom) {
        BH_ASSIGN_OR_RETURN(Tensor moved, Tensor::allocate(alloc, v.tensor.dtype(), v.tensor.shape()));
        BH_RETURN_IF_ERROR(flush_domain(v.tensor.domain()).with_context(st.node->label() + ": "));
        BH_RETURN_IF_ERROR(rc.router->copy(v.tensor, moved).with_context(st.node->label() + ": input " + std::to_string(i) + ": "));
        step_inputs[i] = Value(moved);
      } else {
        step_inputs[i] = v;
      }
    }
    StepContext ctx(g, st, frame, step_inputs, rc, alloc);
    auto t0 = rc.profile ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point();
    Status s = st.kernel->compute(ctx);
    if (rc.profile) {
      double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
      std::string shapes = step_inputs.empty() ? "" : step_inputs[0].describe();
      if (!st.out.empty() && st.out[0] >= 0) shapes += " -> " + frame[st.out[0]].describe();
      rc.profile->push_back({st.node, ms, std::move(shapes)});
    }
    if (!s.is_ok()) {
      if (s.message().rfind("node '", 0) != 0) s = s.with_context(st.node->label() + ": ");
      return s;
    }
    for (size_t i = 0; i < st.out.size(); ++i)
      if (st.out[i] >= 0 && !ctx.was_set(static_cast<int>(i)))
        return internal_error(st.node->label() + ": kernel did not produce output " + std::to_string(i));
    for (int r : st.release) frame[r] = Value();
  }
  std::vector<Value> outs;
  outs.reserve(g.output_slots.size());
  for (int s : g.output_slots) outs.push_back(frame[s]);
  return outs;
}

}  // namespace

}  // namespace bulkhead::exec
