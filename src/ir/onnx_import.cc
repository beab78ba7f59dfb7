#include "ir/onnx_import.h"

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <functional>
#include <vector>
#include <set>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include "common/text.h"
#include "io/file.h"
#include "ir/gradient.h"
#include "ir/infer.h"
#include "onnx/onnx_pb.h"
#include "onnx/onnx-data_pb.h"

namespace bulkhead::ir {
namespace {

struct Ctx {
  std::string model_name;
  DataFolder data;
  std::map<std::string, int> opsets;
  int node_counter = 0;
};

// The bytes of a file, mapped read-only and populated in one call: the parser reads the
// page cache directly, with no copy into fresh (page-faulting) memory.
class FileBytes {
 public:
  FileBytes() = default;
  FileBytes(FileBytes&& o) noexcept : map_(std::exchange(o.map_, nullptr)), size_(o.size_), buf_(std::move(o.buf_)) {}
  FileBytes& operator=(FileBytes&&) = delete;
  FileBytes(const FileBytes&) = delete;
  ~FileBytes() {
    if (map_) ::munmap(map_, size_);
  }
  const char* data() const { return map_ ? static_cast<const char*>(map_) : buf_.data(); }
  size_t size() const { return map_ ? size_ : buf_.size(); }

  // A regular file of at most `max_bytes` (io::RegularFile's checks), mapped.
  static Result<FileBytes> read(const std::string& path, uint64_t max_bytes, const std::string& what) {
    BH_ASSIGN_OR_RETURN(io::RegularFile file, io::RegularFile::open(path, max_bytes, what));
    FileBytes f;
    if (file.size() > 0) {
      void* p = ::mmap(nullptr, static_cast<size_t>(file.size()), PROT_READ, MAP_PRIVATE | MAP_POPULATE, file.fd(), 0);
      if (p != MAP_FAILED) {
        f.map_ = p;
        f.size_ = static_cast<size_t>(file.size());
        return f;
      }
      BH_ASSIGN_OR_RETURN(f.buf_, file.read_all());
    }
    return f;
  }

 private:
  void* map_ = nullptr;
  size_t size_ = 0;
  std::string buf_;
};

template <typename Msg>
bool parse_large(Msg& msg, const void* data, size_t size) {
  google::protobuf::io::ArrayInputStream raw(data, static_cast<int>(size));
  google::protobuf::io::CodedInputStream in(&raw);
  in.SetTotalBytesLimit(INT32_MAX);
  return msg.ParseFromCodedStream(&in) && in.ConsumedEntireMessage();
}

// The folder a file is in: where its external data must lie.
std::string folder_of(const std::string& path) {
  auto slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

// The model versions bulkhead reads: IR 3 (the first with opset imports) to 13, and the
// opsets of the domains it implements (newer versions may change what an operator means).
constexpr int64_t kMinIrVersion = 3, kMaxIrVersion = 13;
struct KnownOpset {
  const char* domain;
  int64_t max_version;
};
constexpr KnownOpset kKnownOpsets[] = {{"", 28}, {"ai.onnx.ml", 5}, {"ai.onnx.preview.training", 1}, {"ai.onnx.preview", 1}};

std::string norm_domain(const std::string& d) { return d == "ai.onnx" ? std::string() : d; }

Result<ValueInfo> convert_type(const std::string& name, const onnx::TypeProto& tp) {
  ValueInfo vi;
  vi.name = name;
  const onnx::TypeProto* t = &tp;
  if (t->has_optional_type()) {
    vi.type = ValueType::kOptional;
    t = &t->optional_type().elem_type();
    vi.optional_elem = t->has_sequence_type() ? ValueType::kSequence : ValueType::kTensor;
  } else if (t->has_sequence_type()) {
    vi.type = ValueType::kSequence;
  }
  if (t->has_sequence_type()) t = &t->sequence_type().elem_type();
  if (t->has_tensor_type()) {
    const auto& tt = t->tensor_type();
    vi.dtype = static_cast<DataType>(tt.elem_type());
    if (tt.has_shape()) {
      std::vector<Dim> dims;
      for (const auto& d : tt.shape().dim()) {
        Dim dim;
        if (d.has_dim_value()) dim.value = d.dim_value();
        else if (d.has_dim_param()) dim.param = d.dim_param();
        dims.push_back(dim);
      }
      vi.shape = std::move(dims);
    }
  } else if (vi.type == ValueType::kTensor && !t->has_tensor_type()) {
    vi.type = t->value_case() == onnx::TypeProto::VALUE_NOT_SET ? ValueType::kTensor : ValueType::kUnknown;
  }
  return vi;
}

Result<Tensor> convert_tensor(const onnx::TensorProto& t, const DataFolder& data) {
  const std::string what = "tensor '" + t.name() + "'";
  if (!dtype_is_known(t.data_type()))
    return unsupported(what + " has element type " + std::to_string(t.data_type()) + ", which bulkhead does not support");
  DataType dt = static_cast<DataType>(t.data_type());
  Shape shape(t.dims().begin(), t.dims().end());
  // The dimensions come from the file: bound them before anything is allocated (a
  // corrupt file must give an error, not an allocation failure).
  int64_t n = 0;
  for (int64_t d : shape)
    if (d < 0) return invalid_model(what + " has a negative dimension");
  if (!checked_numel(shape, &n) || n > (int64_t{1} << 40))
    return invalid_model(what + " has dimensions " + shape_to_string(shape) + ": too many elements (corrupt file?)");
  if (dt == DataType::kString) {
    if (t.string_data_size() != n) return invalid_model(what + ": expected " + std::to_string(n) + " strings, found " + std::to_string(t.string_data_size()));
    Tensor out = Tensor::host(dt, shape);
    for (int64_t i = 0; i < n; ++i) out.strings()[i] = t.string_data(static_cast<int>(i));
    return out;
  }
  size_t esz = dtype_size(dt);
  // Sub-byte types are packed in the file (two or four elements a byte) and one element a
  // byte in memory: `nbytes` is what the file holds; they are read into `packed` and
  // unpacked into the tensor.
  const bool subbyte = dtype_bits(dt) < 8;
  size_t nbytes = subbyte ? dtype_packed_nbytes(dt, n) : static_cast<size_t>(n) * esz;
  Tensor out;
  char* dst = nullptr;
  std::vector<char> packed;
  // Allocates only once the file is known to hold the bytes the dimensions promise.
  auto allocate = [&] {
    out = Tensor::host(dt, shape);
    if (subbyte) {
      packed.resize(nbytes);
      dst = packed.data();
    } else {
      dst = static_cast<char*>(out.raw());
    }
  };
  auto finish = [&]() -> Result<Tensor> {
    if (subbyte) dtype_unpack(dt, packed.data(), n, out.raw());
    return out;
  };

  if (t.data_location() == onnx::TensorProto::EXTERNAL) {
    std::string location;
    int64_t offset = 0, length = -1;
    for (const auto& kv : t.external_data()) {
      if (kv.key() == "location") location = kv.value();
      else if (kv.key() == "offset" || kv.key() == "length") {
        char* end = nullptr;
        long long v = std::strtoll(kv.value().c_str(), &end, 10);
        if (kv.value().empty() || *end || v < 0) return invalid_model(what + ": bad external data " + kv.key() + " '" + kv.value() + "'");
        (kv.key() == "offset" ? offset : length) = v;
      }
    }
    if (location.empty()) return invalid_model(what + " has external data without a location");
    if (data.dir.empty()) return invalid_model(what + " uses external data but the model was not loaded from a file");
    // The real path, symlinks resolved, must stay inside the model's folder; regular
    // files only, within the file size limit.
    auto file = io::RegularFile::open_inside(data.dir, location, data.max_file_bytes, what + ": external data file");
    if (!file.is_ok()) return file.status();
    const int64_t fsize = static_cast<int64_t>(file->size());
    if (offset > fsize)
      return invalid_model(what + ": external data offset " + std::to_string(offset) + " is past the end of '" + location +
                           "' (" + std::to_string(fsize) + " bytes)");
    if (length < 0) length = fsize - offset;
    if (static_cast<uint64_t>(length) != nbytes || length > fsize - offset)
      return invalid_model(what + ": external data in '" + location + "' has " + std::to_string(std::min(length, fsize - offset)) +
                           " bytes at offset " + std::to_string(offset) + ", expected " + std::to_string(nbytes));
    allocate();
    BH_RETURN_IF_ERROR(file->read_at(static_cast<uint64_t>(offset), dst, nbytes).with_context(what + ": "));
    return finish();
  }
  if (t.has_raw_data()) {
    if (t.raw_data().size() != nbytes)
      return invalid_model(what + ": raw data has " + std::to_string(t.raw_data().size()) + " bytes, expected " + std::to_string(nbytes));
    allocate();
    if (nbytes) std::memcpy(dst, t.raw_data().data(), nbytes);
    return finish();
  }
  // int32_data holds one value an entry, or for the sub-byte types one packed byte.
  const int64_t entries = subbyte ? static_cast<int64_t>(nbytes) : n;
  auto check = [&](int count) -> Status {
    if (count != entries)
      return invalid_model(what + ": expected " + std::to_string(entries) + " values, found " + std::to_string(count));
    return Status::ok();
  };
  const int64_t typed_values = int64_t{t.float_data_size()} + t.double_data_size() + t.int64_data_size() +
                               t.uint64_data_size() + t.int32_data_size();
  if (entries > typed_values)
    return invalid_model(what + ": expected " + std::to_string(entries) + " values, found " + std::to_string(typed_values));
  allocate();
  switch (dt) {
    case DataType::kFloat32:
      BH_RETURN_IF_ERROR(check(t.float_data_size()));
      if (n) std::memcpy(dst, t.float_data().data(), nbytes);
      break;
    case DataType::kFloat64:
      BH_RETURN_IF_ERROR(check(t.double_data_size()));
      if (n) std::memcpy(dst, t.double_data().data(), nbytes);
      break;
    case DataType::kInt64:
      BH_RETURN_IF_ERROR(check(t.int64_data_size()));
      if (n) std::memcpy(dst, t.int64_data().data(), nbytes);
      break;
    case DataType::kUInt32: case DataType::kUInt64:
      BH_RETURN_IF_ERROR(check(t.uint64_data_size()));
      for (int64_t i = 0; i < n; ++i) {
        uint64_t v = t.uint64_data(static_cast<int>(i));
        if (dt == DataType::kUInt32) reinterpret_cast<uint32_t*>(dst)[i] = static_cast<uint32_t>(v);
        else reinterpret_cast<uint64_t*>(dst)[i] = v;
      }
      break;
    case DataType::kInt32: case DataType::kInt16: case DataType::kInt8: case DataType::kUInt16:
    case DataType::kUInt8: case DataType::kBool: case DataType::kFloat16: case DataType::kBFloat16:
    case DataType::kFloat8E4M3FN: case DataType::kFloat8E4M3FNUZ: case DataType::kFloat8E5M2:
    case DataType::kFloat8E5M2FNUZ: case DataType::kFloat8E8M0: case DataType::kUInt4: case DataType::kInt4:
    case DataType::kFloat4E2M1: case DataType::kUInt2: case DataType::kInt2:
      BH_RETURN_IF_ERROR(check(t.int32_data_size()));
      for (int64_t i = 0; i < entries; ++i) {
        int32_t v = t.int32_data(static_cast<int>(i));
        switch (esz) {
          case 4: reinterpret_cast<int32_t*>(dst)[i] = v; break;
          case 2: reinterpret_cast<uint16_t*>(dst)[i] = static_cast<uint16_t>(v); break;
          default: reinterpret_cast<uint8_t*>(dst)[i] = static_cast<uint8_t>(v); break;
        }
      }
      break;
    default:
      return unsupported(what + " has element type " + dtype_name(dt) + ", which bulkhead does not support");
  }
  return finish();
}

Result<std::shared_ptr<Graph>> convert_graph(const onnx::GraphProto& gp, Ctx& ctx);

Result<Attribute> convert_attr(const onnx::AttributeProto& a, Ctx& ctx, const std::string& where) {
  Attribute r;
  switch (a.type()) {
    case onnx::AttributeProto::FLOAT: r.type = AttrType::kFloat; r.f = a.f(); break;
    case onnx::AttributeProto::INT: r.type = AttrType::kInt; r.i = a.i(); break;
    case onnx::AttributeProto::STRING: r.type = AttrType::kString; r.s = a.s(); break;
    case onnx::AttributeProto::TENSOR: {
      r.type = AttrType::kTensor;
      BH_ASSIGN_OR_RETURN(r.t, convert_tensor(a.t(), ctx.data));
      break;
    }
    case onnx::AttributeProto::GRAPH: {
      r.type = AttrType::kGraph;
      BH_ASSIGN_OR_RETURN(auto g, convert_graph(a.g(), ctx));
      r.g = std::move(g);
      break;
    }
    case onnx::AttributeProto::FLOATS: r.type = AttrType::kFloats; r.floats.assign(a.floats().begin(), a.floats().end()); break;
    case onnx::AttributeProto::INTS: r.type = AttrType::kInts; r.ints.assign(a.ints().begin(), a.ints().end()); break;
    case onnx::AttributeProto::STRINGS: r.type = AttrType::kStrings; r.strings.assign(a.strings().begin(), a.strings().end()); break;
    case onnx::AttributeProto::TENSORS:
      r.type = AttrType::kTensors;
      for (const auto& t : a.tensors()) {
        BH_ASSIGN_OR_RETURN(auto tt, convert_tensor(t, ctx.data));
        r.tensors.push_back(std::move(tt));
      }
      break;
    case onnx::AttributeProto::GRAPHS:
      r.type = AttrType::kGraphs;
      for (const auto& g : a.graphs()) {
        BH_ASSIGN_OR_RETURN(auto gg, convert_graph(g, ctx));
        r.graphs.push_back(std::move(gg));
      }
      break;
    case onnx::AttributeProto::TYPE_PROTO: {
      r.type = AttrType::kType;
      BH_ASSIGN_OR_RETURN(auto vi, convert_type(a.name(), a.tp()));
      r.types.push_back(std::move(vi));
      break;
    }
    case onnx::AttributeProto::TYPE_PROTOS:
      r.type = AttrType::kTypes;
      for (const auto& tp : a.type_protos()) {
        BH_ASSIGN_OR_RETURN(auto vi, convert_type(a.name(), tp));
        r.types.push_back(std::move(vi));
      }
      break;
    default:
      return unsupported(where + "attribute '" + a.name() + "' has a type bulkhead does not support (" +
                         std::to_string(static_cast<int>(a.type())) + ")");
  }
  return r;
}

// Turns a Constant node into the tensor it defines.
Result<Tensor> constant_value(const Node& n) {
  if (n.attrs.size() != 1) return invalid_model(n.label() + ": Constant needs exactly one value attribute");
  const auto& [name, a] = *n.attrs.begin();
  if (name == "value" && a.type == AttrType::kTensor) return a.t;
  if (name == "value_float") return Tensor::from_vector<float>(DataType::kFloat32, {}, {a.f});
  if (name == "value_floats") return Tensor::from_vector<float>(DataType::kFloat32, {static_cast<int64_t>(a.floats.size())}, a.floats);
  if (name == "value_int") return Tensor::from_vector<int64_t>(DataType::kInt64, {}, {a.i});
  if (name == "value_ints") return Tensor::from_vector<int64_t>(DataType::kInt64, {static_cast<int64_t>(a.ints.size())}, a.ints);
  if (name == "value_string" || name == "value_strings") {
    std::vector<std::string> s = name == "value_string" ? std::vector<std::string>{a.s} : a.strings;
    Tensor t = Tensor::host(DataType::kString, name == "value_string" ? Shape{} : Shape{static_cast<int64_t>(s.size())});
    for (size_t i = 0; i < s.size(); ++i) t.strings()[i] = s[i];
    return t;
  }
  return unsupported(n.label() + ": Constant attribute '" + name + "' is not supported");
}

Status topo_sort(Graph& g, const std::string& where) {
  std::unordered_set<std::string> avail;
  for (auto& i : g.inputs) avail.insert(i.name);
  for (auto& [k, v] : g.initializers) avail.insert(k);
  // Names from enclosing scopes count as available.
  std::unordered_set<std::string> produced;
  for (auto& n : g.nodes)
    for (auto& o : n.outputs)
      if (!o.empty()) produced.insert(o);
  std::vector<Node> sorted;
  sorted.reserve(g.nodes.size());
  std::vector<bool> done(g.nodes.size(), false);
  size_t remaining = g.nodes.size();
  // Stable: repeatedly take the first node whose inputs are ready (files are almost
  // always sorted already, so this is one pass).
  size_t start = 0;
  while (remaining) {
    bool progress = false;
    for (size_t i = start; i < g.nodes.size(); ++i) {
      if (done[i]) continue;
      bool ready = true;
      for (auto& in : g.nodes[i].inputs)
        if (!in.empty() && produced.count(in) && !avail.count(in)) { ready = false; break; }
      if (!ready) continue;
      done[i] = true;
      --remaining;
      progress = true;
      for (auto& o : g.nodes[i].outputs)
        if (!o.empty()) avail.insert(o);
      sorted.push_back(std::move(g.nodes[i]));
      while (start < done.size() && done[start]) ++start;
    }
    if (!progress) return invalid_model(where + "graph '" + g.name + "' has a cycle or a node whose input is never produced");
  }
  g.nodes = std::move(sorted);
  return Status::ok();
}

// Names read by nodes of `g` (and, recursively, its subgraphs) that `g` does not define.
void compute_outer_refs(Graph& g) {
  std::unordered_set<std::string> defined;
  for (auto& i : g.inputs) defined.insert(i.name);
  for (auto& [k, v] : g.initializers) defined.insert(k);
  std::unordered_set<std::string> seen;
  auto use = [&](const std::string& n) {
    if (!n.empty() && !defined.count(n) && seen.insert(n).second) g.outer_refs.push_back(n);
  };
  for (auto& n : g.nodes) {
    for (auto& in : n.inputs) use(in);
    for (auto& [name, a] : n.attrs) {
      if (a.g)
        for (auto& r : a.g->outer_refs) use(r);
      for (auto& sg : a.graphs)
        for (auto& r : sg->outer_refs) use(r);
    }
    for (auto& o : n.outputs)
      if (!o.empty()) defined.insert(o);
  }
  for (auto& o : g.outputs) use(o.name);
}

Result<std::shared_ptr<Graph>> convert_graph(const onnx::GraphProto& gp, Ctx& ctx) {
  auto g = std::make_shared<Graph>();
  g->name = gp.name();
  const std::string where = "'" + ctx.model_name + "': ";
  for (const auto& t : gp.initializer()) {
    if (g->initializers.count(t.name())) return invalid_model(where + "initializer '" + t.name() + "' is given twice");
    auto tensor = convert_tensor(t, ctx.data);
    if (!tensor.is_ok()) return tensor.status().with_context(where);
    g->initializers[t.name()] = std::move(tensor).value();
  }
  if (gp.sparse_initializer_size() > 0) return unsupported(where + "sparse initializers are not supported");
  // Every value has one source: a graph input, an initializer or one node output (SSA).
  std::unordered_set<std::string> declared;
  for (const auto& vi : gp.input()) {
    if (vi.name().empty()) return invalid_model(where + "a graph input has no name");
    if (!declared.insert(vi.name()).second) return invalid_model(where + "graph input '" + vi.name() + "' is declared twice");
    BH_ASSIGN_OR_RETURN(auto v, convert_type(vi.name(), vi.type()));
    g->inputs.push_back(std::move(v));
  }
  std::unordered_set<std::string> listed;
  for (const auto& vi : gp.output()) {
    if (vi.name().empty()) return invalid_model(where + "a graph output has no name");
    if (!listed.insert(vi.name()).second) return invalid_model(where + "graph output '" + vi.name() + "' is listed twice");
    BH_ASSIGN_OR_RETURN(auto v, convert_type(vi.name(), vi.type()));
    g->outputs.push_back(std::move(v));
  }
  for (const auto& [iname, t] : g->initializers) declared.insert(iname);
  std::unordered_map<std::string, std::string> producer;  // value -> node that makes it
  for (const auto& vi : gp.value_info()) {
    BH_ASSIGN_OR_RETURN(auto v, convert_type(vi.name(), vi.type()));
    g->value_info[vi.name()] = std::move(v);
  }
  for (const auto& np : gp.node()) {
    Node n;
    n.op_type = np.op_type();
    n.domain = norm_domain(np.domain());
    n.name = np.name().empty() ? n.op_type + "_" + std::to_string(ctx.node_counter) : np.name();
    ++ctx.node_counter;
    auto ov = ctx.opsets.find(n.domain);
    n.opset = ov == ctx.opsets.end() ? 0 : ov->second;
    n.inputs.assign(np.input().begin(), np.input().end());
    n.outputs.assign(np.output().begin(), np.output().end());
    for (const auto& o : n.outputs) {
      if (o.empty()) continue;  // an optional output left out
      if (declared.count(o))
        return invalid_model(where + n.label() + ": output '" + o + "' is also a graph input or initializer (a value has one source)");
      auto [it, fresh] = producer.emplace(o, n.name);
      if (!fresh) return invalid_model(where + "value '" + o + "' is produced twice, by node '" + it->second + "' and by node '" + n.name + "'");
    }
    for (const auto& a : np.attribute()) {
      if (!a.ref_attr_name().empty())
        return unsupported(where + n.label() + ": attribute references (functions) are not supported");
      BH_ASSIGN_OR_RETURN(auto attr, convert_attr(a, ctx, where + n.label() + ": "));
      n.attrs[a.name()] = std::move(attr);
    }
    if (n.op_type == "Constant" && n.domain.empty() && n.outputs.size() == 1) {
      BH_ASSIGN_OR_RETURN(Tensor t, constant_value(n));
      g->initializers[n.outputs[0]] = std::move(t);
      continue;
    }
    g->nodes.push_back(std::move(n));
  }
  BH_RETURN_IF_ERROR(topo_sort(*g, where));
  compute_outer_refs(*g);
  return g;
}

}  // namespace

Result<Tensor> tensor_from_proto(const onnx::TensorProto& t, const DataFolder& data) { return convert_tensor(t, data); }

Result<Model> convert_model(const onnx::ModelProto& proto, const std::string& name, const DataFolder& data) {
  if (!proto.has_graph()) return invalid_model("'" + name + "' has no graph (is it an ONNX model?)");
  Ctx ctx;
  ctx.model_name = name;
  ctx.data = data;
  const std::string where = "'" + name + "': ";
  if (proto.ir_version() < kMinIrVersion || proto.ir_version() > kMaxIrVersion)
    return invalid_model(where + "IR version " + std::to_string(proto.ir_version()) + " is not supported (bulkhead reads IR " +
                         std::to_string(kMinIrVersion) + " to " + std::to_string(kMaxIrVersion) + ")");
  if (proto.opset_import_size() == 0) return invalid_model(where + "the model imports no opset (opset_import is empty)");
  for (const auto& os : proto.opset_import()) {
    const std::string domain = norm_domain(os.domain());
    const std::string shown = domain.empty() ? "ai.onnx" : printable(domain);
    if (!ctx.opsets.emplace(domain, static_cast<int>(os.version())).second)
      return invalid_model(where + "opset of domain '" + shown + "' imported twice");
    for (const auto& k : kKnownOpsets)
      if (domain == k.domain && (os.version() < 1 || os.version() > k.max_version))
        return invalid_model(where + "opset " + std::to_string(os.version()) + " of domain '" + shown +
                             "' is not supported (bulkhead implements versions 1 to " + std::to_string(k.max_version) + ")");
    if (os.version() < 1 || os.version() > INT32_MAX)
      return invalid_model(where + "opset " + std::to_string(os.version()) + " of domain '" + shown + "' is not a valid version");
  }
  if (proto.functions_size() > 0) {
    // Model-local functions: nodes that call them are reported as unsupported operators.
  }
  Model m;
  m.ir_version = proto.ir_version();
  m.opsets = ctx.opsets;
  m.producer = proto.producer_name();
  m.path = name;

  // The ONNX library's shape inference (libonnx 1.12) is not used: it knows opsets up
  // to 17 only and crashes (SIGSEGV, not an exception) on some valid newer models, and a
  // runtime must not crash on a model. bulkhead's own (ir/infer.h) fills in the types and
  // the shapes it can decide; kernels still compute shapes at run time.
  BH_ASSIGN_OR_RETURN(m.graph, convert_graph(proto.graph(), ctx));
  Status inferred = infer_shapes(*m.graph, m);
  if (!inferred.is_ok()) return inferred.with_context("'" + name + "': ");
  if (has_gradient_nodes(*m.graph)) {
    // Gradient becomes ordinary nodes (ir/gradient.h), which are then sorted and inferred.
    auto opset = m.opsets.find("");
    BH_RETURN_IF_ERROR(expand_gradients(*m.graph, opset == m.opsets.end() ? 0 : opset->second).with_context(where));
    BH_RETURN_IF_ERROR(topo_sort(*m.graph, where));
    inferred = infer_shapes(*m.graph, m);
    if (!inferred.is_ok()) return inferred.with_context("'" + name + "': ");
  }
  return m;
}

Result<Model> load_model_from_bytes(const void* data, size_t size, const std::string& name, const DataFolder& folder) {
  onnx::ModelProto proto;
  if (size == 0) return invalid_model("'" + name + "' is empty, not an ONNX model");
  if (!parse_large(proto, data, size))
    return invalid_model("'" + name + "' is not a valid ONNX model (protobuf parse failed; truncated or not ONNX?)");
  return convert_model(proto, name, folder);
}

Result<Model> load_model(const std::string& path, uint64_t max_file_bytes) {
  BH_ASSIGN_OR_RETURN(FileBytes bytes, FileBytes::read(path, max_file_bytes, "model"));
  if (bytes.size() > static_cast<size_t>(INT32_MAX))
    return invalid_model("'" + path + "' is " + io::format_bytes(bytes.size()) +
                         ": an ONNX file over 2 GiB must keep its weights as external data");
  return load_model_from_bytes(bytes.data(), bytes.size(), path, DataFolder{folder_of(path), max_file_bytes});
}

namespace {
Result<Value> value_from_sequence(const onnx::SequenceProto& s, const DataFolder& data);
Result<Value> value_from_optional(const onnx::OptionalProto& o, const DataFolder& data) {
  Value v;
  v.is_optional = true;
  if (o.elem_type() == onnx::OptionalProto::TENSOR && o.has_tensor_value()) {
    BH_ASSIGN_OR_RETURN(Tensor t, convert_tensor(o.tensor_value(), data));
    v = Value(std::move(t));
  } else if (o.elem_type() == onnx::OptionalProto::SEQUENCE && o.has_sequence_value()) {
    BH_ASSIGN_OR_RETURN(v, value_from_sequence(o.sequence_value(), data));
  }
  v.is_optional = true;
  return v;
}
Result<Value> value_from_sequence(const onnx::SequenceProto& s, const DataFolder& data) {
  if (s.elem_type() != onnx::SequenceProto::TENSOR && s.elem_type() != onnx::SequenceProto::UNDEFINED)
    return unsupported("sequence '" + s.name() + "': only sequences of tensors are supported");
  std::vector<Tensor> items;
  DataType dt = DataType::kUndefined;
  for (const auto& t : s.tensor_values()) {
    BH_ASSIGN_OR_RETURN(Tensor x, convert_tensor(t, data));
    dt = x.dtype();
    items.push_back(std::move(x));
  }
  return Value::make_sequence(std::move(items), dt);
}
}  // namespace

Result<Value> load_value_pb(const std::string& path, char hint, uint64_t max_file_bytes) {
  BH_ASSIGN_OR_RETURN(FileBytes bytes, FileBytes::read(path, max_file_bytes, "tensor file"));
  if (bytes.size() > static_cast<size_t>(INT32_MAX)) return invalid_model("'" + path + "' is over 2 GiB");
  const DataFolder dir{folder_of(path), max_file_bytes};
  if (hint == 's') {
    onnx::SequenceProto s;
    if (!parse_large(s, bytes.data(), bytes.size())) return invalid_model("'" + path + "' is not a SequenceProto");
    return value_from_sequence(s, dir);
  }
  if (hint == 'o') {
    onnx::OptionalProto o;
    if (!parse_large(o, bytes.data(), bytes.size())) return invalid_model("'" + path + "' is not an OptionalProto");
    return value_from_optional(o, dir);
  }
  onnx::TensorProto t;
  if (!parse_large(t, bytes.data(), bytes.size())) return invalid_model("'" + path + "' is not a TensorProto");
  BH_ASSIGN_OR_RETURN(Tensor x, convert_tensor(t, dir));
  return Value(std::move(x));
}

}  // namespace bulkhead::ir
