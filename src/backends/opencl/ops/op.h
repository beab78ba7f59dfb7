// What the operators' kernels are written with: the node a kernel is made for (Node), the
// tensors and host callbacks of one call (Call), the interface (Op) and shape helpers.
//
// An Op is made by create_kernel from a node — it decides there, from the node's
// attributes and its inputs' types, ranks and constant values, whether it can run the
// node, and refuses with BH_UNSUPPORTED and the reason otherwise (the host then places
// the node elsewhere). An Op is immutable afterwards: compute may run on many threads at
// once, each with its own Call. Shape errors found in compute are BH_INVALID_ARGUMENT
// naming the node and the shapes.
#pragma once

#include <CL/cl.h>

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include "bulkhead/backend_plugin.h"
#include "kernels/args.h"
#include "status.h"
#include "stream.h"

namespace bulkhead::opencl {

class Device;
using Dims = std::vector<int64_t>;

// Bytes per element of `dtype`; 0 for strings and unknown types.
size_t dtype_size(int32_t dtype);
const char* dtype_name(int32_t dtype);
int64_t numel(const Dims& dims);
std::string dims_text(const Dims& dims);  // "[1,3,224,224]"
// `axis` in [-rank, rank) made non-negative.
Result<int> normalize_axis(int64_t axis, int rank, const std::string& where);
// Row-major element strides of `dims`.
Dims strides_of(const Dims& dims);

// A tensor of one call: a view of one of the plugin's buffers.
struct Tensor {
  int32_t dtype = BH_TYPE_UNDEFINED;
  Dims dims;
  cl_mem mem = nullptr;  // null only when empty
  uint64_t offset = 0;   // bytes

  int rank() const { return static_cast<int>(dims.size()); }
  int64_t numel() const { return opencl::numel(dims); }
  uint64_t nbytes() const { return static_cast<uint64_t>(numel()) * dtype_size(dtype); }
  Buf buf() const { return {mem, offset / dtype_size(dtype)}; }
  std::string describe() const { return std::string(dtype_name(dtype)) + dims_text(dims); }
};

// The node create_kernel was given (borrowed for that call only: an Op copies what it keeps).
class Node {
 public:
  explicit Node(const BhpNode& n);

  const std::string& where() const { return where_; }  // "node 'conv1' (Conv): "
  std::string op_type() const { return n_.op_type ? n_.op_type : ""; }
  int opset() const { return n_.opset; }

  // The node's arrays, stepped by their elements' struct_size (BHP_AT).
  const BhpValueInfo& in(size_t i) const { return *BHP_AT(BhpValueInfo, n_.inputs, i); }
  const BhpValueInfo& out(size_t i) const { return *BHP_AT(BhpValueInfo, n_.outputs, i); }
  bool has_input(size_t i) const { return i < n_.num_inputs && in(i).present; }
  size_t num_inputs() const { return n_.num_inputs; }
  const BhpValueInfo& input(size_t i) const { return in(i); }
  int32_t input_type(size_t i) const { return has_input(i) ? in(i).dtype : BH_TYPE_UNDEFINED; }
  // Whether input i has a value fixed for the session (an empty one counts, bytes or not).
  bool is_constant(size_t i) const { return has_input(i) && (in(i).constant_data || known_empty(i)); }
  bool has_output(size_t i) const { return i < n_.num_outputs && out(i).present; }
  // Refuses unless every listed input (every input when `which` is empty) that is present
  // has a type in `allowed`.
  Status require_types(std::initializer_list<int32_t> allowed, std::initializer_list<size_t> which = {}) const;
  // Refuses when an output past the first is wanted.
  Status require_one_output(const char* what) const;

  // A constant input's values: int64/int32 as int64, float32 as float; refuses when the
  // input is not a constant of such a type.
  Result<Dims> constant_ints(size_t i, const char* what) const;
  Result<std::vector<float>> constant_floats(size_t i, const char* what) const;

  // Attributes; a missing one (or one of another type) reads as `fallback`.
  bool has_attr(const char* name) const { return attr(name, BHP_ATTR_UNDEFINED) != nullptr; }
  int64_t attr_int(const char* name, int64_t fallback) const;
  float attr_float(const char* name, float fallback) const;
  std::string attr_string(const char* name, const std::string& fallback) const;
  Dims attr_ints(const char* name) const;
  std::vector<float> attr_floats(const char* name) const;
  std::vector<std::string> attr_strings(const char* name) const;

 private:
  const BhpAttribute* attr(const char* name, int32_t type) const;  // any type for UNDEFINED
  bool known_empty(size_t i) const;                                // a shape known to hold no elements

  const BhpNode& n_;
  std::string where_;
};

// One call of a kernel: its inputs, the host's callbacks and the stream to enqueue on.
class Call {
 public:
  Call(const std::string& where, const BhpKernelCall& call, Stream& stream, const Device& device)
      : where_(where), call_(call), stream_(stream), device_(device) {}
  // Reads the inputs; an error for one that is misaligned or overruns its buffer.
  Status init();

  const std::string& where() const { return where_; }
  Stream& stream() { return stream_; }
  size_t num_inputs() const { return inputs_.size(); }
  // Input i, or null when omitted.
  const Tensor* input(size_t i) const { return i < inputs_.size() && inputs_[i].dtype ? &inputs_[i] : nullptr; }
  Result<Tensor> output(uint32_t index, int32_t dtype, const Dims& dims);
  // Output `index` is input `input` viewed with `dims` (a view: no work).
  Status alias(uint32_t index, uint32_t input, const Dims& dims);
  // Device memory for `count` elements of `dtype`, for this call's work only.
  Result<Tensor> scratch(int32_t dtype, int64_t count);
  // Refuses tensors whose elements do not fit the kernels' int indices.
  Status check_size(std::initializer_list<const Tensor*> tensors) const;

 private:
  Result<Tensor> tensor_of(const BhpTensor& t, const std::string& what) const;

  const std::string& where_;
  const BhpKernelCall& call_;
  Stream& stream_;
  const Device& device_;
  std::vector<Tensor> inputs_;
};

class Op {
 public:
  virtual ~Op() = default;
  virtual Status compute(Call& call) const = 0;
};
using OpPtr = std::unique_ptr<Op>;

// An Op computing with `f(Call&)`; f's captures are the op's immutable state.
template <class F>
OpPtr make_op(F f) {
  struct Fn final : Op {
    explicit Fn(F g) : f(std::move(g)) {}
    Status compute(Call& call) const override { return f(call); }
    F f;
  };
  return std::make_unique<Fn>(std::move(f));
}

// Drops dimensions of size 1 and merges neighbours that every stride list in `strides`
// steps through contiguously (stride[d - 1] == stride[d] * dims[d]), in place: fewer
// dimensions for the kernels to unpack, and boxes above rank 8 that still fit.
void simplify(Dims& dims, std::initializer_list<Dims*> strides);

// The element types the layout kernels move (any fixed-size type) and the float type.
inline constexpr std::initializer_list<int32_t> kAnyFixed = {
    BH_TYPE_FLOAT32, BH_TYPE_UINT8,   BH_TYPE_INT8,    BH_TYPE_UINT16, BH_TYPE_INT16,  BH_TYPE_INT32,   BH_TYPE_INT64,
    BH_TYPE_BOOL,    BH_TYPE_FLOAT16, BH_TYPE_FLOAT64, BH_TYPE_UINT32, BH_TYPE_UINT64, BH_TYPE_BFLOAT16};
inline constexpr std::initializer_list<int32_t> kFloat = {BH_TYPE_FLOAT32};

}  // namespace bulkhead::opencl
