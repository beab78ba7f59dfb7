#include "backends/faulty/forwarding_context.h"

namespace bulkhead::faulty {

void ForwardingContext::substitute(int i, Value value) {
  if (i < 0) return;
  if (substitutes_.size() <= static_cast<size_t>(i)) substitutes_.resize(i + 1);
  substitutes_[i] = std::move(value);
}

const Value* ForwardingContext::input_value(int i) const {
  if (i >= 0 && static_cast<size_t>(i) < substitutes_.size() && substitutes_[i]) return &*substitutes_[i];
  return outer_.input_value(i);
}

const Value* ForwardingContext::kept_output(int i) const {
  if (i < 0 || static_cast<size_t>(i) >= kept_.size() || !kept_[i]) return nullptr;
  return &*kept_[i];
}

Result<Tensor> ForwardingContext::allocate_output(int i, DataType dtype, const Shape& shape) {
  if (!keep_) return outer_.allocate_output(i, dtype, shape);
  if (i < 0 || i >= num_outputs()) return internal_error(where() + "output index " + std::to_string(i) + " out of range");
  BH_ASSIGN_OR_RETURN(Tensor t, outer_.allocate_scratch(dtype, shape));
  if (kept_.size() <= static_cast<size_t>(i)) kept_.resize(i + 1);
  kept_[i] = Value(t);
  return t;
}

Status ForwardingContext::set_output(int i, Value value) {
  if (!keep_) return outer_.set_output(i, std::move(value));
  if (i < 0 || i >= num_outputs()) return internal_error(where() + "output index " + std::to_string(i) + " out of range");
  if (kept_.size() <= static_cast<size_t>(i)) kept_.resize(i + 1);
  kept_[i] = std::move(value);
  return Status::ok();
}

}  // namespace bulkhead::faulty
