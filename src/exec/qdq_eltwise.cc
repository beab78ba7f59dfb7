#include "exec/qdq_eltwise.h"

#include <cmath>
#include <limits>
#include <optional>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "backend/qlinear_pool.h"
#include "exec/graph_constants.h"
#include "exec/outer_refs.h"

namespace bulkhead::exec {
namespace {

using ir::AttrType;
using ir::Graph;
using ir::Node;
using Op = bulkhead::QLinearEltwiseOp;

// A float or int attribute (`t` says which of fv, iv it holds).
ir::Attribute scalar_attr(AttrType t, float fv, int64_t iv) {
  ir::Attribute a;
  a.type = t;
  a.f = fv;
  a.i = iv;
  return a;
}

class Fuser {
 public:
  Fuser(Graph& g, bool input_defaults_constant) : g_(g), constants_(g, input_defaults_constant) {}

  int run() {
    for (const auto& o : g_.outputs) pinned_.insert(o.name);
    collect_outer_refs(g_, pinned_);
    for (size_t i = 0; i < g_.nodes.size(); ++i) {
      const Node& n = g_.nodes[i];
      for (const auto& in : n.inputs)
        if (!in.empty()) consumers_[in].push_back(i);
      for (const auto& out : n.outputs)
        if (!out.empty()) producer_[out] = i;
    }
    dead_.assign(g_.nodes.size(), false);
    std::unordered_map<size_t, std::vector<Node>> replacement;  // at the QuantizeLinear's place, in order
    int fused = 0;
    for (size_t qi = 0; qi < g_.nodes.size(); ++qi) {
      if (dead_[qi]) continue;
      std::vector<Node> before;  // nodes the fused one reads, made with it
      std::optional<Node> f = try_fuse(qi, &before);
      if (!f) continue;
      before.push_back(std::move(*f));
      replacement.emplace(qi, std::move(before));
      ++fused;
    }
    if (!fused) return 0;
    std::vector<Node> out;
    out.reserve(g_.nodes.size());
    for (size_t i = 0; i < g_.nodes.size(); ++i) {
      if (auto r = replacement.find(i); r != replacement.end()) {
        for (Node& n : r->second) out.push_back(std::move(n));
      } else if (!dead_[i]) {
        out.push_back(std::move(g_.nodes[i]));
      }
    }
    g_.nodes = std::move(out);
    return fused;
  }

 private:
  struct Program {
    std::vector<std::string> inputs;        // the quantised tensors, register order
    std::vector<float> scales;
    std::vector<int64_t> zeros;
    std::vector<int64_t> input_regs;        // the register each input is dequantised into
    std::vector<int64_t> code;
    std::vector<float> consts;
    std::vector<size_t> nodes;              // float nodes fused (not the DQs)
    std::vector<size_t> dqs;                // DequantizeLinear nodes read
    std::unordered_map<std::string, int> reg;  // value -> register
    int next = 0;
  };

  const Tensor* constant(const std::string& v) const { return constants_.get(v); }
  std::optional<float> scalar_f32(const std::string& v) const {
    const Tensor* t = constant(v);
    if (!t || !t->on_host() || t->numel() != 1 || t->dtype() != DataType::kFloat32) return std::nullopt;
    return t->data<float>()[0];
  }
  // A per-tensor zero point: absent (0), or one uint8 / int8 value; its type.
  bool zero_point(const Node& n, size_t i, int64_t* z, DataType* t) const {
    if (n.inputs.size() <= i || n.inputs[i].empty()) {
      *z = 0;
      *t = DataType::kUndefined;
      return true;
    }
    const Tensor* zt = constant(n.inputs[i]);
    if (!zt || !zt->on_host() || zt->numel() != 1) return false;
    if (zt->dtype() == DataType::kUInt8) *z = zt->data<uint8_t>()[0];
    else if (zt->dtype() == DataType::kInt8) *z = zt->data<int8_t>()[0];
    else return false;
    *t = zt->dtype();
    return true;
  }

  // A DequantizeLinear of one 8-bit tensor with one scale and zero point (constants).
  struct Dq {
    float scale = 0;
    int64_t zero = 0;
    DataType type = DataType::kUndefined;  // of the quantised tensor
  };
  std::optional<Dq> per_tensor_dq(const Node& n) const {
    if (n.op_type != "DequantizeLinear" || !n.domain.empty() || n.inputs.size() < 2 || n.outputs.size() != 1 ||
        n.has_attr("block_size"))
      return std::nullopt;
    if (n.has_attr("output_dtype") && n.attr_int("output_dtype", 1) != 1) return std::nullopt;
    auto s = scalar_f32(n.inputs[1]);
    Dq dq;
    DataType zt = DataType::kUndefined;
    if (!s || !zero_point(n, 2, &dq.zero, &zt)) return std::nullopt;
    dq.scale = *s;
    const ir::ValueInfo* xi = g_.info(n.inputs[0]);
    dq.type = zt != DataType::kUndefined ? zt : xi ? xi->dtype : DataType::kUndefined;
    if (dq.type != DataType::kUInt8 && dq.type != DataType::kInt8) return std::nullopt;
    if (xi && xi->dtype != dq.type) return std::nullopt;
    return dq;
  }

  // DequantizeLinear node `di` goes too when nothing but dead nodes and `replaced` (the
  // node a fused one takes the place of) reads it.
  void drop_if_unread(size_t di, size_t replaced) {
    bool used = pinned_.count(g_.nodes[di].outputs[0]) != 0;
    for (size_t c : consumers_[g_.nodes[di].outputs[0]]) used = used || (c != replaced && !dead_[c]);
    if (!used) dead_[di] = true;
  }

  // The group ending in QuantizeLinear node `qi`, compiled; nothing when it does not fit.
  // Nodes the result reads that are made for it go to `*before`.
  std::optional<Node> try_fuse(size_t qi, std::vector<Node>* before) {
    const Node& q = g_.nodes[qi];
    if (q.op_type != "QuantizeLinear" || !q.domain.empty() || q.inputs.size() < 2 || q.outputs.size() != 1 ||
        q.outputs[0].empty() || q.has_attr("precision") || q.has_attr("block_size"))
      return std::nullopt;
    auto ys = scalar_f32(q.inputs[1]);
    int64_t zy = 0;
    DataType yt = DataType::kUndefined;
    if (!ys || !zero_point(q, 2, &zy, &yt)) return std::nullopt;
    if (yt == DataType::kUndefined) {
      const int64_t od = q.attr_int("output_dtype", 0);
      if (od != 0 && od != 2 && od != 3) return std::nullopt;  // only uint8 (2) / int8 (3)
      yt = od == 3 ? DataType::kInt8 : DataType::kUInt8;
    } else if (q.has_attr("output_dtype") && q.attr_int("output_dtype", 0) != (yt == DataType::kUInt8 ? 2 : 3)) {
      return std::nullopt;
    }
    if (std::optional<Node> m = try_on_quantized(q, *ys, zy, yt, before)) return m;
    if (std::optional<Node> m = try_global_average_pool(q, *ys, zy, yt)) return m;
    Program p;
    std::optional<int> result = compile(q.inputs[0], p, 0);
    if (!result) return std::nullopt;
    // Every value the group computes is read only inside it (or by the QuantizeLinear).
    std::unordered_set<size_t> members(p.nodes.begin(), p.nodes.end());
    members.insert(qi);
    for (size_t ni : p.nodes)
      for (const auto& out : g_.nodes[ni].outputs) {
        if (out.empty()) continue;
        if (pinned_.count(out)) return std::nullopt;
        for (size_t c : consumers_[out])
          if (!members.count(c)) return std::nullopt;
      }
    Node f = eltwise_node(q.name, p, *ys, zy, yt, *result, q.outputs[0]);
    for (size_t ni : p.nodes) dead_[ni] = true;
    // A DequantizeLinear nothing else reads goes too.
    for (size_t di : p.dqs) drop_if_unread(di, qi);
    return f;
  }

  // The QLinearEltwise node running program `p` (its result in register `result`),
  // writing `out` quantised with (ys, zy, yt).
  static Node eltwise_node(const std::string& name, const Program& p, float ys, int64_t zy, DataType yt, int result,
                           const std::string& out) {
    Node f;
    f.name = name;
    f.op_type = "QLinearEltwise";
    f.domain = "bulkhead";
    f.opset = 1;
    f.inputs = p.inputs;
    f.outputs = {out};
    auto ints = [](std::vector<int64_t> v) {
      ir::Attribute a;
      a.type = AttrType::kInts;
      a.ints = std::move(v);
      return a;
    };
    auto floats = [](std::vector<float> v) {
      ir::Attribute a;
      a.type = AttrType::kFloats;
      a.floats = std::move(v);
      return a;
    };
    f.attrs["_x_scales"] = floats(p.scales);
    f.attrs["_x_zero_points"] = ints(p.zeros);
    f.attrs["_x_registers"] = ints(p.input_regs);
    f.attrs["_y_scale"] = scalar_attr(AttrType::kFloat, ys, 0);
    f.attrs["_y_zero_point"] = scalar_attr(AttrType::kInt, 0, zy);
    f.attrs["_y_type"] = scalar_attr(AttrType::kInt, 0, static_cast<int64_t>(yt));
    f.attrs["_code"] = ints(p.code);
    f.attrs["_consts"] = floats(p.consts);
    f.attrs["_result"] = scalar_attr(AttrType::kInt, 0, result);
    return f;
  }

  // DequantizeLinear → op → QuantizeLinear, where every value the op writes is one of the
  // values it reads (a copy, a rearrangement, the nearest pixel of a Resize) or their
  // maximum (MaxPool), with one scale, zero point and type on both sides (a QDQ model's
  // pooling after its stem, the Reshape / Transpose / Resize / Concat between its int8
  // layers): dequantising is increasing, so the op of dequantised values is the
  // dequantised op, and quantising that again with the same parameters gives the quantised
  // value back exactly ((v - z)·s / s is within a few ulps of v - z). The op then runs on
  // the quantised tensor itself: one pass over a quarter of the bytes instead of three
  // passes in float32.
  //
  // A Concat whose inputs are quantised with other parameters than its output reads each
  // such input requantised to the output's (a QLinearEltwise of one input and no op, added
  // to `*before`): the same values DequantizeLinear → QuantizeLinear gives.
  std::optional<Node> try_on_quantized(const Node& q, float ys, int64_t zy, DataType yt, std::vector<Node>* before) {
    if (!(ys > 0) || !std::isfinite(ys)) return std::nullopt;
    auto mp = producer_.find(q.inputs[0]);
    if (mp == producer_.end()) return std::nullopt;
    const size_t mi = mp->second;
    const Node& m = g_.nodes[mi];
    if (!m.domain.empty() || dead_[mi] || m.inputs.empty() || m.inputs[0].empty() || m.outputs.empty()) return std::nullopt;
    // Ops that only move values read their data from input 0; Concat from every input.
    static const std::unordered_set<std::string> movers = {
        "Reshape", "Flatten", "Squeeze", "Unsqueeze", "Transpose", "Identity", "Slice",
        "Gather",  "Expand",  "Tile",    "DepthToSpace", "SpaceToDepth"};
    const bool concat = m.op_type == "Concat";
    if (m.op_type == "MaxPool") {
      if (m.inputs.size() != 1) return std::nullopt;
    } else if (m.op_type == "Resize") {
      // Nearest pixels only; tf_crop_and_resize writes extrapolation_value (a float) outside.
      if (m.attr_string("mode", "nearest") != "nearest" ||
          m.attr_string("coordinate_transformation_mode", "half_pixel") == "tf_crop_and_resize")
        return std::nullopt;
    } else if (!concat && !movers.count(m.op_type)) {
      return std::nullopt;
    }
    for (size_t k = 1; k < m.outputs.size(); ++k)
      if (!m.outputs[k].empty()) return std::nullopt;  // MaxPool's Indices: positions, not values
    if (pinned_.count(m.outputs[0]) || consumers_[m.outputs[0]].size() != 1) return std::nullopt;
    const size_t data_inputs = concat ? m.inputs.size() : 1;
    std::vector<size_t> dqs;
    std::vector<std::optional<Dq>> params;
    for (size_t k = 0; k < data_inputs; ++k) {
      auto dp = m.inputs[k].empty() ? producer_.end() : producer_.find(m.inputs[k]);
      if (dp == producer_.end() || dead_[dp->second]) return std::nullopt;
      std::optional<Dq> dq = per_tensor_dq(g_.nodes[dp->second]);
      if (!dq) return std::nullopt;
      const bool same = dq->scale == ys && dq->zero == zy && dq->type == yt;
      if (!same && !concat) return std::nullopt;
      dqs.push_back(dp->second);
      params.push_back(dq);
    }
    // The other inputs (shapes, indices, scales) are read as they are: none may be one of
    // the dequantised values.
    for (size_t k = data_inputs; k < m.inputs.size(); ++k)
      for (size_t di : dqs)
        if (m.inputs[k] == g_.nodes[di].outputs[0]) return std::nullopt;
    Node f = m;
    f.name = q.name;
    f.outputs = {q.outputs[0]};
    for (size_t k = 0; k < data_inputs; ++k) {
      const Node& d = g_.nodes[dqs[k]];
      f.inputs[k] = d.inputs[0];
      if (params[k]->scale == ys && params[k]->zero == zy && params[k]->type == yt) continue;
      // Requantised to the output's parameters first.
      Program p;
      p.inputs = {d.inputs[0]};
      p.scales = {params[k]->scale};
      p.zeros = {params[k]->zero};
      p.input_regs = {0};
      const std::string v = fresh(d.inputs[0] + "_requantized");
      before->push_back(eltwise_node(q.name + "/requantize" + std::to_string(k), p, ys, zy, yt, 0, v));
      if (const ir::ValueInfo* vi = g_.info(d.inputs[0])) {
        ir::ValueInfo nv = *vi;
        nv.name = v;
        nv.dtype = yt;
        g_.value_info[v] = nv;
      }
      f.inputs[k] = v;
    }
    dead_[mi] = true;
    for (size_t di : dqs) drop_if_unread(di, mi);
    return f;
  }

  // DequantizeLinear → GlobalAveragePool / AveragePool → QuantizeLinear: one
  // QLinearGlobalAveragePool / QLinearAveragePool (backend/qlinear_pool.h) over the
  // quantised tensor, within one step of the float path.
  std::optional<Node> try_global_average_pool(const Node& q, float ys, int64_t zy, DataType yt) {
    if (!(ys > 0) || !std::isfinite(ys)) return std::nullopt;
    auto mp = producer_.find(q.inputs[0]);
    if (mp == producer_.end()) return std::nullopt;
    const size_t mi = mp->second;
    const Node& m = g_.nodes[mi];
    const bool global = m.op_type == "GlobalAveragePool";
    if ((!global && m.op_type != "AveragePool") || !m.domain.empty() || dead_[mi] || m.inputs.size() != 1 ||
        m.inputs[0].empty() || m.outputs.size() != 1 || pinned_.count(m.outputs[0]) || consumers_[m.outputs[0]].size() != 1)
      return std::nullopt;
    auto dp = producer_.find(m.inputs[0]);
    if (dp == producer_.end() || dead_[dp->second]) return std::nullopt;
    const std::optional<Dq> dq = per_tensor_dq(g_.nodes[dp->second]);
    if (!dq || !(dq->scale > 0) || !std::isfinite(dq->scale)) return std::nullopt;
    Node f;
    if (!global) f.attrs = m.attrs;  // AveragePool's geometry
    f.name = q.name;
    f.op_type = global ? kQLinearGlobalAveragePool : kQLinearAveragePool;
    f.domain = kQLinearPoolDomain;
    f.opset = 1;
    f.inputs = {g_.nodes[dp->second].inputs[0]};
    f.outputs = {q.outputs[0]};
    f.attrs["_x_scale"] = scalar_attr(AttrType::kFloat, dq->scale, 0);
    f.attrs["_x_zero_point"] = scalar_attr(AttrType::kInt, 0, dq->zero);
    f.attrs["_y_scale"] = scalar_attr(AttrType::kFloat, ys, 0);
    f.attrs["_y_zero_point"] = scalar_attr(AttrType::kInt, 0, zy);
    f.attrs["_y_type"] = scalar_attr(AttrType::kInt, 0, static_cast<int64_t>(yt));
    dead_[mi] = true;
    drop_if_unread(dp->second, mi);
    return f;
  }

  // A value name not used in the graph, from `base`.
  std::string fresh(const std::string& base) {
    for (int i = 0;; ++i) {
      std::string n = base + "__bh_q" + std::to_string(i);
      if (!producer_.count(n) && !consumers_.count(n) && !g_.initializers.count(n) && !g_.info(n)) return n;
    }
  }

  int add_const(Program& p, float v) {
    p.consts.push_back(v);
    return -static_cast<int>(p.consts.size());  // -(index + 1)
  }

  // The register holding `v`, emitting what computes it; nothing when `v` is not the result
  // of a fusable group.
  std::optional<int> compile(const std::string& v, Program& p, int depth) {
    if (auto it = p.reg.find(v); it != p.reg.end()) return it->second;
    if (depth > 64) return std::nullopt;
    auto pi = producer_.find(v);
    if (pi == producer_.end()) return std::nullopt;
    const size_t ni = pi->second;
    const Node& n = g_.nodes[ni];
    if (!n.domain.empty() || dead_[ni]) return std::nullopt;
    auto new_reg = [&]() -> std::optional<int> {
      if (p.next >= kQLinearEltwiseMaxRegisters) return std::nullopt;
      p.reg[v] = p.next;
      return p.next++;
    };
    if (n.op_type == "DequantizeLinear") {
      const std::optional<Dq> dq = per_tensor_dq(n);
      if (!dq) return std::nullopt;
      if (static_cast<int>(p.inputs.size()) >= kQLinearEltwiseMaxInputs) return std::nullopt;
      auto r = new_reg();
      if (!r) return std::nullopt;
      p.inputs.push_back(n.inputs[0]);
      p.input_regs.push_back(*r);
      p.scales.push_back(dq->scale);
      p.zeros.push_back(dq->zero);
      p.dqs.push_back(ni);
      return r;
    }
    if (n.outputs.size() != 1) return std::nullopt;
    const std::string& op = n.op_type;
    auto operand = [&](const std::string& in) -> std::optional<int> {
      if (auto c = scalar_f32(in)) return add_const(p, *c);
      return compile(in, p, depth + 1);
    };
    auto emit = [&](Op o, int a, int b) -> std::optional<int> {
      auto d = new_reg();
      if (!d) return std::nullopt;
      p.code.insert(p.code.end(), {static_cast<int64_t>(o), *d, a, b});
      p.nodes.push_back(ni);
      return d;
    };
    // Binary ops (Sum and Max / Min of two inputs too).
    static const std::unordered_map<std::string, Op> binary = {{"Add", Op::kAdd}, {"Sum", Op::kAdd}, {"Sub", Op::kSub},
                                                               {"Mul", Op::kMul}, {"Div", Op::kDiv}, {"Max", Op::kMax},
                                                               {"Min", Op::kMin}};
    if (auto b = binary.find(op); b != binary.end()) {
      if (n.inputs.size() != 2 || n.inputs[0].empty() || n.inputs[1].empty()) return std::nullopt;
      // Operands in order: inputs (DequantizeLinear) are compiled first when they appear.
      auto a0 = operand(n.inputs[0]);
      if (!a0) return std::nullopt;
      auto a1 = operand(n.inputs[1]);
      if (!a1) return std::nullopt;
      if (*a0 < 0 && *a1 < 0) return std::nullopt;  // both constants: not this pass's business
      return emit(b->second, *a0, *a1);
    }
    if (n.inputs.empty() || n.inputs[0].empty()) return std::nullopt;
    if (op == "Relu" && n.inputs.size() == 1) {
      auto a = compile(n.inputs[0], p, depth + 1);
      if (!a) return std::nullopt;
      return emit(Op::kRelu, *a, 0);
    }
    if (op == "HardSwish" && n.inputs.size() == 1) {
      auto a = compile(n.inputs[0], p, depth + 1);
      if (!a) return std::nullopt;
      return emit(Op::kHardSwish, *a, 0);
    }
    if ((op == "Sigmoid" || op == "Tanh") && n.inputs.size() == 1) {
      auto a = compile(n.inputs[0], p, depth + 1);
      if (!a) return std::nullopt;
      return emit(op == "Sigmoid" ? Op::kSigmoid : Op::kTanh, *a, 0);
    }
    if (op == "LeakyRelu" && n.inputs.size() == 1) {
      auto a = compile(n.inputs[0], p, depth + 1);
      if (!a) return std::nullopt;
      return emit(Op::kLeakyRelu, *a, add_const(p, n.attr_float("alpha", 0.01f)));
    }
    if (op == "HardSigmoid" && n.inputs.size() == 1) {
      auto a = compile(n.inputs[0], p, depth + 1);
      if (!a) return std::nullopt;
      const int c = add_const(p, n.attr_float("alpha", 0.2f));
      add_const(p, n.attr_float("beta", 0.5f));
      return emit(Op::kHardSigmoid, *a, c);
    }
    if (op == "Clip") {
      float lo = -std::numeric_limits<float>::infinity(), hi = std::numeric_limits<float>::infinity();
      if (n.opset < 11) {
        lo = n.attr_float("min", lo);
        hi = n.attr_float("max", hi);
      } else {
        for (size_t k = 1; k < n.inputs.size() && k < 3; ++k) {
          if (n.inputs[k].empty()) continue;
          auto c = scalar_f32(n.inputs[k]);
          if (!c) return std::nullopt;
          (k == 1 ? lo : hi) = *c;
        }
        if (n.inputs.size() > 3) return std::nullopt;
      }
      auto a = compile(n.inputs[0], p, depth + 1);
      if (!a) return std::nullopt;
      const int c = add_const(p, lo);
      add_const(p, hi);
      return emit(Op::kClip, *a, c);
    }
    return std::nullopt;
  }

  Graph& g_;
  GraphConstants constants_;
  std::unordered_set<std::string> pinned_;
  std::unordered_map<std::string, std::vector<size_t>> consumers_;
  std::unordered_map<std::string, size_t> producer_;
  std::vector<bool> dead_;
};

}  // namespace

int fuse_quantized_elementwise(ir::Graph& g, bool input_defaults_constant) {
  return Fuser(g, input_defaults_constant).run();
}

}  // namespace bulkhead::exec
