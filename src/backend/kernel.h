// The kernel interface every backend implements for the nodes it runs.
//
// A Kernel is built once per node when a Session is created (it may pre-pack weights
// from constant inputs) and is then immutable: compute() is const and is called from
// many threads at once, each call with its own KernelContext. Per-run state lives in
// the context, never in the kernel.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "bulkhead/status.h"
#include "backend/shared_constants.h"
#include "bulkhead/tensor.h"
#include "ir/graph.h"

namespace bulkhead {

// What a kernel factory knows about its node when the session is built.
struct KernelInfo {
  const ir::Node& node;
  // Element types of the inputs where known (kUndefined when not), one per node input.
  std::vector<DataType> input_types;
  // Inputs that are constant for the session (initializers or folded constants), by
  // input index; empty tensors for the others. Kernels may pre-pack from these.
  std::vector<Tensor> constant_inputs;
  // Threads a kernel may use (the session's intra-op thread count, >= 1).
  int threads = 1;
  // The graph the node belongs to, for the declared and inferred types and shapes of its
  // values (Graph::info); nullptr where unknown.
  const ir::Graph* graph = nullptr;
  // Where things a kernel makes from its constant inputs (packed weights) are shared with
  // the Env's other sessions (shared_constants.h); null when the session shares nothing
  // (SessionOptions::share_weights = false). A kernel that packs lazily keeps this.
  std::shared_ptr<SharedConstants> shared;

  bool input_is_constant(size_t i) const { return i < constant_inputs.size() && constant_inputs[i].defined(); }
  // The shape input `i` has on every run, where the graph fixes it before any run (every
  // dim known: ir/infer.h); nullopt otherwise. For kernels that build what a run needs
  // at session creation.
  std::optional<Shape> static_input_shape(size_t i) const {
    if (!graph || i >= node.inputs.size() || node.inputs[i].empty()) return std::nullopt;
    const ir::ValueInfo* vi = graph->info(node.inputs[i]);
    if (!vi || vi->type != ir::ValueType::kTensor || !vi->shape) return std::nullopt;
    Shape s;
    for (const ir::Dim& d : *vi->shape) {
      if (!d.fixed()) return std::nullopt;
      s.push_back(d.value);
    }
    return s;
  }
  // Input `i`'s element type where the graph says (kUndefined otherwise).
  DataType graph_input_type(size_t i) const {
    const ir::ValueInfo* vi = graph && i < node.inputs.size() && !node.inputs[i].empty() ? graph->info(node.inputs[i]) : nullptr;
    return vi ? vi->dtype : DataType::kUndefined;
  }
  // "node 'conv_3' (Conv): " — the prefix for every error a kernel reports.
  std::string where() const { return node.label() + ": "; }
};

// Per-call view of a node's inputs and outputs. Not thread-safe: one per call.
class KernelContext {
 public:
  virtual ~KernelContext() = default;

  virtual int num_inputs() const = 0;
  // The value at input `i`; nullptr when the input is omitted or `i` is out of range.
  virtual const Value* input_value(int i) const = 0;
  // The tensor at input `i`; nullptr when omitted or not a tensor.
  const Tensor* input(int i) const {
    const Value* v = input_value(i);
    return v && v->is_tensor() ? &v->tensor : nullptr;
  }
  bool has_input(int i) const { return input_value(i) != nullptr && !input_value(i)->is_none(); }

  virtual int num_outputs() const = 0;
  // False when the model does not use output `i` (empty name or beyond the node's outputs).
  virtual bool output_wanted(int i) const = 0;
  // Allocates output `i` in the kernel's memory domain and returns it for writing.
  virtual Result<Tensor> allocate_output(int i, DataType dtype, const Shape& shape) = 0;
  // Sets output `i` to an existing value (a view of an input, a sequence, an optional).
  virtual Status set_output(int i, Value value) = 0;
  // Temporary memory for this call only, in the kernel's domain.
  virtual Result<Tensor> allocate_scratch(DataType dtype, const Shape& shape) = 0;
  // Output `o` written in place over input `i`: input i's tensor, now also output o,
  // when this call is the last reader of input i, nothing else holds its memory and it
  // has `dtype` and `shape`; an undefined tensor otherwise (then allocate_output). The
  // kernel must read each element of input i before it writes that element.
  virtual Result<Tensor> reuse_input_as_output(int i, int o, DataType dtype, const Shape& shape) { return Tensor(); }

  // Intra-op threads this call may use.
  virtual int threads() const = 0;

  // Runs the subgraph held in attribute `attr` of this node with `inputs` bound to the
  // subgraph's inputs in order; values it reads from enclosing graphs are resolved by the
  // executor. Returns the subgraph's outputs in order.
  virtual Result<std::vector<Value>> run_subgraph(const std::string& attr, std::vector<Value> inputs) = 0;

  // For errors: "node 'x' (Op): ".
  virtual const std::string& where() const = 0;

  // The state this kernel's device made for the current run (Device::begin_run), or
  // nullptr when it made none or the call is not part of a run (constant folding).
  virtual void* device_run_state() const { return nullptr; }
};

class Kernel {
 public:
  virtual ~Kernel() = default;
  virtual Status compute(KernelContext& ctx) const = 0;
};

// Builds a kernel for a node, or says why it cannot (kUnsupported with the reason).
using KernelFactory = std::function<Result<std::unique_ptr<Kernel>>(const KernelInfo&)>;

// Kernel factories of one backend, keyed by (domain, op type) and by the first opset
// version each factory handles. Built once when the backend is created; read-only after.
class KernelTable {
 public:
  // Registers `factory` for `op_type` in `domain` from opset `since_version` onward
  // (until the next registration of the same op with a larger since_version).
  void add(const std::string& op_type, int since_version, KernelFactory factory, const std::string& domain = "");
  // The factory for a node at its opset, or nullptr.
  const KernelFactory* find(const std::string& domain, const std::string& op_type, int opset) const;
  bool has_op(const std::string& domain, const std::string& op_type) const;
  std::vector<std::string> op_names() const;
  // Replaces every registered factory `f` (each domain, op type and version) by
  // wrap(op_type, f): for a backend to put the same policy around many kernels. Call while
  // building the table, before it is shared.
  void wrap_all(const std::function<KernelFactory(const std::string& op_type, KernelFactory)>& wrap);

 private:
  // key: domain + "::" + op_type ; value: since_version -> factory
  std::map<std::string, std::map<int, KernelFactory>> table_;
};

// Convenience: a kernel from a lambda.
class LambdaKernel final : public Kernel {
 public:
  using Fn = std::function<Status(KernelContext&)>;
  explicit LambdaKernel(Fn fn) : fn_(std::move(fn)) {}
  Status compute(KernelContext& ctx) const override { return fn_(ctx); }

 private:
  Fn fn_;
};

template <typename Fn>
std::unique_ptr<Kernel> make_kernel(Fn fn) {
  return std::make_unique<LambdaKernel>(LambdaKernel::Fn(std::move(fn)));
}

}  // namespace bulkhead
