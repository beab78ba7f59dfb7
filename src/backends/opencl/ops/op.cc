#include "ops/op.h"

#include <algorithm>
#include <cstring>
#include <limits>

#include "device.h"

namespace bulkhead::opencl {

size_t dtype_size(int32_t dtype) {
  switch (dtype) {
    case BH_TYPE_UINT8:
    case BH_TYPE_INT8:
    case BH_TYPE_BOOL:
      return 1;
    case BH_TYPE_UINT16:
    case BH_TYPE_INT16:
    case BH_TYPE_FLOAT16:
    case BH_TYPE_BFLOAT16:
      return 2;
    case BH_TYPE_FLOAT32:
    case BH_TYPE_INT32:
    case BH_TYPE_UINT32:
      return 4;
    case BH_TYPE_INT64:
    case BH_TYPE_FLOAT64:
    case BH_TYPE_UINT64:
      return 8;
    default:
      return 0;
  }
}

const char* dtype_name(int32_t dtype) {
  switch (dtype) {
    case BH_TYPE_FLOAT32:
      return "float32";
    case BH_TYPE_UINT8:
      return "uint8";
    case BH_TYPE_INT8:
      return "int8";
    case BH_TYPE_UINT16:
      return "uint16";
    case BH_TYPE_INT16:
      return "int16";
    case BH_TYPE_INT32:
      return "int32";
    case BH_TYPE_INT64:
      return "int64";
    case BH_TYPE_STRING:
      return "string";
    case BH_TYPE_BOOL:
      return "bool";
    case BH_TYPE_FLOAT16:
      return "float16";
    case BH_TYPE_FLOAT64:
      return "float64";
    case BH_TYPE_UINT32:
      return "uint32";
    case BH_TYPE_UINT64:
      return "uint64";
    case BH_TYPE_BFLOAT16:
      return "bfloat16";
    default:
      return "undefined";
  }
}

int64_t numel(const Dims& dims) {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}

std::string dims_text(const Dims& dims) {
  std::string s = "[";
  for (size_t i = 0; i < dims.size(); ++i) s += (i ? "," : "") + std::to_string(dims[i]);
  return s + "]";
}

Result<int> normalize_axis(int64_t axis, int rank, const std::string& where) {
  if (axis < -rank || axis >= rank)
    return invalid_argument(where + "axis " + std::to_string(axis) + " is out of range for rank " +
                            std::to_string(rank));
  return static_cast<int>(axis < 0 ? axis + rank : axis);
}

Dims strides_of(const Dims& dims) {
  Dims s(dims.size(), 1);
  for (int d = static_cast<int>(dims.size()) - 2; d >= 0; --d) s[d] = s[d + 1] * dims[d + 1];
  return s;
}

// ---------------------------------------------------------------------------------------
// Node

Node::Node(const BhpNode& n) : n_(n) {
  where_ = std::string("node '") + (n.name ? n.name : "") + "' (" +
           (n.domain && *n.domain ? std::string(n.domain) + "." : "") + (n.op_type ? n.op_type : "") + "): ";
}

Status Node::require_types(std::initializer_list<int32_t> allowed, std::initializer_list<size_t> which) const {
  std::vector<size_t> inputs(which);
  if (inputs.empty())
    for (size_t i = 0; i < n_.num_inputs; ++i) inputs.push_back(i);
  for (size_t i : inputs) {
    if (!has_input(i)) continue;
    const int32_t t = in(i).dtype;
    if (std::find(allowed.begin(), allowed.end(), t) == allowed.end())
      return unsupported(where_ + "the OpenCL kernel does not take input " + std::to_string(i) + " of type " +
                         dtype_name(t));
  }
  return Status::ok();
}

Status Node::require_one_output(const char* what) const {
  for (size_t i = 1; i < n_.num_outputs; ++i)
    if (out(i).present) return unsupported(where_ + "the OpenCL kernel does not output " + what);
  return Status::ok();
}

bool Node::known_empty(size_t i) const {
  const BhpValueInfo& v = in(i);
  if (v.rank < 0 || !v.dims) return false;
  bool empty = false;
  for (int32_t d = 0; d < v.rank; ++d) {
    if (v.dims[d] < 0) return false;
    empty = empty || v.dims[d] == 0;
  }
  return empty;
}

Result<Dims> Node::constant_ints(size_t i, const char* what) const {
  if (!is_constant(i)) return unsupported(where_ + "the OpenCL kernel takes " + what + " only as a constant");
  const BhpValueInfo& v = in(i);
  const size_t size = dtype_size(v.dtype);
  if (v.dtype != BH_TYPE_INT64 && v.dtype != BH_TYPE_INT32)
    return unsupported(where_ + what + " must be int64 or int32, got " + dtype_name(v.dtype));
  Dims out(v.constant_size / size);
  for (size_t k = 0; k < out.size(); ++k) {
    if (v.dtype == BH_TYPE_INT64) {
      std::memcpy(&out[k], static_cast<const char*>(v.constant_data) + 8 * k, 8);
    } else {
      int32_t x;
      std::memcpy(&x, static_cast<const char*>(v.constant_data) + 4 * k, 4);
      out[k] = x;
    }
  }
  return out;
}

Result<std::vector<float>> Node::constant_floats(size_t i, const char* what) const {
  if (!is_constant(i)) return unsupported(where_ + "the OpenCL kernel takes " + what + " only as a constant");
  const BhpValueInfo& v = in(i);
  if (v.dtype != BH_TYPE_FLOAT32) return unsupported(where_ + what + " must be float32, got " + dtype_name(v.dtype));
  std::vector<float> out(v.constant_size / 4);
  if (!out.empty()) std::memcpy(out.data(), v.constant_data, out.size() * 4);
  return out;
}

const BhpAttribute* Node::attr(const char* name, int32_t type) const {
  for (uint32_t i = 0; i < n_.num_attributes; ++i) {
    const BhpAttribute& a = *BHP_AT(BhpAttribute, n_.attributes, i);
    if (a.name && std::strcmp(a.name, name) == 0) return type == BHP_ATTR_UNDEFINED || a.type == type ? &a : nullptr;
  }
  return nullptr;
}

int64_t Node::attr_int(const char* name, int64_t fallback) const {
  const BhpAttribute* a = attr(name, BHP_ATTR_INT);
  return a ? a->i : fallback;
}

float Node::attr_float(const char* name, float fallback) const {
  const BhpAttribute* a = attr(name, BHP_ATTR_FLOAT);
  return a ? a->f : fallback;
}

std::string Node::attr_string(const char* name, const std::string& fallback) const {
  const BhpAttribute* a = attr(name, BHP_ATTR_STRING);
  return a && a->s ? std::string(a->s, a->s_size) : fallback;
}

Dims Node::attr_ints(const char* name) const {
  const BhpAttribute* a = attr(name, BHP_ATTR_INTS);
  return a && a->ints ? Dims(a->ints, a->ints + a->count) : Dims{};
}

std::vector<float> Node::attr_floats(const char* name) const {
  const BhpAttribute* a = attr(name, BHP_ATTR_FLOATS);
  return a && a->floats ? std::vector<float>(a->floats, a->floats + a->count) : std::vector<float>{};
}

std::vector<std::string> Node::attr_strings(const char* name) const {
  const BhpAttribute* a = attr(name, BHP_ATTR_STRINGS);
  std::vector<std::string> out;
  for (uint64_t i = 0; a && a->strings && i < a->count; ++i) out.emplace_back(a->strings[i] ? a->strings[i] : "");
  return out;
}

// ---------------------------------------------------------------------------------------
// Call

Result<Tensor> Call::tensor_of(const BhpTensor& t, const std::string& what) const {
  Tensor r;
  r.dtype = t.dtype;
  r.dims.assign(t.dims, t.dims + t.rank);
  r.mem = static_cast<cl_mem>(t.handle);
  r.offset = t.offset;
  const size_t size = dtype_size(t.dtype);
  if (size == 0)
    return unsupported(where_ + what + " has type " + dtype_name(t.dtype) + ", which the OpenCL kernels do not take");
  for (int64_t d : r.dims)
    if (d < 0) return invalid_argument(where_ + what + " has a negative dimension: " + dims_text(r.dims));
  if (r.numel() == 0) return r;
  if (!r.mem) return invalid_argument(where_ + what + " " + r.describe() + " has no buffer");
  if (r.offset % size != 0)
    return invalid_argument(where_ + what + " starts at byte " + std::to_string(r.offset) + ", not a multiple of its " +
                            std::to_string(size) + "-byte elements");
  const uint64_t cap = device_.size_of(r.mem);
  if (r.offset > cap || r.nbytes() > cap - r.offset)
    return invalid_argument(where_ + what + " " + r.describe() + " at byte " + std::to_string(r.offset) +
                            " overruns its buffer of " + std::to_string(cap) + " bytes");
  return r;
}

Status Call::init() {
  inputs_.resize(call_.num_inputs);
  for (uint32_t i = 0; i < call_.num_inputs; ++i) {
    if ((*BHP_AT(BhpTensor, call_.inputs, i)).dtype == BH_TYPE_UNDEFINED) continue;
    OCL_ASSIGN(inputs_[i], tensor_of((*BHP_AT(BhpTensor, call_.inputs, i)), "input " + std::to_string(i)));
  }
  return Status::ok();
}

Result<Tensor> Call::output(uint32_t index, int32_t dtype, const Dims& dims) {
  if (index >= call_.num_outputs)
    return internal_error(where_ + "output " + std::to_string(index) + " does not exist (the node has " +
                          std::to_string(call_.num_outputs) + ")");
  BhpTensor t{};
  t.struct_size = sizeof t;
  if (BhpStatus* s =
          call_.allocate_output(call_.context, index, dtype, static_cast<uint32_t>(dims.size()), dims.data(), &t))
    return Status::from_host(s);
  return tensor_of(t, "output " + std::to_string(index));
}

Status Call::alias(uint32_t index, uint32_t input, const Dims& dims) {
  if (BhpStatus* s = call_.alias_output(call_.context, index, input, static_cast<uint32_t>(dims.size()), dims.data()))
    return Status::from_host(s);
  return Status::ok();
}

Result<Tensor> Call::scratch(int32_t dtype, int64_t count) {
  BhpTensor t{};
  t.struct_size = sizeof t;
  const uint64_t bytes = static_cast<uint64_t>(count) * dtype_size(dtype);
  if (BhpStatus* s = call_.allocate_scratch(call_.context, bytes, &t)) return Status::from_host(s);
  t.dtype = dtype;
  const int64_t dims[] = {count};
  t.rank = 1;
  t.dims = dims;
  return tensor_of(t, "scratch");
}

Status Call::check_size(std::initializer_list<const Tensor*> tensors) const {
  for (const Tensor* t : tensors)
    if (t && t->numel() > std::numeric_limits<int32_t>::max())
      return unsupported(where_ + "tensor " + t->describe() + " has too many elements for the OpenCL kernels");
  return Status::ok();
}

// ---------------------------------------------------------------------------------------
// Shapes

void simplify(Dims& dims, std::initializer_list<Dims*> strides) {
  Dims od;
  std::vector<Dims> os(strides.size());
  for (size_t d = 0; d < dims.size(); ++d) {
    if (dims[d] == 1) continue;
    bool merge = !od.empty();
    size_t k = 0;
    for (const Dims* s : strides) merge = merge && os[k++].back() == (*s)[d] * dims[d];
    k = 0;
    if (merge) {
      od.back() *= dims[d];
      for (const Dims* s : strides) os[k++].back() = (*s)[d];
      continue;
    }
    od.push_back(dims[d]);
    for (const Dims* s : strides) os[k++].push_back((*s)[d]);
  }
  dims = std::move(od);
  size_t k = 0;
  for (Dims* s : strides) *s = std::move(os[k++]);
}

}  // namespace bulkhead::opencl
