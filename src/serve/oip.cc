#include "serve/oip.h"

#include <algorithm>
#include <bit>
#include <charconv>
#include <cmath>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>
#include <string_view>
#include <type_traits>

#include "common/text.h"

namespace bulkhead::serve {
namespace {

using json = nlohmann::json;

// The binary extension's tensor bytes are little-endian, and so is every host bulkhead
// builds for: a tensor's bytes go out and come in as they are.
static_assert(std::endian::native == std::endian::little, "the binary tensor data extension is little-endian");

struct DatatypeName {
  DataType type;
  const char* name;
};
constexpr DatatypeName kDatatypes[] = {
    {DataType::kBool, "BOOL"},     {DataType::kUInt8, "UINT8"},   {DataType::kUInt16, "UINT16"},
    {DataType::kUInt32, "UINT32"}, {DataType::kUInt64, "UINT64"}, {DataType::kInt8, "INT8"},
    {DataType::kInt16, "INT16"},   {DataType::kInt32, "INT32"},   {DataType::kInt64, "INT64"},
    {DataType::kFloat16, "FP16"},  {DataType::kFloat32, "FP32"},  {DataType::kFloat64, "FP64"},
    {DataType::kBFloat16, "BF16"}, {DataType::kString, "BYTES"},
};

// Every JSON value of a request sits at most this many arrays and objects deep beyond the
// nesting of its deepest "data" (root, "inputs", the input, then the data's own levels).
// Checked on the text before it is parsed: nlohmann parses and frees iteratively, but
// nothing else in a request needs depth, and a hostile body should cost nothing more than
// a scan. Inputs of unknown rank may nest as deep as kUnknownRankDepth.
constexpr size_t kJsonOverhead = 4;
constexpr size_t kUnknownRankDepth = 64;

// Names and values from a request or a model inside a one-line message.
std::string in_quotes(const std::string& name) { return "'" + printable(name) + "'"; }

Status input_error(const std::string& name, const std::string& what) {
  return invalid_argument("input " + in_quotes(name) + ": " + what);
}

// "'a', 'b', 'c'" — at most 8 names, for "unknown input" messages.
std::string name_list(const std::vector<IoInfo>& io) {
  std::string s;
  for (size_t i = 0; i < io.size(); ++i) {
    if (i == 8) return s + ", ...";
    s += (i ? ", " : "") + in_quotes(io[i].name);
  }
  return s;
}

// Whether `text` nests arrays and objects deeper than `limit` (strings skipped). Unbalanced
// or malformed text is left to the parser.
bool nests_deeper_than(std::string_view text, size_t limit) {
  size_t depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (in_string) {
      if (c == '\\') ++i;
      else if (c == '"') in_string = false;
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > limit) return true;
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return false;
}

// The parser's reason, short and on one line ("[json.exception.parse_error.101] " dropped).
std::string json_error_reason(const char* what) {
  std::string s = what;
  if (!s.empty() && s[0] == '[') {
    size_t close = s.find("] ");
    if (close != std::string::npos) s.erase(0, close + 2);
  }
  s = printable(s);
  if (s.size() > 200) {
    size_t cut = 200;
    while (cut > 0 && (static_cast<unsigned char>(s[cut]) & 0xC0) == 0x80) --cut;  // not inside a character
    s = s.substr(0, cut) + "...";
  }
  return s;
}

const json* field(const json& object, const char* key) {
  if (!object.is_object()) return nullptr;
  auto it = object.find(key);
  return it == object.end() ? nullptr : &*it;
}

std::string a_type_name(const json& v) {
  std::string t = v.type_name();
  return (t == "array" || t == "object") ? "an " + t : "a " + t;
}

// ---------------------------------------------------------------------------------------
// JSON elements -> tensor elements

enum class ElementFault { kNone, kNotNumber, kNotIntegral, kOutOfRange };

template <typename T>
ElementFault json_to_int(const json& v, T* out) {
  using L = std::numeric_limits<T>;
  if (v.is_number_unsigned()) {
    uint64_t u = v.get<uint64_t>();
    if (u > static_cast<uint64_t>(L::max())) return ElementFault::kOutOfRange;
    *out = static_cast<T>(u);
    return ElementFault::kNone;
  }
  if (v.is_number_integer()) {
    int64_t s = v.get<int64_t>();
    if (s < 0) {
      if constexpr (L::is_signed) {
        if (s < static_cast<int64_t>(L::min())) return ElementFault::kOutOfRange;
        *out = static_cast<T>(s);
        return ElementFault::kNone;
      } else {
        return ElementFault::kOutOfRange;
      }
    }
    if (static_cast<uint64_t>(s) > static_cast<uint64_t>(L::max())) return ElementFault::kOutOfRange;
    *out = static_cast<T>(s);
    return ElementFault::kNone;
  }
  if (v.is_number_float()) {
    // 3.0 is taken as 3 (clients that hold every number as a double send those); 2.5 is not.
    double d = v.get<double>();
    if (!std::isfinite(d) || d != std::trunc(d)) return ElementFault::kNotIntegral;
    // T's range is [-2^digits, 2^digits) when signed, [0, 2^digits) when not: both bounds
    // are exact doubles, and every integral double inside converts exactly.
    const double hi = std::ldexp(1.0, L::digits);
    const double lo = L::is_signed ? -hi : 0.0;
    if (d < lo || d >= hi) return ElementFault::kOutOfRange;
    *out = static_cast<T>(d);
    return ElementFault::kNone;
  }
  return ElementFault::kNotNumber;
}

// A JSON number, or one of the strings "NaN", "Infinity" and "-Infinity" that responses
// write for the values JSON numbers cannot hold.
ElementFault json_to_double(const json& v, double* out) {
  if (v.is_number()) {
    *out = v.get<double>();
    return ElementFault::kNone;
  }
  if (v.is_string()) {
    const auto& s = v.get_ref<const std::string&>();
    if (s == "NaN") *out = std::numeric_limits<double>::quiet_NaN();
    else if (s == "Infinity") *out = std::numeric_limits<double>::infinity();
    else if (s == "-Infinity") *out = -std::numeric_limits<double>::infinity();
    else return ElementFault::kNotNumber;
    return ElementFault::kNone;
  }
  return ElementFault::kNotNumber;
}

// Finite doubles at or beyond these magnitudes round to infinity in float32 / float16
// (the largest finite value plus half its ulp: ties go to the even infinity).
constexpr double kFloat32Overflow = 0x1.ffffffp127;
constexpr double kFloat16Overflow = 65520.0;

ElementFault json_to_float32(const json& v, float* out) {
  double d = 0;
  if (ElementFault f = json_to_double(v, &d); f != ElementFault::kNone) return f;
  if (std::isfinite(d) && std::fabs(d) >= kFloat32Overflow) return ElementFault::kOutOfRange;
  *out = static_cast<float>(d);
  return ElementFault::kNone;
}

ElementFault json_to_float16(const json& v, uint16_t* out) {
  double d = 0;
  if (ElementFault f = json_to_double(v, &d); f != ElementFault::kNone) return f;
  if (std::isfinite(d) && std::fabs(d) >= kFloat16Overflow) return ElementFault::kOutOfRange;
  *out = float_to_half(static_cast<float>(d));
  return ElementFault::kNone;
}

ElementFault json_to_bool(const json& v, uint8_t* out) {
  // Only true and false: 0 and 1 are refused, so that a client that sent numbers for a
  // BOOL input (a mistaken datatype) hears about it.
  if (!v.is_boolean()) return ElementFault::kNotNumber;
  *out = v.get<bool>() ? 1 : 0;
  return ElementFault::kNone;
}

// Walks the elements of "data" in row-major order, nested arrays flattened, without
// recursion: `f(element, index)` returns a Status and the first error stops the walk; arrays
// nested deeper than `max_depth` are an error naming input `name`.
template <typename F>
Status walk_elements(const json& data, size_t max_depth, const std::string& name, F&& f) {
  std::vector<std::pair<const json*, size_t>> stack;
  stack.emplace_back(&data, 0);
  int64_t index = 0;
  while (!stack.empty()) {
    const json* array = stack.back().first;
    size_t next = stack.back().second;
    if (next == array->size()) {
      stack.pop_back();
      continue;
    }
    stack.back().second = next + 1;
    const json& e = (*array)[next];
    if (!e.is_array()) {
      BH_RETURN_IF_ERROR(f(e, index++));
      continue;
    }
    if (stack.size() >= max_depth)
      return input_error(name, "\"data\" nests arrays deeper than its shape's " + std::to_string(max_depth) +
                                   (max_depth == 1 ? " level" : " levels"));
    stack.emplace_back(&e, 0);
  }
  return Status::ok();
}

// The elements of "data", already counted (its depth checked), in row-major order.
template <typename F>
Status for_each_element(const json& data, F&& f) {
  return walk_elements(data, SIZE_MAX, "", std::forward<F>(f));
}

// The element count of "data" (an array), refusing arrays nested deeper than `max_depth`.
Result<int64_t> count_elements(const json& data, size_t max_depth, const std::string& name) {
  int64_t count = 0;
  BH_RETURN_IF_ERROR(walk_elements(data, max_depth, name, [&](const json&, int64_t) {
    ++count;
    return Status::ok();
  }));
  return count;
}

Status element_error(const std::string& name, DataType dt, int64_t i, const json& v, ElementFault fault) {
  std::string at = "element " + std::to_string(i);
  switch (fault) {
    case ElementFault::kNotNumber:
      if (dt == DataType::kBool) return input_error(name, at + " is " + a_type_name(v) + ", not true or false");
      if (dt == DataType::kString) return input_error(name, at + " is " + a_type_name(v) + ", not a string");
      return input_error(name, at + " is " + a_type_name(v) + ", not a number");
    case ElementFault::kNotIntegral:
      return input_error(name, at + " (" + v.dump() + ") is not an integer, as " + oip_datatype(dt) + " needs");
    case ElementFault::kOutOfRange:
      return input_error(name, at + " (" + v.dump() + ") is out of range for " + oip_datatype(dt));
    case ElementFault::kNone: break;
  }
  return Status::ok();
}

template <typename T, typename Convert>
Status decode_elements(const json& data, const std::string& name, DataType dt, T* out, Convert convert) {
  return for_each_element(data, [&](const json& v, int64_t i) -> Status {
    ElementFault fault = convert(v, &out[i]);
    if (fault != ElementFault::kNone) return element_error(name, dt, i, v, fault);
    return Status::ok();
  });
}

// A tensor of `dt` and `shape` from "data" already counted to hold exactly its elements.
Result<Tensor> tensor_from_json(const json& data, const std::string& name, DataType dt, const Shape& shape) {
  Tensor t = Tensor::host(dt, shape);
  if (t.numel() == 0) return t;
  Status s;
  switch (dt) {
    case DataType::kBool: s = decode_elements(data, name, dt, t.data<uint8_t>(), json_to_bool); break;
    case DataType::kUInt8: s = decode_elements(data, name, dt, t.data<uint8_t>(), json_to_int<uint8_t>); break;
    case DataType::kUInt16: s = decode_elements(data, name, dt, t.data<uint16_t>(), json_to_int<uint16_t>); break;
    case DataType::kUInt32: s = decode_elements(data, name, dt, t.data<uint32_t>(), json_to_int<uint32_t>); break;
    case DataType::kUInt64: s = decode_elements(data, name, dt, t.data<uint64_t>(), json_to_int<uint64_t>); break;
    case DataType::kInt8: s = decode_elements(data, name, dt, t.data<int8_t>(), json_to_int<int8_t>); break;
    case DataType::kInt16: s = decode_elements(data, name, dt, t.data<int16_t>(), json_to_int<int16_t>); break;
    case DataType::kInt32: s = decode_elements(data, name, dt, t.data<int32_t>(), json_to_int<int32_t>); break;
    case DataType::kInt64: s = decode_elements(data, name, dt, t.data<int64_t>(), json_to_int<int64_t>); break;
    case DataType::kFloat16: s = decode_elements(data, name, dt, t.data<uint16_t>(), json_to_float16); break;
    case DataType::kFloat32: s = decode_elements(data, name, dt, t.data<float>(), json_to_float32); break;
    case DataType::kFloat64: s = decode_elements(data, name, dt, t.data<double>(), json_to_double); break;
    case DataType::kString:
      s = decode_elements(data, name, dt, t.strings(), [](const json& v, std::string* out) {
        if (!v.is_string()) return ElementFault::kNotNumber;
        *out = v.get_ref<const std::string&>();
        return ElementFault::kNone;
      });
      break;
    default: return internal_error("input " + in_quotes(name) + ": no JSON decoding for " + dtype_name(dt));
  }
  if (!s.is_ok()) return s;
  return t;
}

uint32_t load_le32(const unsigned char* p) {
  return uint32_t{p[0]} | (uint32_t{p[1]} << 8) | (uint32_t{p[2]} << 16) | (uint32_t{p[3]} << 24);
}

// A tensor from its `size` bytes at `p` in the binary part (size already checked against
// the shape: numel * element size, or for BYTES at least 4 bytes an element).
Result<Tensor> tensor_from_binary(const unsigned char* p, size_t size, const std::string& name, DataType dt,
                                  const Shape& shape, int64_t numel) {
  if (dt != DataType::kString) {
    if (dt == DataType::kBool) {
      for (size_t i = 0; i < size; ++i)
        if (p[i] > 1)
          return input_error(
              name, "byte " + std::to_string(i) + " of its BOOL data is " + std::to_string(p[i]) + ", not 0 or 1");
    }
    return Tensor::host_copy(dt, shape, p, size);
  }
  Tensor t = Tensor::host(dt, shape);
  size_t at = 0;
  for (int64_t i = 0; i < numel; ++i) {
    if (size - at < 4)
      return input_error(name, "BYTES element " + std::to_string(i) + "'s length runs past its binary_data_size of " +
                                   std::to_string(size) + " bytes");
    uint32_t len = load_le32(p + at);
    at += 4;
    if (len > size - at)
      return input_error(name, "BYTES element " + std::to_string(i) + " says it has " + std::to_string(len) +
                                   " bytes, but only " + std::to_string(size - at) + " of its binary_data_size remain");
    t.strings()[i].assign(reinterpret_cast<const char*>(p + at), len);
    at += len;
  }
  if (at != size)
    return input_error(name, "its " + std::to_string(numel) + " BYTES elements take " + std::to_string(at) +
                                 " bytes, but its binary_data_size is " + std::to_string(size));
  return t;
}

// One request input, checked, before its data is read.
struct InputPlan {
  size_t model_index = 0;
  std::string name;
  DataType dtype = DataType::kUndefined;
  Shape shape;
  int64_t numel = 0;
  const json* data = nullptr;  // the "data" array, or
  uint64_t binary_size = 0;    // its bytes in the binary part
};

Result<Shape> parse_shape(const json& in, const std::string& name) {
  const json* js = field(in, "shape");
  if (!js || !js->is_array()) return input_error(name, "\"shape\" must be an array of dimensions");
  Shape shape;
  shape.reserve(js->size());
  for (size_t i = 0; i < js->size(); ++i) {
    const json& d = (*js)[i];
    std::string at = "dimension " + std::to_string(i) + " of its shape";
    if (d.is_number_unsigned()) {
      uint64_t u = d.get<uint64_t>();
      if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
        return input_error(name, at + " (" + d.dump() + ") is too large");
      shape.push_back(static_cast<int64_t>(u));
    } else if (d.is_number_integer()) {
      int64_t v = d.get<int64_t>();
      if (v < 0) return input_error(name, at + " is negative (" + d.dump() + ")");
      shape.push_back(v);
    } else {
      return input_error(name, at + " is " + a_type_name(d) + ", not a non-negative integer");
    }
  }
  return shape;
}

}  // namespace

Result<CheckedInput> check_input(const std::string& name, const std::string& datatype, const Shape& shape,
                                 const std::vector<IoInfo>& model_inputs, const RequestLimits& limits,
                                 std::vector<bool>& seen) {
  auto it = std::find_if(model_inputs.begin(), model_inputs.end(), [&](const IoInfo& i) { return i.name == name; });
  if (it == model_inputs.end())
    return invalid_argument("unknown input " + in_quotes(name) + " (the model's inputs: " + name_list(model_inputs) +
                            ")");
  CheckedInput c;
  c.model_index = static_cast<size_t>(it - model_inputs.begin());
  if (seen[c.model_index]) return invalid_argument("input " + in_quotes(name) + " is given twice");
  seen[c.model_index] = true;
  const IoInfo& info = *it;
  const std::string expected = oip_datatype(info.dtype);
  if (!info.is_tensor || expected.empty())
    return input_error(name, "the model's type " +
                                 (info.type_string.empty() ? dtype_name(info.dtype) : info.type_string) +
                                 " cannot be sent through the protocol");
  if (datatype != expected)
    return input_error(name, "datatype " + printable(datatype) + " does not match the model's " + expected);
  c.dtype = info.dtype;
  c.shape = shape;
  if (info.has_shape) {
    if (shape.size() != info.shape.size())
      return input_error(name, "shape " + shape_to_string(shape) + " has rank " + std::to_string(shape.size()) +
                                   ", the model's input has rank " + std::to_string(info.shape.size()));
    for (size_t d = 0; d < shape.size(); ++d)
      if (info.shape[d] >= 0 && shape[d] != info.shape[d])
        return input_error(name, "dimension " + std::to_string(d) + " of shape " + shape_to_string(shape) + " is " +
                                     std::to_string(shape[d]) + ", the model's is " + std::to_string(info.shape[d]));
  } else if (shape.size() > kUnknownRankDepth) {
    return input_error(name, "its shape has " + std::to_string(shape.size()) + " dimensions, more than the " +
                                 std::to_string(kUnknownRankDepth) + " allowed");
  }
  for (size_t d = 0; d < shape.size(); ++d)
    if (shape[d] < 0) return input_error(name, "dimension " + std::to_string(d) + " of its shape is negative");
  if (!checked_numel(shape, &c.numel))
    return input_error(name, "shape " + shape_to_string(shape) + " has too many elements: the count overflows 64 bits");
  if (static_cast<uint64_t>(c.numel) > limits.max_elements)
    return input_error(name, "shape " + shape_to_string(shape) + " has " + std::to_string(c.numel) +
                                 " elements, more than the limit of " + std::to_string(limits.max_elements));
  return c;
}

Status check_raw_size(const std::string& name, const CheckedInput& in, uint64_t size, const char* what) {
  const uint64_t numel = static_cast<uint64_t>(in.numel);
  if (in.dtype == DataType::kString) {
    uint64_t least = 0;
    if (__builtin_mul_overflow(numel, uint64_t{4}, &least) || size < least)
      return input_error(name, std::string(what) + " " + std::to_string(size) + " is too small for " +
                                   std::to_string(numel) + " BYTES elements (each takes at least 4 bytes)");
    return Status::ok();
  }
  uint64_t want = 0;
  if (__builtin_mul_overflow(numel, uint64_t{dtype_size(in.dtype)}, &want))
    return input_error(name, "shape " + shape_to_string(in.shape) + " is too large: its byte count overflows 64 bits");
  if (size != want)
    return input_error(name, std::string(what) + " is " + std::to_string(size) + " bytes, but " +
                                 oip_datatype(in.dtype) + shape_to_string(in.shape) + " takes " + std::to_string(want));
  return Status::ok();
}

Result<Tensor> tensor_from_raw(const void* data, size_t size, const std::string& name, const CheckedInput& in) {
  BH_RETURN_IF_ERROR(check_raw_size(name, in, size, "its raw data"));
  return tensor_from_binary(static_cast<const unsigned char*>(data), size, name, in.dtype, in.shape, in.numel);
}

Status check_requested_output(const std::string& name, const std::vector<IoInfo>& model_outputs,
                              const std::vector<std::string>& earlier) {
  if (std::none_of(model_outputs.begin(), model_outputs.end(), [&](const IoInfo& m) { return m.name == name; }))
    return invalid_argument("unknown output " + in_quotes(name) + " (the model's outputs: " + name_list(model_outputs) +
                            ")");
  // At most as many as the model has outputs get this far: quadratic is fine.
  if (std::find(earlier.begin(), earlier.end(), name) != earlier.end())
    return invalid_argument("output " + in_quotes(name) + " is requested twice");
  return Status::ok();
}

namespace {

// The model's input of that name, checked against the request's fields; the data itself is
// counted (JSON) or its size checked (binary), not read.
Result<InputPlan> plan_input(const json& in, size_t position, const std::vector<IoInfo>& model_inputs,
                             const RequestLimits& limits, std::vector<bool>& seen) {
  const std::string where = "inputs[" + std::to_string(position) + "]";
  if (!in.is_object()) return invalid_argument(where + " must be an object");
  const json* jn = field(in, "name");
  if (!jn || !jn->is_string()) return invalid_argument(where + " needs a \"name\" string");
  InputPlan plan;
  plan.name = jn->get<std::string>();
  const std::string& name = plan.name;
  const json* jd = field(in, "datatype");
  if (!jd || !jd->is_string()) {
    auto it = std::find_if(model_inputs.begin(), model_inputs.end(), [&](const IoInfo& i) { return i.name == name; });
    if (it != model_inputs.end() && !oip_datatype(it->dtype).empty())
      return input_error(name, "\"datatype\" must be a string (the model's is " + oip_datatype(it->dtype) + ")");
  }
  BH_ASSIGN_OR_RETURN(Shape shape, parse_shape(in, name));
  BH_ASSIGN_OR_RETURN(CheckedInput c, check_input(name, jd && jd->is_string() ? jd->get<std::string>() : std::string(),
                                                  shape, model_inputs, limits, seen));
  plan.model_index = c.model_index;
  plan.dtype = c.dtype;
  plan.shape = c.shape;
  plan.numel = c.numel;

  const json* params = field(in, "parameters");
  if (params && !params->is_object()) return input_error(name, "\"parameters\" must be an object");
  const json* jsize = params ? field(*params, "binary_data_size") : nullptr;
  const json* data = field(in, "data");
  if (jsize && data) return input_error(name, "it has both \"data\" and a binary_data_size");
  if (jsize) {
    if (!jsize->is_number_unsigned()) return input_error(name, "binary_data_size must be a non-negative integer");
    plan.binary_size = jsize->get<uint64_t>();
    BH_RETURN_IF_ERROR(check_raw_size(name, c, plan.binary_size, "binary_data_size"));
    return plan;
  }
  if (!data) return input_error(name, "it has neither \"data\" nor a binary_data_size parameter");
  if (plan.dtype == DataType::kBFloat16) return input_error(name, "BF16 data must be sent as binary");
  if (!data->is_array()) return input_error(name, "\"data\" must be an array");
  // A flat array has one level, the nested form one a dimension.
  BH_ASSIGN_OR_RETURN(int64_t count, count_elements(*data, std::max<size_t>(1, shape.size()), name));
  if (count != plan.numel)
    return input_error(name, "\"data\" has " + std::to_string(count) + " elements, but shape " +
                                 shape_to_string(shape) + " has " + std::to_string(plan.numel));
  plan.data = data;
  return plan;
}

Result<std::vector<RequestedOutput>> parse_outputs(const json* list, const std::vector<IoInfo>& model_outputs) {
  std::vector<RequestedOutput> r;
  if (!list) return r;
  if (!list->is_array()) return invalid_argument("\"outputs\" must be an array");
  for (size_t i = 0; i < list->size(); ++i) {
    const json& o = (*list)[i];
    const std::string where = "outputs[" + std::to_string(i) + "]";
    if (!o.is_object()) return invalid_argument(where + " must be an object");
    const json* jn = field(o, "name");
    if (!jn || !jn->is_string()) return invalid_argument(where + " needs a \"name\" string");
    RequestedOutput out;
    out.name = jn->get<std::string>();
    std::vector<std::string> earlier;
    for (const auto& x : r) earlier.push_back(x.name);
    BH_RETURN_IF_ERROR(check_requested_output(out.name, model_outputs, earlier));
    if (const json* params = field(o, "parameters")) {
      if (!params->is_object())
        return invalid_argument("output " + in_quotes(out.name) + ": \"parameters\" must be an object");
      if (const json* b = field(*params, "binary_data")) {
        if (!b->is_boolean())
          return invalid_argument("output " + in_quotes(out.name) + ": binary_data must be true or false");
        out.binary = b->get<bool>();
      }
    }
    r.push_back(std::move(out));
  }
  return r;
}

// ---------------------------------------------------------------------------------------
// Responses: the JSON is written by hand, so that large data arrays cost one pass.

// `s` as a JSON string; bytes that are not valid UTF-8 become the text "\xNN".
void append_json_string(std::string& out, const std::string& s) { out += json(valid_utf8(s)).dump(); }

template <typename T>
void append_integer(std::string& out, T v) {
  char buf[24];
  auto r = std::to_chars(buf, buf + sizeof buf, v);
  out.append(buf, r.ptr);
}

// The shortest text that reads back to `v`. JSON numbers cannot be NaN or infinite: those
// are written as the strings "NaN", "Infinity" and "-Infinity" (what JavaScript's and
// Python's parsers name them; requests accept the same strings for FP16/FP32/FP64).
template <typename T>
void append_float(std::string& out, T v) {
  if (std::isnan(v)) {
    out += "\"NaN\"";
    return;
  }
  if (std::isinf(v)) {
    out += v > 0 ? "\"Infinity\"" : "\"-Infinity\"";
    return;
  }
  if (v == 0 && std::signbit(v)) {
    out += "-0.0";  // "-0" reads back as the integer 0
    return;
  }
  char buf[40];
  std::to_chars_result r;
  if constexpr (std::is_same_v<T, float>) {
    // Every float's shortest text reads back to it through a correctly rounded double and
    // a rounding to float, as JSON readers (this one, Python's, JavaScript's) read it —
    // except one magnitude (all 2^31 were tried): 0x1.5c87fap-84's "7.038531e-26" is, as a
    // double, a float half-way point. It is written as the double's shortest text instead.
    if (std::fabs(v) == 0x1.5c87fap-84f) r = std::to_chars(buf, buf + sizeof buf, static_cast<double>(v));
    else r = std::to_chars(buf, buf + sizeof buf, v);
  } else {
    r = std::to_chars(buf, buf + sizeof buf, v);
  }
  out.append(buf, r.ptr);
}

void append_le32(std::string& out, uint32_t v) {
  char b[4] = {static_cast<char>(v & 0xff), static_cast<char>((v >> 8) & 0xff), static_cast<char>((v >> 16) & 0xff),
               static_cast<char>((v >> 24) & 0xff)};
  out.append(b, 4);
}

template <typename T, typename Write>
void append_elements(std::string& out, const Tensor& t, Write write) {
  const T* p = t.data<T>();
  const int64_t n = t.numel();
  out += '[';
  for (int64_t i = 0; i < n; ++i) {
    if (i) out += ',';
    write(out, p[i]);
  }
  out += ']';
}

void append_json_data(std::string& out, const Tensor& t) {
  if (t.numel() == 0) {
    out += "[]";
    return;
  }
  switch (t.dtype()) {
    case DataType::kBool:
      append_elements<uint8_t>(out, t, [](std::string& o, uint8_t v) { o += v ? "true" : "false"; });
      break;
    case DataType::kUInt8:
      append_elements<uint8_t>(out, t, [](std::string& o, uint8_t v) { append_integer(o, unsigned{v}); });
      break;
    case DataType::kUInt16: append_elements<uint16_t>(out, t, append_integer<uint16_t>); break;
    case DataType::kUInt32: append_elements<uint32_t>(out, t, append_integer<uint32_t>); break;
    case DataType::kUInt64: append_elements<uint64_t>(out, t, append_integer<uint64_t>); break;
    case DataType::kInt8:
      append_elements<int8_t>(out, t, [](std::string& o, int8_t v) { append_integer(o, int{v}); });
      break;
    case DataType::kInt16: append_elements<int16_t>(out, t, append_integer<int16_t>); break;
    case DataType::kInt32: append_elements<int32_t>(out, t, append_integer<int32_t>); break;
    case DataType::kInt64: append_elements<int64_t>(out, t, append_integer<int64_t>); break;
    case DataType::kFloat16:
      append_elements<uint16_t>(out, t, [](std::string& o, uint16_t v) { append_float(o, half_to_float(v)); });
      break;
    case DataType::kBFloat16:
      append_elements<uint16_t>(out, t, [](std::string& o, uint16_t v) { append_float(o, bfloat16_to_float(v)); });
      break;
    case DataType::kFloat32: append_elements<float>(out, t, append_float<float>); break;
    case DataType::kFloat64: append_elements<double>(out, t, append_float<double>); break;
    case DataType::kString: {
      const std::string* s = t.strings();
      out += '[';
      for (int64_t i = 0; i < t.numel(); ++i) {
        if (i) out += ',';
        append_json_string(out, s[i]);
      }
      out += ']';
      break;
    }
    default: break;  // refused by append_output
  }
}

}  // namespace

Status append_raw(std::string& out, const std::string& name, const Tensor& t) {
  if (!t.defined() || oip_datatype(t.dtype()).empty())
    return unsupported("output " + in_quotes(name) + ": its type " + dtype_name(t.dtype()) +
                       " cannot be sent through the protocol");
  if (t.dtype() == DataType::kString) {
    const std::string* s = t.strings();
    if (t.numel() > 0 && s == nullptr) return internal_error("output " + in_quotes(name) + " is not in host memory");
    for (int64_t i = 0; i < t.numel(); ++i) {
      if (s[i].size() > std::numeric_limits<uint32_t>::max())
        return invalid_argument("output " + in_quotes(name) + ": element " + std::to_string(i) +
                                " is too long for the binary BYTES form (over 4 GiB)");
      append_le32(out, static_cast<uint32_t>(s[i].size()));
      out += s[i];
    }
  } else if (t.nbytes() > 0) {
    if (!t.on_host() || t.raw() == nullptr) return internal_error("output " + in_quotes(name) + " is not in host memory");
    out.append(static_cast<const char*>(t.raw()), t.nbytes());
  }
  return Status::ok();
}

namespace {

Status append_output(EncodedResponse& r, const std::string& name, const Tensor& t, bool binary) {
  const std::string datatype = t.defined() ? oip_datatype(t.dtype()) : "";
  if (datatype.empty())
    return unsupported("output " + in_quotes(name) + ": its type " + dtype_name(t.dtype()) +
                       " cannot be sent through the protocol");
  const bool is_string = t.dtype() == DataType::kString;
  if (t.numel() > 0 && (is_string ? t.strings() == nullptr : (!t.on_host() || t.raw() == nullptr)))
    return internal_error("output " + in_quotes(name) + " is not in host memory");
  std::string& js = r.json;
  js += "{\"name\":";
  append_json_string(js, name);
  js += ",\"datatype\":\"";
  js += datatype;
  js += "\",\"shape\":[";
  for (int d = 0; d < t.rank(); ++d) {
    if (d) js += ',';
    append_integer(js, t.dim(d));
  }
  js += ']';
  if (binary) {
    size_t size = 0;
    if (is_string) {
      auto bytes = std::make_unique<std::string>();
      BH_RETURN_IF_ERROR(append_raw(*bytes, name, t));
      size = bytes->size();
      r.pieces.emplace_back(*bytes);
      r.owned.push_back(std::move(bytes));
    } else if (t.nbytes() > 0) {
      size = t.nbytes();
      r.pieces.emplace_back(static_cast<const char*>(t.raw()), size);
      r.held.push_back(t);  // its bytes stay valid while the response lives
    }
    js += ",\"parameters\":{\"binary_data_size\":";
    append_integer(js, size);
    js += '}';
  } else {
    js += ",\"data\":";
    append_json_data(js, t);
  }
  js += '}';
  return Status::ok();
}

}  // namespace

std::string oip_datatype(DataType t) {
  for (const auto& d : kDatatypes)
    if (d.type == t) return d.name;
  return "";
}

DataType from_oip_datatype(const std::string& name) {
  for (const auto& d : kDatatypes)
    if (name == d.name) return d.type;
  return DataType::kUndefined;
}

Result<InferRequest> parse_infer_request(std::string_view body, std::optional<uint64_t> header_length,
                                         const std::vector<IoInfo>& inputs, const std::vector<IoInfo>& outputs,
                                         const RequestLimits& limits, const std::shared_ptr<Buffer>& owner) {
  size_t json_size = body.size();
  if (header_length) {
    if (*header_length > body.size())
      return invalid_argument("Inference-Header-Content-Length " + std::to_string(*header_length) +
                              " is larger than the body's " + std::to_string(body.size()) + " bytes");
    json_size = static_cast<size_t>(*header_length);
  }
  const std::string_view text(body.data(), json_size);
  const auto* binary = reinterpret_cast<const unsigned char*>(body.data()) + json_size;
  const size_t binary_size = body.size() - json_size;

  size_t deepest = kUnknownRankDepth;
  for (const IoInfo& i : inputs)
    if (i.has_shape) deepest = std::max(deepest, i.shape.size());
  if (nests_deeper_than(text, kJsonOverhead + deepest))
    return invalid_argument("the request's JSON nests arrays and objects deeper than " +
                            std::to_string(kJsonOverhead + deepest) + " levels");
  json root;
  try {
    root = json::parse(text.begin(), text.end());
  } catch (const json::exception& e) {
    return invalid_argument("the request body is not valid JSON: " + json_error_reason(e.what()));
  }
  if (!root.is_object()) return invalid_argument("the request body must be a JSON object");

  InferRequest request;
  if (const json* id = field(root, "id")) {
    if (!id->is_string()) return invalid_argument("\"id\" must be a string");
    request.id = id->get<std::string>();
  }
  if (const json* params = field(root, "parameters")) {
    if (!params->is_object()) return invalid_argument("the request's \"parameters\" must be an object");
    if (const json* b = field(*params, "binary_data_output")) {
      if (!b->is_boolean()) return invalid_argument("binary_data_output must be true or false");
      request.binary_output = b->get<bool>();
    }
  }
  const json* list = field(root, "inputs");
  if (!list || !list->is_array() || list->empty())
    return invalid_argument("the request needs \"inputs\", a non-empty array");

  // Everything is checked before any data is read.
  std::vector<InputPlan> plans;
  std::vector<bool> seen(inputs.size(), false);
  for (size_t i = 0; i < list->size(); ++i) {
    BH_ASSIGN_OR_RETURN(InputPlan plan, plan_input((*list)[i], i, inputs, limits, seen));
    plans.push_back(std::move(plan));
  }
  for (size_t i = 0; i < inputs.size(); ++i)
    if (!seen[i]) return invalid_argument("missing input " + in_quotes(inputs[i].name));
  BH_ASSIGN_OR_RETURN(request.outputs, parse_outputs(field(root, "outputs"), outputs));
  uint64_t total = 0;
  for (const InputPlan& p : plans)
    if (!p.data && __builtin_add_overflow(total, p.binary_size, &total))
      return invalid_argument("the inputs' binary_data_size values overflow 64 bits when added");
  if (total != binary_size)
    return invalid_argument("the inputs' binary_data_size values add up to " + std::to_string(total) +
                            " bytes, but the body has " + std::to_string(binary_size) + " bytes after its JSON" +
                            (header_length ? "" : " (no Inference-Header-Content-Length was given)"));

  std::vector<Tensor> tensors(inputs.size());
  size_t at = 0;
  for (const InputPlan& p : plans) {
    if (p.data) {
      BH_ASSIGN_OR_RETURN(tensors[p.model_index], tensor_from_json(*p.data, p.name, p.dtype, p.shape));
    } else {
      const size_t size = static_cast<size_t>(p.binary_size);
      const unsigned char* bytes = binary + at;
      const auto* base = owner ? static_cast<const unsigned char*>(owner->data()) : nullptr;
      if (base && p.dtype != DataType::kString && p.dtype != DataType::kBool &&
          reinterpret_cast<uintptr_t>(bytes) % 64 == 0 && bytes >= base && bytes + size <= base + owner->size()) {
        // plan_input checked that size is numel times the element size.
        tensors[p.model_index] = Tensor(p.dtype, p.shape, owner, static_cast<size_t>(bytes - base));
      } else {
        BH_ASSIGN_OR_RETURN(tensors[p.model_index], tensor_from_binary(bytes, size, p.name, p.dtype, p.shape, p.numel));
      }
      at += size;
    }
  }
  request.inputs.reserve(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) request.inputs.emplace_back(inputs[i].name, std::move(tensors[i]));
  return request;
}

Result<EncodedResponse> encode_infer_response(const std::string& model, const std::string& version,
                                              const InferRequest& request, const NamedTensors& outputs) {
  EncodedResponse r;
  std::string& js = r.json;
  js += "{\"model_name\":";
  append_json_string(js, model);
  js += ",\"model_version\":";
  append_json_string(js, version);
  if (!request.id.empty()) {
    js += ",\"id\":";
    append_json_string(js, request.id);
  }
  js += ",\"outputs\":[";
  if (!request.outputs.empty()) {
    for (size_t i = 0; i < request.outputs.size(); ++i) {
      const RequestedOutput& want = request.outputs[i];
      auto it = std::find_if(outputs.begin(), outputs.end(), [&](const auto& o) { return o.first == want.name; });
      if (it == outputs.end()) return not_found("the run returned no output " + in_quotes(want.name));
      if (i) js += ',';
      BH_RETURN_IF_ERROR(append_output(r, want.name, it->second, want.binary));
    }
  } else {
    for (size_t i = 0; i < outputs.size(); ++i) {
      if (i) js += ',';
      BH_RETURN_IF_ERROR(append_output(r, outputs[i].first, outputs[i].second, request.binary_output));
    }
  }
  js += "]}";
  return r;
}

size_t EncodedResponse::binary_size() const {
  size_t n = 0;
  for (const auto& p : pieces) n += p.size();
  return n;
}

std::string EncodedResponse::binary() const {
  std::string b;
  b.reserve(binary_size());
  for (const auto& p : pieces) b.append(p);
  return b;
}

std::string error_json(const std::string& message) {
  nlohmann::json j = nlohmann::json::object();
  j["error"] = valid_utf8(message);
  return j.dump();
}

}  // namespace bulkhead::serve
