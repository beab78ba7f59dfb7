// ai.onnx.ml operators: LabelEncoder. (Binarizer and ArrayFeatureExtractor are in misc.cc.)
#include <cmath>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>

#include "backends/cpu/cpu_kernels.h"
#include "backends/cpu/cpu_util.h"
#include "backends/cpu/kernels/cast.h"

namespace bulkhead::cpu {
namespace {

// LabelEncoder (ai.onnx.ml 1-4): maps each element of X through keys -> values, elements
// without a key taking the default. Keys and values come from keys_/values_{floats, int64s,
// strings} or (opset 4) keys_tensor / values_tensor; the default from default_{float,
// int64, string} or default_tensor, else -0.0, -1 or "_Unused" by the values' type. Float
// keys match by value, and a NaN key matches NaN.
struct LabelMap {
  DataType key_type = DataType::kUndefined;
  std::unordered_map<std::string, int64_t> strings;
  std::map<int64_t, int64_t> ints;
  std::map<double, int64_t> floats;
  int64_t nan_index = -1;
  Tensor values;   // one entry per key
  Tensor fallback;  // one element of the values' type
};

Tensor tensor_from_attr(const ir::Node& n, const std::string& stem, DataType* kind) {
  if (const ir::Attribute* a = n.attr(stem + "_tensor"); a && a->type == ir::AttrType::kTensor) {
    *kind = a->t.dtype();
    return a->t;
  }
  if (const ir::Attribute* a = n.attr(stem + "_strings")) {
    Tensor t = Tensor::host(DataType::kString, {static_cast<int64_t>(a->strings.size())});
    for (size_t i = 0; i < a->strings.size(); ++i) t.strings()[i] = a->strings[i];
    *kind = DataType::kString;
    return t;
  }
  if (const ir::Attribute* a = n.attr(stem + "_int64s")) {
    *kind = DataType::kInt64;
    return Tensor::from_vector<int64_t>(DataType::kInt64, {static_cast<int64_t>(a->ints.size())}, a->ints);
  }
  if (const ir::Attribute* a = n.attr(stem + "_floats")) {
    *kind = DataType::kFloat32;
    return Tensor::from_vector<float>(DataType::kFloat32, {static_cast<int64_t>(a->floats.size())}, a->floats);
  }
  *kind = DataType::kUndefined;
  return Tensor();
}

bool label_type(DataType t) {
  return t == DataType::kString || t == DataType::kFloat32 || t == DataType::kFloat64 || t == DataType::kInt64 ||
         t == DataType::kInt32 || t == DataType::kInt16 || t == DataType::kInt8 || t == DataType::kUInt8 ||
         t == DataType::kUInt16 || t == DataType::kUInt32 || t == DataType::kUInt64;
}

// Element i of a numeric tensor as int64 (integer types) or double (float types).
int64_t int_elem(const Tensor& t, int64_t i) {
  switch (t.dtype()) {
    case DataType::kInt64: return t.data<int64_t>()[i];
    case DataType::kInt32: return t.data<int32_t>()[i];
    case DataType::kInt16: return t.data<int16_t>()[i];
    case DataType::kInt8: return t.data<int8_t>()[i];
    case DataType::kUInt8: return t.data<uint8_t>()[i];
    case DataType::kUInt16: return t.data<uint16_t>()[i];
    case DataType::kUInt32: return t.data<uint32_t>()[i];
    default: return static_cast<int64_t>(t.data<uint64_t>()[i]);
  }
}
double float_elem(const Tensor& t, int64_t i) {
  return t.dtype() == DataType::kFloat64 ? t.data<double>()[i] : static_cast<double>(t.data<float>()[i]);
}

Result<std::unique_ptr<Kernel>> make_label_encoder(const KernelInfo& info) {
  const ir::Node& n = info.node;
  auto m = std::make_shared<LabelMap>();
  DataType vt = DataType::kUndefined;
  Tensor keys = tensor_from_attr(n, "keys", &m->key_type);
  m->values = tensor_from_attr(n, "values", &vt);
  if (!keys.defined() || !m->values.defined())
    return invalid_model(info.where() + "needs keys (keys_floats, keys_int64s, keys_strings or keys_tensor) and values");
  if (!label_type(m->key_type) || !label_type(vt))
    return unsupported(info.where() + "keys of " + dtype_name(m->key_type) + " to values of " + dtype_name(vt) + " are not supported");
  if (keys.numel() != m->values.numel())
    return invalid_model(info.where() + "has " + std::to_string(keys.numel()) + " keys and " + std::to_string(m->values.numel()) + " values");
  // The default, of the values' type.
  if (const ir::Attribute* a = n.attr("default_tensor"); a && a->type == ir::AttrType::kTensor) {
    if (a->t.dtype() != vt || a->t.numel() != 1)
      return invalid_model(info.where() + "default_tensor must be one " + dtype_name(vt) + " value, got " + a->t.describe());
    m->fallback = a->t;
  } else {
    m->fallback = Tensor::host(vt, {1});
    if (vt == DataType::kString) {
      m->fallback.strings()[0] = n.attr_string("default_string", "_Unused");
    } else {
      const bool is_float = vt == DataType::kFloat32 || vt == DataType::kFloat64;
      Tensor d = is_float ? Tensor::from_vector<double>(DataType::kFloat64, {1}, {n.attr_float("default_float", -0.0f)})
                          : Tensor::from_vector<int64_t>(DataType::kInt64, {1}, {n.attr_int("default_int64", -1)});
      BH_RETURN_IF_ERROR(ew::convert_into(d, m->fallback, 1, info.where()));
    }
  }
  const bool float_keys = m->key_type == DataType::kFloat32 || m->key_type == DataType::kFloat64;
  for (int64_t i = 0; i < keys.numel(); ++i) {
    // The first of repeated keys wins.
    if (m->key_type == DataType::kString) m->strings.emplace(keys.strings()[i], i);
    else if (!float_keys) m->ints.emplace(int_elem(keys, i), i);
    else if (std::isnan(float_elem(keys, i))) {
      if (m->nan_index < 0) m->nan_index = i;
    } else {
      m->floats.emplace(float_elem(keys, i), i);
    }
  }
  return make_kernel([m, float_keys](KernelContext& ctx) -> Status {
    const Tensor* x = ctx.input(0);
    if (!x) return invalid_argument(ctx.where() + "missing input X");
    if (x->dtype() != m->key_type)
      return invalid_argument(ctx.where() + "X is " + dtype_name(x->dtype()) + ", the keys are " + dtype_name(m->key_type));
    const DataType vt = m->values.dtype();
    BH_ASSIGN_OR_RETURN(Tensor y, ctx.allocate_output(0, vt, x->shape()));
    const size_t esz = dtype_size(vt);
    for (int64_t i = 0; i < x->numel(); ++i) {
      int64_t k = -1;
      if (m->key_type == DataType::kString) {
        auto it = m->strings.find(x->strings()[i]);
        if (it != m->strings.end()) k = it->second;
      } else if (!float_keys) {
        auto it = m->ints.find(int_elem(*x, i));
        if (it != m->ints.end()) k = it->second;
      } else {
        const double v = float_elem(*x, i);
        if (std::isnan(v)) k = m->nan_index;
        else if (auto it = m->floats.find(v); it != m->floats.end()) k = it->second;
      }
      const Tensor& src = k >= 0 ? m->values : m->fallback;
      const int64_t si = k >= 0 ? k : 0;
      if (vt == DataType::kString) y.strings()[i] = src.strings()[si];
      else std::memcpy(static_cast<char*>(y.raw()) + i * esz, static_cast<const char*>(src.raw()) + si * esz, esz);
    }
    return Status::ok();
  });
}

}  // namespace

void register_ml_kernels(KernelTable& t) {
  t.add("LabelEncoder", 1, make_label_encoder, "ai.onnx.ml");
}

}  // namespace bulkhead::cpu
