// Tensor: a typed, shaped view of a Buffer (or, for strings, of a host string array).
// Copying a Tensor copies the view, not the bytes. Thread-compatible.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "bulkhead/dtype.h"
#include "bulkhead/memory.h"
#include "bulkhead/status.h"

namespace bulkhead {

class Tensor {
 public:
  Tensor() = default;

  // A new tensor from `allocator` (uninitialised bytes). Strings are host-only and
  // ignore the allocator.
  static Result<Tensor> allocate(Allocator& allocator, DataType dtype, Shape shape);
  // A new host tensor in plain process memory, owned by a private HostAllocator.
  static Tensor host(DataType dtype, Shape shape);
  // A new host tensor holding a copy of `bytes` (nbytes must match).
  static Result<Tensor> host_copy(DataType dtype, Shape shape, const void* bytes, size_t nbytes);
  template <typename T>
  static Tensor from_vector(DataType dtype, Shape shape, const std::vector<T>& v) {
    Tensor t = host(dtype, std::move(shape));
    std::copy(v.begin(), v.end(), t.data<T>());
    return t;
  }
  // A view of `buffer` starting at `offset` bytes.
  Tensor(DataType dtype, Shape shape, std::shared_ptr<Buffer> buffer, size_t offset = 0)
      : dtype_(dtype), shape_(std::move(shape)), buffer_(std::move(buffer)), offset_(offset) {}

  bool defined() const { return dtype_ != DataType::kUndefined; }
  DataType dtype() const { return dtype_; }
  const Shape& shape() const { return shape_; }
  int rank() const { return static_cast<int>(shape_.size()); }
  int64_t dim(int i) const { return shape_[i < 0 ? i + rank() : i]; }
  int64_t numel() const { return shape_numel(shape_); }
  size_t nbytes() const { return static_cast<size_t>(numel()) * dtype_size(dtype_); }
  const std::shared_ptr<Buffer>& buffer() const { return buffer_; }
  size_t offset() const { return offset_; }
  // The domain of the underlying buffer; host for string tensors.
  Domain domain() const;
  bool on_host() const { return domain().kind != MemoryKind::kDeviceLocal; }

  // CPU pointer to the first element (host / host-visible memory only).
  void* raw() const {
    return buffer_ && buffer_->data() ? static_cast<char*>(buffer_->data()) + offset_ : nullptr;
  }
  template <typename T>
  T* data() const { return static_cast<T*>(raw()); }

  // String tensors: the element array (host only).
  std::string* strings() const { return strings_ ? strings_->data() + offset_ : nullptr; }

  // The same bytes seen with another shape of equal element count.
  Tensor reshaped(Shape shape) const {
    Tensor t = *this;
    t.shape_ = std::move(shape);
    return t;
  }
  // A deep copy into fresh host memory (host or host-visible sources only).
  Tensor clone_host() const;

  std::string describe() const;  // "float32[1,3,224,224]"

 private:
  DataType dtype_ = DataType::kUndefined;
  Shape shape_;
  std::shared_ptr<Buffer> buffer_;
  size_t offset_ = 0;  // bytes for numeric tensors, elements for strings
  std::shared_ptr<std::vector<std::string>> strings_;
};

// A value flowing through a graph: a tensor, a sequence of tensors, or an empty optional.
struct Value {
  enum class Kind { kNone, kTensor, kSequence };
  Kind kind = Kind::kNone;
  Tensor tensor;
  std::vector<Tensor> sequence;
  DataType sequence_dtype = DataType::kUndefined;  // element type of an (empty) sequence
  bool is_optional = false;                        // declared as an optional value

  Value() = default;
  Value(Tensor t) : kind(Kind::kTensor), tensor(std::move(t)) {}  // NOLINT
  static Value make_sequence(std::vector<Tensor> items, DataType elem) {
    Value v;
    v.kind = Kind::kSequence;
    v.sequence = std::move(items);
    v.sequence_dtype = elem;
    return v;
  }
  static Value none() { return Value(); }
  bool is_tensor() const { return kind == Kind::kTensor; }
  bool is_sequence() const { return kind == Kind::kSequence; }
  bool is_none() const { return kind == Kind::kNone; }
  std::string describe() const;
};

}  // namespace bulkhead
