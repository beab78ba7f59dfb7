// Channels-last chains of int8 convolutions (layout.h, nhwc_int8_chains).
#include <cstring>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "backend/qlinear_conv_transpose.h"
#include "backend/qlinear_pool.h"
#include "exec/graph_constants.h"
#include "exec/layout.h"
#include "exec/outer_refs.h"

namespace bulkhead::exec {
namespace {

using ir::AttrType;
using ir::Dim;
using ir::Graph;
using ir::Node;

// kPool: an int8 MaxPool (its QDQ pair folded away, exec/qdq_eltwise.h) or
// QLinearGlobalAveragePool; it follows its input's layout like kUnary, but is told so
// (_layout), since a window is not element-wise.
enum class Kind { kNone, kConv, kUnary, kBinary, kPool };

ir::Attribute str_attr(const char* s) {
  ir::Attribute a;
  a.type = AttrType::kString;
  a.s = s;
  return a;
}

class NhwcPlanner {
 public:
  NhwcPlanner(Graph& g, bool input_defaults_constant) : g_(g), constants_(g, input_defaults_constant) {}

  int run() {
    for (const auto& o : g_.outputs) pinned_.insert(o.name);
    collect_outer_refs(g_, pinned_);
    for (size_t i = 0; i < g_.nodes.size(); ++i)
      for (const auto& in : g_.nodes[i].inputs)
        if (!in.empty()) consumers_[in].push_back(i);

    // Decide in topological order: a QLinearConv reads X as it comes and writes Y
    // channels-last when a reader would take it so; the element-wise kinds run
    // channels-last when an activation input is (a plain operand of the same shape is
    // converted, a [N, C, 1, 1] one is the same bytes as [N, 1, 1, C]).
    x_nhwc_.assign(g_.nodes.size(), false);
    y_nhwc_.assign(g_.nodes.size(), false);
    for (size_t i = 0; i < g_.nodes.size(); ++i) {
      const Node& n = g_.nodes[i];
      const Kind k = kind_of(n);
      if (k == Kind::kNone) continue;
      const std::string& out = n.outputs[0];
      const bool out_ok = !pinned_.count(out) && shape4(out);
      if (k == Kind::kConv) {
        x_nhwc_[i] = nhwc_.count(n.inputs[0]) != 0;
        y_nhwc_[i] = out_ok && wanted(out);
      } else if (out_ok && inputs_allow(n, k)) {
        x_nhwc_[i] = y_nhwc_[i] = true;
      }
      if (y_nhwc_[i]) nhwc_.insert(out);
    }

    std::vector<Node> out_nodes;
    out_nodes.reserve(g_.nodes.size() + 16);
    std::unordered_set<std::string> plain_made, nhwc_made, flat_made;
    auto convert = [&](const char* op, const std::string& in, const std::string& out) {
      Node c;
      c.name = out + "/" + op;
      c.op_type = op;
      c.domain = kLayoutDomain;
      c.opset = 1;
      c.inputs = {in};
      c.outputs = {out};
      out_nodes.push_back(std::move(c));
      ++conversions_;
    };
    auto ensure_plain = [&](const std::string& v) {
      if (!nhwc_.count(v) || !plain_made.insert(v).second) return;
      convert("FromNhwc", nname(v), v);
    };
    auto ensure_nhwc = [&](const std::string& v) {
      if (nhwc_.count(v) || !nhwc_made.insert(v).second) return;
      add_nhwc_info(v);
      convert("ToNhwc", v, nname(v));
    };
    // A [N, C, 1, 1] value as [N, 1, 1, C]: the same bytes, read through a Reshape.
    auto ensure_flat = [&](const std::string& v) {
      const std::string fn = v + "__n11c";
      if (!flat_made.insert(v).second) return fn;
      const auto& s = *shape4(v);
      ir::Attribute a;
      a.type = AttrType::kTensor;
      Tensor shape = Tensor::host(DataType::kInt64, {4});
      shape.data<int64_t>()[0] = s[0].fixed() ? s[0].value : 0;  // 0: copy N from the input
      shape.data<int64_t>()[1] = 1;
      shape.data<int64_t>()[2] = 1;
      shape.data<int64_t>()[3] = s[1].value;
      const std::string sn = fn + "_shape";
      g_.initializers[sn] = shape;
      Node r;
      r.name = fn + "/Reshape";
      r.op_type = "Reshape";
      r.opset = 13;
      r.inputs = {v, sn};
      r.outputs = {fn};
      out_nodes.push_back(std::move(r));
      ir::ValueInfo vi;
      vi.name = fn;
      vi.dtype = g_.info(v)->dtype;
      vi.shape = std::vector<Dim>{s[0], Dim{1, ""}, Dim{1, ""}, s[1]};
      g_.value_info[fn] = vi;
      return fn;
    };

    for (size_t i = 0; i < g_.nodes.size(); ++i) {
      Node n = std::move(g_.nodes[i]);
      const Kind k = kind_of(n);
      if (!x_nhwc_[i] && !y_nhwc_[i]) {
        for (const auto& in : n.inputs)
          if (!in.empty()) ensure_plain(in);
        out_nodes.push_back(std::move(n));
        continue;
      }
      ++nodes_;
      const std::string out = n.outputs[0];
      if (k == Kind::kConv) {
        if (x_nhwc_[i]) {
          n.inputs[0] = nname(n.inputs[0]);
          n.attrs["_x_layout"] = str_attr(kNhwc);
        }
        for (size_t j = 1; j < n.inputs.size(); ++j)
          if (!n.inputs[j].empty()) ensure_plain(n.inputs[j]);
        if (y_nhwc_[i]) n.attrs["_y_layout"] = str_attr(kNhwc);
      } else {
        for (size_t j = 0; j < n.inputs.size(); ++j) {
          std::string& in = n.inputs[j];
          if (in.empty() || !activation(n, k, j)) continue;
          switch (k == Kind::kBinary ? operand(in) : Operand::kNhwc) {
            case Operand::kNhwc: in = nname(in); break;
            case Operand::kVector: in = ensure_flat(in); break;
            case Operand::kConstant: in = permuted_constant(in); break;
            case Operand::kConvert:
              ensure_nhwc(in);
              in = nname(in);
              break;
            default: break;  // a scalar constant
          }
        }
      }
      if (k == Kind::kPool) n.attrs["_layout"] = str_attr(kNhwc);
      if (y_nhwc_[i]) {
        add_nhwc_info(out);
        n.outputs[0] = nname(out);
      }
      out_nodes.push_back(std::move(n));
      if (!y_nhwc_[i]) continue;
      // Plain readers get `out` from a conversion right after its producer.
      bool plain_reader = false;
      for (size_t j : consumers_[out])
        if (!reads_nhwc(j, out)) plain_reader = true;
      if (plain_reader) ensure_plain(out);
    }
    g_.nodes = std::move(out_nodes);
    return nodes_;
  }

  int conversions() const { return conversions_; }

 private:
  static std::string nname(const std::string& v) { return v + "__nhwc"; }

  // A constant operand as channels-last: padded to rank 4 with leading 1s, then stored
  // [N, H, W, C]; made once per constant.
  std::string permuted_constant(const std::string& v) {
    const std::string name = v + "__nhwc_const";
    if (g_.initializers.count(name)) return name;
    const Tensor& t = *constant(v);
    Shape s4(4 - t.rank(), 1);
    s4.insert(s4.end(), t.shape().begin(), t.shape().end());
    Tensor p = Tensor::host(t.dtype(), {s4[0], s4[2], s4[3], s4[1]});
    const size_t es = dtype_size(t.dtype());
    const auto* src = static_cast<const uint8_t*>(t.raw());
    auto* dst = static_cast<uint8_t*>(p.raw());
    for (int64_t n = 0; n < s4[0]; ++n)
      for (int64_t c = 0; c < s4[1]; ++c)
        for (int64_t h = 0; h < s4[2]; ++h)
          for (int64_t w = 0; w < s4[3]; ++w)
            std::memcpy(dst + (((n * s4[2] + h) * s4[3] + w) * s4[1] + c) * es,
                        src + (((n * s4[1] + c) * s4[2] + h) * s4[3] + w) * es, es);
    g_.initializers[name] = p;
    return name;
  }

  // The declared rank-4 shape of `v` (uint8, int8 or float32) with a fixed channel count.
  const std::vector<Dim>* shape4(const std::string& v) const {
    const ir::ValueInfo* vi = g_.info(v);
    if (!vi || vi->type != ir::ValueType::kTensor || !vi->shape || vi->shape->size() != 4 || !(*vi->shape)[1].fixed())
      return nullptr;
    if (vi->dtype != DataType::kUInt8 && vi->dtype != DataType::kInt8 && vi->dtype != DataType::kFloat32) return nullptr;
    if (g_.initializers.count(v)) return nullptr;
    return &*vi->shape;
  }

  void add_nhwc_info(const std::string& v) {
    const std::vector<Dim>& s = *shape4(v);
    ir::ValueInfo vi;
    vi.name = nname(v);
    vi.dtype = g_.info(v)->dtype;
    vi.shape = std::vector<Dim>{s[0], s[2], s[3], s[1]};
    g_.value_info[vi.name] = vi;
  }

  const Tensor* constant(const std::string& v) const { return constants_.get(v); }
  bool scalar_constant(const std::string& v) const {
    const Tensor* t = constant(v);
    return t && t->numel() == 1 && t->rank() <= 4;
  }
  // A value of shape [N, C, 1, 1] (not a constant): the same bytes in both layouts.
  bool channel_vector(const std::string& v) const {
    const auto* s = shape4(v);
    return s && (*s)[2].fixed() && (*s)[2].value == 1 && (*s)[3].fixed() && (*s)[3].value == 1;
  }

  static bool only_first_output(const Node& n) {
    for (size_t k = 1; k < n.outputs.size(); ++k)
      if (!n.outputs[k].empty()) return false;
    return !n.outputs.empty() && !n.outputs[0].empty();
  }

  // A window pool of one rank-4 int8 / uint8 input not yet given a layout: kPool.
  Kind int8_pool(const Node& n) const {
    if (n.inputs.size() != 1 || n.has_attr("_layout") || !shape4(n.inputs[0])) return Kind::kNone;
    const DataType xt = g_.info(n.inputs[0])->dtype;
    return xt == DataType::kUInt8 || xt == DataType::kInt8 ? Kind::kPool : Kind::kNone;
  }

  Kind kind_of(const Node& n) const {
    // The fused element-wise groups of QDQ models (exec/qdq_eltwise.h): element-wise too.
    if (n.domain == kLayoutDomain && n.op_type == "QLinearEltwise" && only_first_output(n)) {
      for (const auto& in : n.inputs)
        if (in.empty()) return Kind::kNone;
      // Of several inputs, every one an operand like a binary op's.
      return n.inputs.size() == 1 ? Kind::kUnary : Kind::kBinary;
    }
    // The QDQ pass's int8 global average pool: a window over the whole plane, told its layout.
    if (n.domain == kQLinearPoolDomain && n.op_type == kQLinearGlobalAveragePool && only_first_output(n))
      return int8_pool(n);
    const bool deconv = n.domain == kQLinearConvTransposeDomain && n.op_type == kQLinearConvTranspose;
    if ((!n.domain.empty() && !deconv) || !only_first_output(n) || n.inputs.empty() || n.inputs[0].empty())
      return Kind::kNone;
    const std::string& op = n.op_type;
    // QLinearConvTranspose reads and writes either layout as QLinearConv does.
    if (op == "QLinearConv" || deconv) {
      const auto* x = shape4(n.inputs[0]);
      if (!x || n.inputs.size() < 8) return Kind::kNone;
      const DataType xt = g_.info(n.inputs[0])->dtype;
      if (xt != DataType::kUInt8 && xt != DataType::kInt8) return Kind::kNone;
      const Tensor* w = constant(n.inputs[3]);
      if (!w || w->rank() != 4) return Kind::kNone;
      for (size_t j = 1; j < n.inputs.size(); ++j)
        if (!n.inputs[j].empty() && !constant(n.inputs[j])) return Kind::kNone;
      return Kind::kConv;
    }
    if (op == "DequantizeLinear" || op == "QuantizeLinear") {
      // Per tensor: one scale and zero point for every element, whatever its layout.
      if (n.inputs.size() < 2 || !scalar_constant(n.inputs[1])) return Kind::kNone;
      if (n.inputs.size() > 2 && !n.inputs[2].empty() && !scalar_constant(n.inputs[2])) return Kind::kNone;
      return Kind::kUnary;
    }
    if (op == "Relu" || op == "LeakyRelu" || op == "Sigmoid" || op == "HardSigmoid" || op == "HardSwish" || op == "Tanh")
      return n.inputs.size() == 1 ? Kind::kUnary : Kind::kNone;
    if (op == "MaxPool") return int8_pool(n);  // the CPU kernel's channels-last path
    if (op == "Clip") {
      for (size_t k = 1; k < n.inputs.size(); ++k)
        if (!n.inputs[k].empty() && !scalar_constant(n.inputs[k])) return Kind::kNone;
      return Kind::kUnary;
    }
    if ((op == "Add" || op == "Sub" || op == "Mul" || op == "Div" || (op == "Sum" && n.inputs.size() == 2)) &&
        n.inputs.size() == 2 && !n.inputs[1].empty())
      return Kind::kBinary;
    return Kind::kNone;
  }

  // Whether input j of a follow-kind node is an activation (else a constant parameter).
  static bool activation(const Node& n, Kind k, size_t j) { return k == Kind::kBinary || j == 0; }

  // How a binary node's operand would be read channels-last. Numpy broadcasting commutes
  // with permuting both operands' dimensions alike, so any rank-4 operand may be given
  // channels-last, whatever the shapes: a channels-last value as it is, a one-element
  // constant as it is, another constant permuted once (padded to rank 4 first), a
  // [N, C, 1, 1] value through a Reshape (the same bytes), any other rank-4 value
  // converted (ToNhwc).
  enum class Operand { kNo, kNhwc, kScalar, kConstant, kVector, kConvert };
  Operand operand(const std::string& v) const {
    if (scalar_constant(v)) return Operand::kScalar;
    if (const Tensor* t = constant(v)) return t->rank() <= 4 && t->on_host() ? Operand::kConstant : Operand::kNo;
    if (nhwc_.count(v)) return Operand::kNhwc;
    if (!shape4(v)) return Operand::kNo;
    return channel_vector(v) ? Operand::kVector : Operand::kConvert;
  }

  bool inputs_allow(const Node& n, Kind k) const {
    if (k == Kind::kUnary || k == Kind::kPool) return nhwc_.count(n.inputs[0]) != 0;
    bool any_nhwc = false;
    for (const std::string& v : n.inputs) {
      const Operand o = operand(v);
      if (o == Operand::kNo) return false;
      any_nhwc = any_nhwc || o == Operand::kNhwc;
    }
    return any_nhwc;
  }

  // Whether node `j` (decided) reads `v` channels-last.
  bool reads_nhwc(size_t j, const std::string& v) const {
    if (!x_nhwc_[j] && !y_nhwc_[j]) return false;
    const Node& n = g_.nodes[j];
    if (kind_of(n) == Kind::kConv) return x_nhwc_[j] && n.inputs[0] == v;
    return true;  // a follow-kind node reads its activations channels-last
  }

  // Whether some reader of `v` would take it channels-last (so a QLinearConv writes it so).
  bool wanted(const std::string& v) const {
    auto it = consumers_.find(v);
    if (it == consumers_.end()) return false;
    for (size_t j : it->second) {
      const Node& n = g_.nodes[j];
      switch (kind_of(n)) {
        case Kind::kConv:
          if (n.inputs[0] == v) return true;
          break;
        case Kind::kUnary:
        case Kind::kPool:
          if (n.inputs[0] == v) return true;
          break;
        case Kind::kBinary: {
          // Every other operand can be read channels-last too.
          bool all = true;
          for (const std::string& other : n.inputs) all = all && (other == v || operand(other) != Operand::kNo);
          if (all) return true;
          break;
        }
        default:
          break;
      }
    }
    return false;
  }

  Graph& g_;
  GraphConstants constants_;  // made before the rewrite adds any (permuted ones are looked up by name)
  std::unordered_set<std::string> pinned_, nhwc_;
  std::vector<bool> x_nhwc_, y_nhwc_;
  std::unordered_map<std::string, std::vector<size_t>> consumers_;
  int nodes_ = 0, conversions_ = 0;
};

}  // namespace

LayoutStats nhwc_int8_chains(ir::Graph& g, bool input_defaults_constant) {
  NhwcPlanner p(g, input_defaults_constant);
  LayoutStats s;
  s.nhwc_nodes = p.run();
  s.conversions = p.conversions();
  return s;
}

}  // namespace bulkhead::exec
