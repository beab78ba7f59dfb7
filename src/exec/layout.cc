#include "exec/layout.h"
#include "exec/fused_ops.h"
#include "exec/outer_refs.h"
#include "backend/conv_attrs.h"

#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace bulkhead::exec {
namespace {

using ir::AttrType;
using ir::Dim;
using ir::Graph;
using ir::Node;

constexpr int64_t kBlock = 16;


// kAffine: an inference BatchNormalization (a per-channel x·a + b, Relu maybe fused), told
// the layout like the pools, since its coefficients follow the channel.
// kResize: a nearest-mode Resize of H and W (constant scales, C kept), which runs blocked
// when its input is and a reader takes its output blocked (a feature pyramid's upsampling
// between two additions).
enum class Kind { kNone, kConv, kPool, kGlobalPool, kUnary, kBinary, kConcat, kAffine, kResize };

class Planner {
 public:
  Planner(Graph& g, bool input_defaults_constant) : g_(g), input_defaults_constant_(input_defaults_constant) {}

  Result<LayoutStats> run() {
    for (const auto& o : g_.outputs) pinned_.insert(o.name);
    collect_outer_refs(g_, pinned_);
    for (size_t i = 0; i < g_.nodes.size(); ++i)
      for (const auto& in : g_.nodes[i].inputs)
        if (!in.empty()) consumers_[in].push_back(i);

    // Decide, in topological order, which nodes run blocked. A Conv takes its input in
    // whichever layout it comes and writes blocked when a reader would take that; the
    // other kinds run blocked when all their activation inputs are.
    x_blocked_.assign(g_.nodes.size(), false);
    y_blocked_.assign(g_.nodes.size(), false);
    for (const auto& in : g_.inputs) seed_if_shared(in.name);
    for (size_t i = 0; i < g_.nodes.size(); ++i) {
      const Node& n = g_.nodes[i];
      Kind k = kind_of(n);
      if (k == Kind::kNone) {
        for (const auto& o : n.outputs) seed_if_shared(o);
        continue;
      }
      const std::string& out = n.outputs[0];
      // A graph output (or a value a subgraph reads) is blocked only when a reader here
      // takes it blocked; its plain name then comes from one FromBlocked16. (Writing it
      // plain instead made every such reader take a plain input: a split model's front,
      // whose cut values are its outputs, ran its depthwise Conv on plain input 7x slower.)
      bool out_ok = shape4(out) && (!pinned_.count(out) || wanted_blocked(out));
      if (k == Kind::kConv) {
        x_blocked_[i] = blocked_.count(n.inputs[0]) != 0;
        y_blocked_[i] = out_ok && wanted_blocked(out);
      } else if (k == Kind::kResize) {
        // Blocked only when a reader takes the result so: a plain reader would otherwise
        // get its (larger) output converted instead of its input.
        x_blocked_[i] = y_blocked_[i] = out_ok && blocked_.count(n.inputs[0]) && wanted_blocked(out);
      } else if (out_ok && inputs_allow(n, k)) {
        x_blocked_[i] = y_blocked_[i] = true;
      }
      if (y_blocked_[i]) blocked_.insert(out);
      else seed_if_shared(out);
    }

    // Rewrite.
    std::vector<Node> out_nodes;
    out_nodes.reserve(g_.nodes.size() + 16);
    std::unordered_set<std::string> plain_made, blocked_made;
    // A conversion node (domain "bulkhead") from `in` to `out`, placed at the current end.
    auto convert = [&](const char* op, const std::string& in, const std::string& out) -> Node& {
      Node c;
      c.name = out + "/" + op;
      c.op_type = op;
      c.domain = kLayoutDomain;
      c.opset = 1;
      c.inputs = {in};
      c.outputs = {out};
      out_nodes.push_back(std::move(c));
      ++stats_.conversions;
      return out_nodes.back();
    };
    auto ensure_plain = [&](const std::string& v) {
      if (!blocked_.count(v) || plain_made.count(v)) return;
      plain_made.insert(v);
      convert("FromBlocked16", bname(v), v).attrs["channels"] = int_attr(shape4(v)->at(1).value);
    };
    auto ensure_blocked = [&](const std::string& v) {
      if (blocked_.count(v) || blocked_made.count(v)) return;
      blocked_made.insert(v);
      add_blocked_info(v);
      convert("ToBlocked16", v, bname(v));
    };
    auto str_attr = [](const char* s) {
      ir::Attribute a;
      a.type = AttrType::kString;
      a.s = s;
      return a;
    };

    // A plain value that several Convs read blocked: one conversion, right after it is
    // made (its plain readers read it as it is).
    auto convert_seeded = [&](const std::string& v) {
      if (!seeded_.count(v)) return;
      plain_made.insert(v);
      add_blocked_info(v);
      convert("ToBlocked16", v, bname(v));
    };
    for (const auto& in : g_.inputs) convert_seeded(in.name);
    for (size_t i = 0; i < g_.nodes.size(); ++i) {
      Node n = std::move(g_.nodes[i]);
      Kind k = kind_of(n);
      if (!x_blocked_[i] && !y_blocked_[i]) {
        for (const auto& in : n.inputs)
          if (!in.empty()) ensure_plain(in);
        const std::vector<std::string> outs = n.outputs;
        out_nodes.push_back(std::move(n));
        for (const auto& o : outs) convert_seeded(o);
        continue;
      }
      ++stats_.blocked_nodes;
      const std::string out = n.outputs[0];
      if (k == Kind::kConv) {
        if (x_blocked_[i]) {
          n.inputs[0] = bname(n.inputs[0]);
          n.attrs["_x_layout"] = str_attr(kBlocked16);
        }
        if (n.inputs.size() > 3 && !n.inputs[3].empty()) {
          // The fused summand has the output's layout.
          if (y_blocked_[i]) {
            ensure_blocked(n.inputs[3]);
            n.inputs[3] = bname(n.inputs[3]);
          } else {
            ensure_plain(n.inputs[3]);
          }
          n.attrs["_sum_input"].s = n.inputs[3];
        }
        if (y_blocked_[i]) n.attrs["_y_layout"] = str_attr(kBlocked16);
      } else {
        for (auto& in : n.inputs)
          if (!in.empty() && blocked_.count(in)) in = bname(in);  // constants stay as they are
        if (k == Kind::kPool || k == Kind::kGlobalPool || k == Kind::kAffine || k == Kind::kResize)
          n.attrs["_layout"] = str_attr(kBlocked16);
        if (k == Kind::kResize) n.attrs["channels"] = int_attr((*shape4(out))[1].value);
        if (k == Kind::kConcat) n.attrs["axis"] = int_attr(1);
      }
      if (y_blocked_[i]) {
        add_blocked_info(out);
        n.outputs[0] = bname(out);
      }
      out_nodes.push_back(std::move(n));
      if (!y_blocked_[i]) {
        convert_seeded(out);  // a Conv writing plain what other Convs read blocked
        continue;
      }
      // Plain readers of `out` get it from a conversion placed right after its producer,
      // so that every reader comes after it.
      bool plain_reader = pinned_.count(out) != 0;
      for (size_t j : consumers_[out])
        if (!reads_blocked(j, out)) plain_reader = true;
      if (plain_reader) ensure_plain(out);
    }
    g_.nodes = std::move(out_nodes);
    return stats_;
  }

 private:
  static std::string bname(const std::string& v) { return v + "__nChw16c"; }
  static ir::Attribute int_attr(int64_t i) {
    ir::Attribute a;
    a.type = AttrType::kInt;
    a.i = i;
    return a;
  }

  // The declared rank-4 float32 shape of `v` with a fixed channel count, or null.
  const std::vector<Dim>* shape4(const std::string& v) const {
    const ir::ValueInfo* vi = g_.info(v);
    if (!vi || vi->type != ir::ValueType::kTensor || vi->dtype != DataType::kFloat32 || !vi->shape ||
        vi->shape->size() != 4 || !(*vi->shape)[1].fixed() || (*vi->shape)[1].value <= 0)
      return nullptr;
    if (g_.initializers.count(v)) return nullptr;
    return &*vi->shape;
  }

  void add_blocked_info(const std::string& v) {
    const std::vector<Dim>& s = *shape4(v);
    ir::ValueInfo vi;
    vi.name = bname(v);
    vi.dtype = DataType::kFloat32;
    std::vector<Dim> d{s[0], Dim{}, s[2], s[3], Dim{}};
    d[1].value = (s[1].value + kBlock - 1) / kBlock;
    d[4].value = kBlock;
    vi.shape = d;
    g_.value_info[vi.name] = vi;
  }

  const Tensor* constant(const std::string& v) const {
    auto it = g_.initializers.find(v);
    if (it == g_.initializers.end()) return nullptr;
    if (input_defaults_constant_) return &it->second;
    for (const auto& in : g_.inputs)
      if (in.name == v) return nullptr;  // an overridable default
    return &it->second;
  }

  bool one_element_constant(const std::string& v) const {
    const Tensor* t = constant(v);
    return t && t->numel() == 1 && t->rank() <= 4;
  }

  static bool only_first_output(const Node& n) {
    for (size_t k = 1; k < n.outputs.size(); ++k)
      if (!n.outputs[k].empty()) return false;
    return !n.outputs.empty() && !n.outputs[0].empty();
  }

  Kind kind_of(const Node& n) const {
    if (!n.domain.empty() || !only_first_output(n) || n.inputs.empty() || n.inputs[0].empty()) return Kind::kNone;
    const std::string& op = n.op_type;
    if (op == "Conv") {
      // A Conv reading a channel shuffle in place (channel_shuffle.h) reads plain NCHW.
      if (n.inputs.size() < 2 || n.inputs.size() > 4 || !shape4(n.inputs[0]) || n.has_attr("_x_shuffle"))
        return Kind::kNone;
      const Tensor* w = constant(n.inputs[1]);
      if (!w || w->dtype() != DataType::kFloat32 || w->rank() != 4) return Kind::kNone;
      // Grouped convolutions: oneDNN's blocked kernels need whole 16-channel blocks per
      // group (or one channel per group, depthwise).
      int64_t G = n.attr_int("group", 1), M = w->dim(0), Cg = w->dim(1);
      if (G > 1 && !(Cg == 1 && M == G) && (Cg % kBlock != 0 || (M / G) % kBlock != 0)) return Kind::kNone;
      if (n.inputs.size() > 2 && !n.inputs[2].empty() && !constant(n.inputs[2])) return Kind::kNone;
      if (n.inputs.size() > 3 && !n.inputs[3].empty()) {
        // A fused summand of the output's shape.
        const auto* s = shape4(n.inputs[3]);
        const auto* o = shape4(n.outputs[0]);
        if (!s || !o) return Kind::kNone;
        for (int d = 0; d < 4; ++d)
          if (!(*s)[d].fixed() || !(*o)[d].fixed() || (*s)[d].value != (*o)[d].value) return Kind::kNone;
      }
      return Kind::kConv;
    }
    if (op == "MaxPool" || op == "AveragePool") return n.inputs.size() == 1 ? Kind::kPool : Kind::kNone;
    if (op == "GlobalAveragePool" || op == "GlobalMaxPool") return n.inputs.size() == 1 ? Kind::kGlobalPool : Kind::kNone;
    if (op == "BatchNormalization") {
      // Inference with constant per-channel parameters (DenseNet's pre-activation
      // Concat → BatchNormalization → Relu → Conv: blocked, the Concat needs no conversion).
      const auto* x = shape4(n.inputs[0]);
      if (!x || n.inputs.size() != 5 || n.attr_int("training_mode", 0) != 0) return Kind::kNone;
      for (size_t k = 1; k < 5; ++k) {
        const Tensor* t = constant(n.inputs[k]);
        if (!t || !t->on_host() || t->dtype() != DataType::kFloat32 || t->numel() != (*x)[1].value) return Kind::kNone;
      }
      return Kind::kAffine;
    }
    if (op == "Relu" || op == "LeakyRelu" || op == "Sigmoid" || op == "HardSigmoid" || op == "HardSwish" || op == "Tanh")
      return n.inputs.size() == 1 ? Kind::kUnary : Kind::kNone;
    if (op == "Clip") {
      for (size_t k = 1; k < n.inputs.size(); ++k)
        if (!n.inputs[k].empty() && !one_element_constant(n.inputs[k])) return Kind::kNone;
      return Kind::kUnary;
    }
    if ((op == "Add" || op == "Sub" || op == "Mul") && n.inputs.size() == 2 && !n.inputs[1].empty()) return Kind::kBinary;
    if (op == "Concat") {
      int64_t axis = n.attr_int("axis", 1);
      return axis == 1 || axis == -3 ? Kind::kConcat : Kind::kNone;
    }
    if (op == "Resize") return resize_blockable(n) ? Kind::kResize : Kind::kNone;
    return Kind::kNone;
  }

  // A Resize the blocked kernel runs: nearest mode (its default), no `axes`, no
  // tf_crop_and_resize (whose extrapolated pixels would fill the padded channels too),
  // constant float32 scales [1, 1, sh, sw] (Resize-10: input 1; 11+: input 2, and no
  // sizes), a 4-D input and output with the same fixed channel count.
  bool resize_blockable(const Node& n) const {
    if (n.attr_string("mode", "nearest") != "nearest" || n.has_attr("axes") ||
        n.attr_string("coordinate_transformation_mode", "half_pixel") == "tf_crop_and_resize" ||
        n.attr_int("antialias", 0) != 0)
      return false;
    const size_t si = n.opset < 11 ? 1 : 2;
    if (n.inputs.size() <= si || n.inputs[si].empty()) return false;
    if (n.opset >= 11 && n.inputs.size() > 3 && !n.inputs[3].empty()) return false;  // sizes
    const Tensor* sc = constant(n.inputs[si]);
    if (!sc || !sc->on_host() || sc->dtype() != DataType::kFloat32 || sc->numel() != 4) return false;
    if (sc->data<float>()[1] != 1.f) return false;
    const auto* x = shape4(n.inputs[0]);
    const auto* y = shape4(n.outputs[0]);
    return x && y && (*x)[1].value == (*y)[1].value;
  }

  // Whether node `j` (decided) reads the blocked value `v` in the blocked layout.
  bool reads_blocked(size_t j, const std::string& v) const {
    const Node& n = g_.nodes[j];
    if (!x_blocked_[j] && !y_blocked_[j]) return false;
    if (kind_of(n) == Kind::kConv) {
      if (n.inputs[0] == v) return true;  // a Conv reads a blocked input blocked
      return n.inputs.size() > 3 && n.inputs[3] == v && y_blocked_[j];
    }
    return true;
  }

  // For the layout-following kinds: every activation input is blocked (and compatible).
  bool inputs_allow(const Node& n, Kind k) const {
    const auto* out = shape4(n.outputs[0]);
    if (!out) return false;
    switch (k) {
      case Kind::kPool:
      case Kind::kGlobalPool:
      case Kind::kUnary:
      case Kind::kAffine:
        return blocked_.count(n.inputs[0]) != 0;
      case Kind::kBinary: {
        const std::string &a = n.inputs[0], &b = n.inputs[1];
        bool ab = blocked_.count(a) != 0, bb = blocked_.count(b) != 0;
        if (ab && bb) return (*shape4(a))[1].value == (*shape4(b))[1].value && (*out)[1].value == (*shape4(a))[1].value;
        if (ab) return one_element_constant(b);
        if (bb) return one_element_constant(a);
        return false;
      }
      case Kind::kConcat:
        for (const auto& in : n.inputs) {
          if (in.empty() || !blocked_.count(in)) return false;
          if ((*shape4(in))[1].value % kBlock != 0) return false;
        }
        return true;
      default:
        return false;
    }
  }

  // A plain value (a graph input, or what a node writes plain) that two or more Convs
  // read as X: each would reorder it to nChw16c inside (a split model's back part reads
  // its cut values so), where one conversion serves them all. Marks it blocked; the
  // rewrite adds the ToBlocked16. One Conv reader gains nothing from it, and neither
  // does a 1-15 channel image (oneDNN's first-layer kernels read plain NCHW).
  void seed_if_shared(const std::string& v) {
    if (v.empty() || blocked_.count(v)) return;
    const auto* s = shape4(v);
    if (!s || (*s)[1].value < kBlock) return;
    auto it = consumers_.find(v);
    if (it == consumers_.end()) return;
    int convs = 0;
    for (size_t j : it->second) {
      const Node& n = g_.nodes[j];
      if (kind_of(n) == Kind::kConv && n.inputs[0] == v) ++convs;
    }
    if (convs < 2) return;
    blocked_.insert(v);
    seeded_.insert(v);
  }

  // Whether some reader of `v` would take it blocked (so a Conv producing it should
  // write it blocked).
  bool wanted_blocked(const std::string& v) const {
    auto it = consumers_.find(v);
    if (it == consumers_.end()) return false;
    const auto* s = shape4(v);
    for (size_t j : it->second) {
      const Node& n = g_.nodes[j];
      Kind k = kind_of(n);
      switch (k) {
        case Kind::kConv:
          // Its input, or the summand of a Conv that will likely write blocked too.
          if (n.inputs[0] == v || (n.inputs.size() > 3 && n.inputs[3] == v)) return true;
          break;
        case Kind::kPool:
        case Kind::kGlobalPool:
        case Kind::kUnary:
        case Kind::kAffine:
          if (n.inputs[0] == v) return true;
          break;
        case Kind::kBinary: {
          const std::string& other = n.inputs[0] == v ? n.inputs[1] : n.inputs[0];
          if (one_element_constant(other)) return true;
          // The other operand must already be blocked (it is decided when produced first).
          if (blocked_.count(other) && (*shape4(other))[1].value == (*s)[1].value) return true;
          break;
        }
        case Kind::kConcat:
          if ((*s)[1].value % kBlock == 0) return true;
          break;
        case Kind::kResize:
          // Through the Resize: blocked when one of its readers takes the result so.
          if (n.inputs[0] == v && shape4(n.outputs[0]) && wanted_blocked(n.outputs[0])) return true;
          break;
        default:
          break;
      }
    }
    return false;
  }

  Graph& g_;
  bool input_defaults_constant_;
  std::unordered_set<std::string> pinned_, blocked_;
  std::unordered_set<std::string> seeded_;  // plain values converted once for their Convs
  std::vector<bool> x_blocked_, y_blocked_;
  std::unordered_map<std::string, std::vector<size_t>> consumers_;
  LayoutStats stats_;
};

// Marks the convolutions and products that compute in bfloat16 and the blocked values
// stored so (layout.h), on the graph the Planner rewrote.
class Bf16Marker {
 public:
  Bf16Marker(Graph& g, bool input_defaults_constant) : g_(g), input_defaults_constant_(input_defaults_constant) {}

  void run(LayoutStats& stats) {
    std::vector<bool> bf16(g_.nodes.size(), false);
    for (size_t i = 0; i < g_.nodes.size(); ++i) {
      Node& n = g_.nodes[i];
      if (!wants_bf16(n)) continue;
      bf16[i] = true;
      n.attrs["_precision"] = str_attr("bf16");
      ++stats.bf16_nodes;
    }
    // Candidates: blocked outputs of bf16 Convs. Readers, by value.
    std::unordered_map<std::string, size_t> producer;
    std::unordered_map<std::string, std::vector<size_t>> readers;
    std::unordered_set<std::string> cand;
    for (size_t i = 0; i < g_.nodes.size(); ++i) {
      const Node& n = g_.nodes[i];
      for (const auto& in : n.inputs)
        if (!in.empty()) readers[in].push_back(i);
      if (bf16[i] && n.op_type == "Conv" && n.attr_string("_y_layout", "") == kBlocked16 && !n.outputs.empty()) {
        producer[n.outputs[0]] = i;
        cand.insert(n.outputs[0]);
      }
    }
    std::unordered_set<std::string> outer;
    for (const auto& o : g_.outputs) outer.insert(o.name);
    collect_outer_refs(g_, outer);
    // Drop candidates until every reader of every one takes bfloat16.
    for (bool changed = true; changed;) {
      changed = false;
      for (auto it = cand.begin(); it != cand.end();) {
        const std::string& v = *it;
        const Node& p = g_.nodes[producer[v]];
        bool ok = !outer.count(v);
        // The fused summand becomes the output's memory: the same element type.
        if (ok && p.inputs.size() > 3 && !p.inputs[3].empty()) ok = cand.count(p.inputs[3]) != 0;
        for (size_t j : readers[v]) {
          if (!ok) break;
          const Node& r = g_.nodes[j];
          if (r.domain == kLayoutDomain && r.op_type == "FromBlocked16") continue;
          bool conv = bf16[j] && r.op_type == "Conv" && r.domain.empty();
          for (size_t k = 0; k < r.inputs.size() && ok; ++k) {
            if (r.inputs[k] != v) continue;
            if (k == 0 && conv) continue;
            if (k == 3 && conv && r.attr_string("_y_layout", "") == kBlocked16 && cand.count(r.outputs[0])) continue;
            ok = false;
          }
        }
        if (ok) {
          ++it;
        } else {
          it = cand.erase(it);
          changed = true;
        }
      }
    }
    for (const auto& v : cand) {
      g_.nodes[producer[v]].attrs["_y_type"] = str_attr("bf16");
      g_.value_info[v].dtype = DataType::kBFloat16;
      ++stats.bf16_values;
    }
  }

 private:
  static ir::Attribute str_attr(const char* s) {
    ir::Attribute a;
    a.type = AttrType::kString;
    a.s = s;
    return a;
  }

  const Tensor* constant(const std::string& v) const {
    auto it = g_.initializers.find(v);
    if (it == g_.initializers.end()) return nullptr;
    if (!input_defaults_constant_)
      for (const auto& in : g_.inputs)
        if (in.name == v) return nullptr;  // an overridable default
    return &it->second;
  }

  bool float32(const std::string& v) const {
    const ir::ValueInfo* vi = g_.info(v);
    return vi && vi->type == ir::ValueType::kTensor && vi->dtype == DataType::kFloat32;
  }

  bool wants_bf16(const Node& n) const {
    if (!n.domain.empty() || n.inputs.size() < 2 || n.inputs[0].empty()) return false;
    const Tensor* w = constant(n.inputs[1]);
    if (!w || w->dtype() != DataType::kFloat32) return false;
    // X is float32, or the blocked value of the chain (whose value_info says float32 until
    // this pass decides).
    if (!float32(n.inputs[0])) return false;
    // A ConvTranspose that is one product and an interleave stays float32 (the CPU kernel
    // computes it so: faster than oneDNN's deconvolution in either type).
    if (n.op_type == "ConvTranspose" && transpose_is_pixel_product(parse_conv_attrs(n), w->shape())) return false;
    if (n.op_type == "Conv" || n.op_type == "ConvTranspose") return w->rank() >= 3 && w->rank() <= 5;
    if (n.op_type == "MatMul" || n.op_type == "Gemm") return w->rank() == 2;
    return false;
  }

  Graph& g_;
  bool input_defaults_constant_;
};

// An element-wise chain whose end only a ToBlocked16 reads — a split model's back part
// applying the activation that, in the whole model, its front part's Conv had fused —
// runs inside the conversion (its `_post_ops`): one pass over the tensor instead of one
// per op and one to convert. Returns the nodes folded.
int fold_chains_into_conversions(Graph& g, bool input_defaults_constant) {
  std::unordered_map<std::string, size_t> producer;
  std::unordered_map<std::string, int> readers;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    for (const auto& in : g.nodes[i].inputs)
      if (!in.empty()) ++readers[in];
    for (const auto& out : g.nodes[i].outputs)
      if (!out.empty()) producer[out] = i;
  }
  std::unordered_set<std::string> outer;
  for (const auto& o : g.outputs) outer.insert(o.name);
  collect_outer_refs(g, outer);
  std::unordered_set<std::string> inputs;
  for (const auto& in : g.inputs) inputs.insert(in.name);
  ConstantLookup constant = [&](const std::string& v) -> const Tensor* {
    if (!input_defaults_constant && inputs.count(v)) return nullptr;  // an overridable default
    auto it = g.initializers.find(v);
    return it == g.initializers.end() ? nullptr : &it->second;
  };
  auto float32 = [&](const std::string& v) {
    const ir::ValueInfo* vi = g.info(v);
    return vi && vi->type == ir::ValueType::kTensor && vi->dtype == DataType::kFloat32;
  };
  std::vector<bool> dead(g.nodes.size(), false);
  int folded = 0;
  for (Node& t : g.nodes) {
    if (t.domain != kLayoutDomain || t.op_type != "ToBlocked16" || t.inputs.size() != 1 || t.has_attr("_post_ops"))
      continue;
    std::vector<std::string> ops;
    std::vector<float> args;
    std::string x = t.inputs[0];
    for (;;) {
      auto p = producer.find(x);
      if (p == producer.end() || outer.count(x) || readers[x] != 1) break;
      const Node& n = g.nodes[p->second];
      if (!n.domain.empty() || n.outputs.size() != 1 || n.inputs.empty()) break;
      // The activation: the input that is not a constant (an element-wise op of a
      // constant and a value keeps the value's shape, which unary_fused_op ensures).
      std::string act;
      for (const auto& in : n.inputs)
        if (!in.empty() && !constant(in)) {
          act = in;
          break;
        }
      if (act.empty() || !float32(act)) break;
      auto op = unary_fused_op(n, act, 4, constant);
      if (!op) break;
      add_fused_op(ops, args, *op, /*prepend=*/true);
      dead[p->second] = true;
      ++folded;
      x = act;
    }
    if (ops.empty()) continue;
    t.inputs[0] = x;
    set_fused_ops(t, ops, args);
  }
  if (folded) g.remove_nodes(dead);
  return folded;
}

}  // namespace

Result<LayoutStats> block_channels(ir::Graph& g, const LayoutOptions& options) {
  BH_ASSIGN_OR_RETURN(LayoutStats stats, Planner(g, options.input_defaults_constant).run());
  stats.folded_nodes = fold_chains_into_conversions(g, options.input_defaults_constant);
  if (options.bf16) Bf16Marker(g, options.input_defaults_constant).run(stats);
  const LayoutStats nhwc = nhwc_int8_chains(g, options.input_defaults_constant);
  stats.nhwc_nodes = nhwc.nhwc_nodes;
  stats.conversions += nhwc.conversions;
  return stats;
}

}  // namespace bulkhead::exec
