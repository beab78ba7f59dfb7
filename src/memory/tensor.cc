#include "bulkhead/tensor.h"

#include <cstring>

#include "common/sizes.h"

namespace bulkhead {

Result<Tensor> Tensor::allocate(Allocator& allocator, DataType dtype, Shape shape) {
  if (dtype == DataType::kString) {
    BH_ASSIGN_OR_RETURN(int64_t n, tensor_numel(dtype, shape));
    if (n > (int64_t{1} << 40)) return Status(StatusCode::kResourceExhausted, "a string tensor of " + std::to_string(n) + " elements is refused");
    Tensor t;
    t.dtype_ = dtype;
    t.strings_ = std::make_shared<std::vector<std::string>>(static_cast<size_t>(n));
    t.shape_ = std::move(shape);
    return t;
  }
  if (dtype_size(dtype) == 0) return unsupported("cannot allocate a tensor of type " + dtype_name(dtype));
  BH_ASSIGN_OR_RETURN(size_t bytes, tensor_nbytes(dtype, shape));
  BH_ASSIGN_OR_RETURN(auto buf, allocator.allocate(bytes));
  return Tensor(dtype, std::move(shape), std::move(buf), 0);
}

Tensor Tensor::host(DataType dtype, Shape shape) {
  auto alloc = HostAllocator::create("user");
  auto r = allocate(*alloc, dtype, std::move(shape));
  if (!r.is_ok()) throw std::bad_alloc();
  return std::move(r).value();
}

Result<Tensor> Tensor::host_copy(DataType dtype, Shape shape, const void* bytes, size_t nbytes) {
  BH_ASSIGN_OR_RETURN(size_t want, tensor_nbytes(dtype, shape));
  if (want != nbytes)
    return invalid_argument("expected " + std::to_string(want) + " bytes for " + dtype_name(dtype) +
                            shape_to_string(shape) + ", got " + std::to_string(nbytes));
  auto alloc = HostAllocator::create("user");
  BH_ASSIGN_OR_RETURN(Tensor t, allocate(*alloc, dtype, std::move(shape)));
  if (nbytes) std::memcpy(t.raw(), bytes, nbytes);
  return t;
}

Domain Tensor::domain() const { return buffer_ ? buffer_->domain() : Domain::host(); }

Tensor Tensor::clone_host() const {
  Tensor t = host(dtype_, shape_);
  if (dtype_ == DataType::kString) {
    for (int64_t i = 0; i < numel(); ++i) t.strings()[i] = strings()[i];
  } else if (nbytes()) {
    std::memcpy(t.raw(), raw(), nbytes());
  }
  return t;
}

std::string Tensor::describe() const { return dtype_name(dtype_) + shape_to_string(shape_); }

std::string Value::describe() const {
  switch (kind) {
    case Kind::kNone: return "none";
    case Kind::kTensor: return tensor.describe();
    case Kind::kSequence: return "sequence<" + dtype_name(sequence_dtype) + ">[" + std::to_string(sequence.size()) + "]";
  }
  return "?";
}

}  // namespace bulkhead
