// ForwardingContext: a KernelContext that passes every call through to the executor's
// context, except that chosen inputs read other values (the faulty device's weights,
// replayed buffers) and, when asked, outputs are kept here instead of being handed on
// (so the faulty kernel decides when and where a result lands).
//
// Owned by one kernel call on the run's thread; borrows the outer context.
#pragma once

#include <optional>
#include <vector>

#include "backend/kernel.h"

namespace bulkhead::faulty {

class ForwardingContext final : public KernelContext {
 public:
  explicit ForwardingContext(KernelContext& outer) : outer_(outer) {}

  // Input `i` reads `value` instead of what the executor bound.
  void substitute(int i, Value value);
  // From now on outputs are kept here (in the outer context's scratch memory); read them
  // with kept_output() and hand them on yourself.
  void keep_outputs() { keep_ = true; }
  // The value the kernel produced for output `i` while outputs were kept; nullptr if none.
  const Value* kept_output(int i) const;

  int num_inputs() const override { return outer_.num_inputs(); }
  const Value* input_value(int i) const override;
  int num_outputs() const override { return outer_.num_outputs(); }
  bool output_wanted(int i) const override { return outer_.output_wanted(i); }
  Result<Tensor> allocate_output(int i, DataType dtype, const Shape& shape) override;
  Status set_output(int i, Value value) override;
  Result<Tensor> allocate_scratch(DataType dtype, const Shape& shape) override {
    return outer_.allocate_scratch(dtype, shape);
  }
  int threads() const override { return outer_.threads(); }
  Result<std::vector<Value>> run_subgraph(const std::string& attr, std::vector<Value> inputs) override {
    return outer_.run_subgraph(attr, std::move(inputs));
  }
  const std::string& where() const override { return outer_.where(); }
  void* device_run_state() const override { return outer_.device_run_state(); }

 private:
  KernelContext& outer_;
  std::vector<std::optional<Value>> substitutes_;
  bool keep_ = false;
  std::vector<std::optional<Value>> kept_;
};

}  // namespace bulkhead::faulty
