#include "backends/faulty/faulty_kernel.h"

#include <cstring>
#include <set>

#include "backends/faulty/fault_state.h"
#include "backends/faulty/forwarding_context.h"

namespace bulkhead::faulty {
namespace {

// Operators whose floating-point constant inputs are weights a device would upload.
// Others (Resize scales, Range bounds, Clip limits) stay with the kernel: their values
// decide shapes and loop bounds, and the fault is in weights, not in control.
bool carries_weights(const ir::Node& n) {
  static const std::set<std::string> kOps = {"Conv", "ConvTranspose", "Gemm", "MatMul",
                                             "BatchNormalization", "InstanceNormalization",
                                             "LayerNormalization", "PRelu", "LSTM", "GRU", "RNN"};
  return n.domain.empty() && kOps.count(n.op_type) != 0;
}

struct Weight {
  int input = 0;
  Tensor tensor;  // the session's constant (immutable, shared with the model)
};

class FaultyKernel final : public Kernel {
 public:
  FaultyKernel(Fault fault, const ir::Node& node, std::unique_ptr<Kernel> inner, std::vector<Weight> weights,
               std::vector<bool> constant)
      : fault_(fault), node_(node), inner_(std::move(inner)), weights_(std::move(weights)), constant_(std::move(constant)) {}

  Status compute(KernelContext& ctx) const override {
    auto* run = static_cast<RunState*>(ctx.device_run_state());
    if (run && run->fault != fault_) return internal_error(ctx.where() + "faulty kernel given another device's run state");
    switch (fault_) {
      case Fault::kNone: return inner_->compute(ctx);
      case Fault::kSharedScratch:
      case Fault::kGlobalSlot: return compute_with_device_weights(ctx, run);
      case Fault::kDroppedDependency: return compute_dropped(ctx, run);
      case Fault::kStaleReplay: return compute_captured(ctx, run);
    }
    return internal_error(ctx.where() + "unknown fault");
  }

 private:
  // Weights as the buggy device state holds them.
  Status compute_with_device_weights(KernelContext& ctx, RunState* run) const {
    if (weights_.empty()) return inner_->compute(ctx);
    ForwardingContext fwd(ctx);
    if (!run || !run->session) {  // not part of a run (no device state): the session's own weights
      for (const Weight& w : weights_) fwd.substitute(w.input, Value(w.tensor));
      return inner_->compute(fwd);
    }
    std::vector<Tensor> held(weights_.size());
    for (size_t j = 0; j < weights_.size(); ++j) {
      BH_ASSIGN_OR_RETURN(held[j], ctx.allocate_scratch(weights_[j].tensor.dtype(), weights_[j].tensor.shape()));
    }
    if (fault_ == Fault::kSharedScratch) {
      std::vector<size_t> sizes;
      for (const Weight& w : weights_) sizes.push_back(w.tensor.nbytes());
      SharedScratch& scratch = run->device->scratch;
      auto offsets = run->session->scratch_layout.place(this, sizes, [&](const std::vector<size_t>& at) {
        for (size_t j = 0; j < weights_.size(); ++j) scratch.write(at[j], weights_[j].tensor.raw(), sizes[j]);
      });
      for (size_t j = 0; j < weights_.size(); ++j) scratch.read(offsets[j], held[j].raw(), sizes[j]);
    } else {
      std::vector<Tensor> own;
      for (const Weight& w : weights_) own.push_back(w.tensor);
      size_t first = run->session->weights->upload(this, own);  // correctly per session...
      auto current = run->device->slot.current();                // ...but read through the slot
      for (size_t j = 0; j < weights_.size(); ++j) {
        if (current) current->read(first + j, held[j].raw(), held[j].nbytes());
        else std::memset(held[j].raw(), 0, held[j].nbytes());
      }
    }
    for (size_t j = 0; j < weights_.size(); ++j) fwd.substitute(weights_[j].input, Value(held[j]));
    return inner_->compute(fwd);
  }

  Status compute_dropped(KernelContext& ctx, RunState* run) const {
    if (!run) return inner_->compute(ctx);
    const bool producer = &node_ == run->dropped.producer;
    const bool consumer = &node_ == run->dropped.consumer;
    if (!producer && !consumer) return inner_->compute(ctx);
    ForwardingContext fwd(ctx);
    fwd.keep_outputs();
    Status s = inner_->compute(fwd);
    if (!s.is_ok()) return s;
    for (int i = 0; i < ctx.num_outputs(); ++i) {
      const Value* v = fwd.kept_output(i);
      if (!v || !ctx.output_wanted(i)) continue;
      const Tensor& t = v->tensor;
      bool bytes = v->is_tensor() && t.dtype() != DataType::kString && t.nbytes() > 0 && t.raw();
      if (producer && bytes) {
        // The barrier is missing: the consumer will see this buffer before the write lands.
        BH_ASSIGN_OR_RETURN(Tensor dst, ctx.allocate_output(i, t.dtype(), t.shape()));
        run->pending.hold(dst, t);
      } else if (consumer && bytes && run->pending.holds(t.buffer().get())) {
        // A view of the buffer the write will land in: keep what the consumer saw.
        BH_ASSIGN_OR_RETURN(Tensor dst, ctx.allocate_output(i, t.dtype(), t.shape()));
        std::memcpy(dst.raw(), t.raw(), t.nbytes());
      } else {
        BH_RETURN_IF_ERROR(ctx.set_output(i, *v));
      }
    }
    if (consumer) run->pending.land();
    return Status::ok();
  }

  Status compute_captured(KernelContext& ctx, RunState* run) const {
    if (!run || !run->capture) return inner_->compute(ctx);
    ForwardingContext fwd(ctx);
    BH_RETURN_IF_ERROR(run->capture->apply(node_, constant_, fwd));
    return inner_->compute(fwd);
  }

  Fault fault_;
  const ir::Node& node_;  // the session's graph, which outlives its kernels
  std::unique_ptr<Kernel> inner_;
  std::vector<Weight> weights_;
  std::vector<bool> constant_;  // per input: constant for the session
};

Result<std::unique_ptr<Kernel>> make_faulty_kernel(const KernelFactory& cpu_factory, const KernelInfo& info, Fault fault) {
  KernelInfo inner{info.node, info.input_types, info.constant_inputs, info.threads, info.graph};
  std::vector<Weight> weights;
  std::vector<bool> constant;
  for (size_t i = 0; i < info.node.inputs.size(); ++i) constant.push_back(info.input_is_constant(i));
  if ((fault == Fault::kSharedScratch || fault == Fault::kGlobalSlot) && carries_weights(info.node)) {
    for (size_t i = 0; i < inner.constant_inputs.size(); ++i) {
      const Tensor& t = inner.constant_inputs[i];
      if (!t.defined() || !dtype_is_float(t.dtype()) || t.nbytes() == 0 || !t.raw()) continue;
      weights.push_back({static_cast<int>(i), t});
      inner.constant_inputs[i] = Tensor();  // the kernel gets its weights from the device at each call
    }
  }
  BH_ASSIGN_OR_RETURN(auto kernel, cpu_factory(inner));
  return std::unique_ptr<Kernel>(
      std::make_unique<FaultyKernel>(fault, info.node, std::move(kernel), std::move(weights), std::move(constant)));
}

}  // namespace

KernelTable wrap_kernels(std::shared_ptr<Device> cpu, Fault fault) {
  KernelTable table;
  for (const std::string& key : cpu->kernels().op_names()) {
    auto sep = key.find("::");
    std::string domain = sep == std::string::npos ? "" : key.substr(0, sep);
    std::string op = sep == std::string::npos ? key : key.substr(sep + 2);
    // One factory per operator; the CPU table picks the version for the node's opset.
    table.add(op, 1, [cpu, fault, domain, op](const KernelInfo& info) -> Result<std::unique_ptr<Kernel>> {
      const KernelFactory* f = cpu->kernels().find(domain, op, info.node.opset);
      if (!f) return unsupported(info.where() + "the CPU backend has no kernel for " + op);
      return make_faulty_kernel(*f, info, fault);
    }, domain);
  }
  return table;
}

}  // namespace bulkhead::faulty
