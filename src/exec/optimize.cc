#include "exec/optimize.h"

#include "backend/conv_attrs.h"
#include "backend/qlinear_conv_transpose.h"
#include "backend/qlinear_gemm.h"

#include "exec/fused_ops.h"
#include "exec/outer_refs.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <optional>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace bulkhead::exec {
namespace {

using ir::AttrType;
using ir::Graph;
using ir::Node;

// Elements up to which a constant computed by ConstantOfShape or Unsqueeze is built when
// the session is created rather than by every run (16 KiB of float32).
constexpr int64_t kSmallConstant = 4096;

bool near(float a, float b) { return std::fabs(a - b) <= 1e-6f * std::max(1.f, std::fabs(b)); }

class Optimizer {
 public:
  Optimizer(Graph& g, bool input_defaults_constant, bool cpu_ops)
      : g_(g), input_defaults_constant_(input_defaults_constant), cpu_ops_(cpu_ops) {}

  Status run() {
    for (const auto& o : g_.outputs) pinned_.insert(o.name);
    collect_outer_refs(g_, pinned_);
    for (const auto& in : g_.inputs) graph_inputs_.insert(in.name);
    dead_.assign(g_.nodes.size(), false);
    done_.assign(g_.nodes.size(), false);

    fold_constant_of_shape();
    fold_small_unsqueezes();
    remove_identities();
    index();
    // QDQ convolutions first: their Conv reads DequantizeLinear outputs, which the float
    // fusions below would otherwise treat as float weights.
    for (size_t i = 0; i < g_.nodes.size(); ++i) {
      if (dead_[i] || done_[i]) continue;
      if (fuse_qdq_conv(i) || fuse_qdq_matmul(i) || (cpu_ops_ && fuse_qdq_gemm(i))) index();
    }
    for (size_t i = 0; i < g_.nodes.size(); ++i) {
      if (dead_[i] || done_[i]) continue;
      if (fuse_conv(i)) index();
    }
    for (size_t i = 0; i < g_.nodes.size(); ++i) {
      if (dead_[i] || done_[i]) continue;
      if (fuse_batchnorm(i)) index();
    }
    fuse_standalone_hardswish();
    compact();
    return Status::ok();
  }

 private:
  // ----- bookkeeping

  void index() {
    consumers_.clear();
    producer_.clear();
    for (size_t i = 0; i < g_.nodes.size(); ++i) {
      if (dead_[i]) continue;
      for (const auto& in : g_.nodes[i].inputs)
        if (!in.empty()) consumers_[in].push_back(i);
      for (const auto& out : g_.nodes[i].outputs)
        if (!out.empty()) producer_[out] = i;
    }
  }

  size_t num_uses(const std::string& v) const {
    auto it = consumers_.find(v);
    return it == consumers_.end() ? 0 : it->second.size();
  }

  // The one node reading `v` (exactly once), when `v` is an intermediate nobody else sees.
  std::optional<size_t> sole_consumer(const std::string& v) const {
    if (pinned_.count(v)) return std::nullopt;
    auto it = consumers_.find(v);
    if (it == consumers_.end() || it->second.size() != 1) return std::nullopt;
    return it->second[0];
  }

  // Only output 0 of `n` is used.
  bool only_first_output(const Node& n) const {
    if (n.outputs.empty() || n.outputs[0].empty()) return false;
    for (size_t k = 1; k < n.outputs.size(); ++k) {
      const std::string& o = n.outputs[k];
      if (!o.empty() && (pinned_.count(o) || num_uses(o))) return false;
    }
    return true;
  }

  // An initializer the caller cannot override as an input.
  const Tensor* constant(const std::string& name) const {
    if (name.empty() || (graph_inputs_.count(name) && !input_defaults_constant_)) return nullptr;
    auto it = g_.initializers.find(name);
    return it == g_.initializers.end() ? nullptr : &it->second;
  }

  bool scalar_f32(const std::string& name, int max_rank, float* v) const {
    return exec::scalar_f32(lookup(), name, max_rank, v);
  }
  ConstantLookup lookup() const {
    return [this](const std::string& v) { return constant(v); };
  }

  // A float32 constant that broadcasts along the channel axis (1) of a rank-`rank` [N, M, ...]
  // tensor without changing its shape: one value, or M values on that axis.
  bool per_channel_f32(const std::string& name, int64_t M, int rank, std::vector<double>* v) const {
    const Tensor* t = constant(name);
    if (!t || t->dtype() != DataType::kFloat32 || t->rank() > rank || !t->on_host()) return false;
    const float* p = t->data<float>();
    if (t->numel() == 1) {
      v->assign(M, p[0]);
      return true;
    }
    if (t->numel() != M) return false;
    int axis = 1 - (rank - t->rank());
    if (axis < 0) return false;
    for (int d = 0; d < t->rank(); ++d)
      if (d != axis && t->dim(d) != 1) return false;
    v->assign(p, p + M);
    return true;
  }

  // A float32 constant of shape [M].
  bool vector_f32(const std::string& name, int64_t M, std::vector<double>* v) const {
    const Tensor* t = constant(name);
    if (!t || t->dtype() != DataType::kFloat32 || t->rank() != 1 || t->dim(0) != M || !t->on_host()) return false;
    v->assign(t->data<float>(), t->data<float>() + M);
    return true;
  }

  std::string fresh(const std::string& base) {
    for (;;) {
      std::string n = base + "__bh_opt" + std::to_string(counter_++);
      if (!g_.initializers.count(n) && !g_.value_info.count(n) && !g_.find_input(n)) return n;
    }
  }

  // ----- ConstantOfShape -> initializer (weights of "light" models are built that way)

  void fold_constant_of_shape() {
    std::unordered_map<std::string, std::vector<std::pair<size_t, size_t>>> uses;  // value -> (node, input)
    for (size_t i = 0; i < g_.nodes.size(); ++i)
      for (size_t k = 0; k < g_.nodes[i].inputs.size(); ++k) uses[g_.nodes[i].inputs[k]].emplace_back(i, k);
    for (size_t i = 0; i < g_.nodes.size(); ++i) {
      Node& n = g_.nodes[i];
      if (n.op_type != "ConstantOfShape" || !n.domain.empty() || n.outputs.size() != 1 || n.inputs.size() != 1) continue;
      const std::string& out = n.outputs[0];
      if (out.empty() || pinned_.count(out) || graph_inputs_.count(out) || g_.initializers.count(out)) continue;
      // Only for weights (every use is a Conv or Gemm weight/bias, a MatMul's right
      // operand or a BatchNormalization parameter), or for small tensors such as
      // per-channel scales: a large one read by other operators is left to be built by
      // the run.
      auto it = uses.find(out);
      if (it == uses.end()) continue;
      bool weights = true;
      for (auto [ni, k] : it->second) {
        const Node& u = g_.nodes[ni];
        weights = weights && u.domain.empty() &&
                  (((u.op_type == "Conv" || u.op_type == "Gemm") && (k == 1 || k == 2)) ||
                   (u.op_type == "MatMul" && k == 1) || (u.op_type == "BatchNormalization" && k >= 1));
      }
      const Tensor* shape = constant(n.inputs[0]);
      if (!shape || shape->dtype() != DataType::kInt64 || shape->rank() != 1 || !shape->on_host()) continue;
      Shape s(shape->data<int64_t>(), shape->data<int64_t>() + shape->numel());
      int64_t numel = 1;
      bool ok = true;
      for (int64_t d : s) {
        ok = ok && d >= 0 && d < (int64_t{1} << 31);
        numel *= ok ? d : 1;
        ok = ok && numel <= (int64_t{1} << 28);
      }
      if (!ok || (!weights && numel > kSmallConstant)) continue;
      DataType dt = DataType::kFloat32;
      const ir::Attribute* va = n.attr("value");
      if (va) {
        if (va->type != AttrType::kTensor || va->t.numel() != 1 || !va->t.on_host()) continue;
        dt = va->t.dtype();
        if (dt != DataType::kFloat32 && dt != DataType::kFloat64) continue;
      }
      Tensor t = Tensor::host(dt, s);
      if (dt == DataType::kFloat32) std::fill(t.data<float>(), t.data<float>() + numel, va ? va->t.data<float>()[0] : 0.f);
      else std::fill(t.data<double>(), t.data<double>() + numel, va->t.data<double>()[0]);
      g_.initializers[out] = t;
      dead_[i] = true;
    }
  }

  // ----- Unsqueeze of a small constant -> initializer, so that a per-channel scale or
  // shift written as Mul(x, Unsqueeze(s)) folds into the Conv before it (Inception v2's
  // BatchNormalization is followed by such a Mul and Add).

  void fold_small_unsqueezes() {
    for (size_t i = 0; i < g_.nodes.size(); ++i) {
      Node& n = g_.nodes[i];
      if (dead_[i] || n.op_type != "Unsqueeze" || !n.domain.empty() || n.outputs.size() != 1 || n.inputs.empty())
        continue;
      const std::string& out = n.outputs[0];
      if (out.empty() || pinned_.count(out) || graph_inputs_.count(out) || g_.initializers.count(out)) continue;
      const Tensor* x = constant(n.inputs[0]);
      if (!x || !x->on_host() || x->numel() > kSmallConstant || x->dtype() == DataType::kString) continue;
      std::vector<int64_t> axes;
      if (n.opset < 13) {
        axes = n.attr_ints("axes");
      } else {
        const Tensor* a = n.inputs.size() > 1 ? constant(n.inputs[1]) : nullptr;
        if (!a || !a->on_host() || a->dtype() != DataType::kInt64 || a->rank() != 1) continue;
        axes.assign(a->data<int64_t>(), a->data<int64_t>() + a->numel());
      }
      const int64_t r = x->rank() + static_cast<int64_t>(axes.size());
      std::vector<bool> inserted(static_cast<size_t>(r), false);
      bool ok = !axes.empty();
      for (int64_t a : axes) {
        if (a < -r || a >= r) { ok = false; break; }
        int64_t k = a < 0 ? a + r : a;
        if (inserted[k]) { ok = false; break; }
        inserted[k] = true;
      }
      if (!ok) continue;  // the kernel reports the error at run time
      Shape shape;
      int64_t from = 0;
      for (int64_t d = 0; d < r; ++d) shape.push_back(inserted[d] ? 1 : x->dim(static_cast<int>(from++)));
      Tensor t = Tensor::host(x->dtype(), shape);
      if (x->nbytes()) std::memcpy(t.raw(), x->raw(), x->nbytes());
      g_.initializers[out] = std::move(t);
      dead_[i] = true;
    }
  }

  // ----- Identity / inference Dropout

  void remove_identities() {
    // value -> (node, input index), over every node: one pass instead of a scan of the whole
    // graph per Identity (chains of them are common in exported models).
    std::unordered_map<std::string, std::vector<std::pair<size_t, size_t>>> uses;
    for (size_t i = 0; i < g_.nodes.size(); ++i)
      for (size_t k = 0; k < g_.nodes[i].inputs.size(); ++k)
        if (!g_.nodes[i].inputs[k].empty()) uses[g_.nodes[i].inputs[k]].emplace_back(i, k);
    for (size_t i = 0; i < g_.nodes.size(); ++i) {
      Node& n = g_.nodes[i];
      if (dead_[i] || !n.domain.empty()) continue;
      bool identity = n.op_type == "Identity" && n.inputs.size() == 1 && n.outputs.size() == 1;
      if (n.op_type == "Dropout" && n.opset >= 7 && !n.inputs.empty() && !n.outputs.empty()) {
        identity = true;
        if (n.inputs.size() > 2 && !n.inputs[2].empty()) {
          const Tensor* tm = constant(n.inputs[2]);
          identity = tm && tm->dtype() == DataType::kBool && tm->numel() == 1 && tm->on_host() &&
                     !tm->data<uint8_t>()[0];
        }
        // The mask output must be unused.
        for (size_t k = 1; k < n.outputs.size(); ++k) {
          const std::string& o = n.outputs[k];
          if (o.empty()) continue;
          if (pinned_.count(o)) identity = false;
          if (auto it = uses.find(o); it != uses.end() && !it->second.empty()) identity = false;
        }
      }
      if (!identity) continue;
      const std::string x = n.inputs[0], y = n.outputs[0];
      if (x.empty() || y.empty() || pinned_.count(y)) continue;
      if (auto it = uses.find(y); it != uses.end()) {
        std::vector<std::pair<size_t, size_t>> readers = std::move(it->second);
        it->second.clear();
        auto& to = uses[x];
        for (auto [j, k] : readers) {
          if (dead_[j]) {
            uses[y].emplace_back(j, k);  // a removed node keeps its input as it was
            continue;
          }
          g_.nodes[j].inputs[k] = x;
          to.emplace_back(j, k);
        }
      }
      dead_[i] = true;
    }
  }

  // ----- Conv chains

  // The rank of the Conv's output (its weight's rank), or -1 when unknown.
  int conv_rank(const Node& conv) const {
    if (const Tensor* w = constant(conv.inputs[1])) return w->rank();
    if (const ir::ValueInfo* vi = g_.info(conv.inputs[1]))
      if (vi->shape) return static_cast<int>(vi->shape->size());
    return -1;
  }

  DataType type_of(const std::string& name) const {
    if (auto it = g_.initializers.find(name); it != g_.initializers.end()) return it->second.dtype();
    if (const ir::ValueInfo* vi = g_.info(name)) return vi->dtype;
    return DataType::kUndefined;
  }

  // Clip bounds of node `n`, when constant.
  bool clip_bounds(const Node& n, float* lo, float* hi) const { return exec::clip_bounds(n, lookup(), lo, hi); }

  bool is(const Node& n, const char* op, size_t nin) const {
    return n.op_type == op && n.domain.empty() && n.inputs.size() == nin && n.outputs.size() >= 1 && only_first_output(n);
  }

  // The other input of a two-input node that reads `v`; "" when `v` is not exactly one of them.
  static std::string other_input(const Node& n, const std::string& v) {
    if (n.inputs.size() != 2) return "";
    if (n.inputs[0] == v && n.inputs[1] != v) return n.inputs[1];
    if (n.inputs[1] == v && n.inputs[0] != v) return n.inputs[0];
    return "";
  }

  // x*Clip(x+3, 0, 6)/6 or x*HardSigmoid(x, 1/6, 1/2) reading `v` (with exactly the two
  // consumers of the pattern). On a match, fills the nodes it consists of and the output.
  bool match_hardswish(const std::string& v, int rank, std::vector<size_t>* nodes, std::string* out) const {
    if (pinned_.count(v)) return false;
    auto it = consumers_.find(v);
    if (it == consumers_.end() || it->second.size() != 2 || it->second[0] == it->second[1]) return false;
    for (int first = 0; first < 2; ++first) {
      size_t a = it->second[first], m = it->second[1 - first];
      const Node& na = g_.nodes[a];
      const Node& nm = g_.nodes[m];
      if (!is(nm, "Mul", 2)) continue;
      std::string gate;
      std::vector<size_t> found;
      if (is(na, "HardSigmoid", 1)) {
        if (!near(na.attr_float("alpha", 0.2f), 1.f / 6) || na.attr_float("beta", 0.5f) != 0.5f) continue;
        gate = na.outputs[0];
        found = {a};
      } else if (is(na, "Add", 2)) {
        float three;
        if (!scalar_f32(other_input(na, v), rank, &three) || three != 3.f) continue;
        auto c = sole_consumer(na.outputs[0]);
        if (!c) continue;
        const Node& nc = g_.nodes[*c];
        float lo, hi;
        if (nc.op_type != "Clip" || !nc.domain.empty() || nc.inputs[0] != na.outputs[0] || !only_first_output(nc) ||
            !clip_bounds(nc, &lo, &hi) || lo != 0.f || hi != 6.f)
          continue;
        gate = nc.outputs[0];
        found = {a, *c};
      } else {
        continue;
      }
      if (other_input(nm, v) != gate) continue;
      auto gc = sole_consumer(gate);
      if (!gc || *gc != m) continue;
      found.push_back(m);
      if (na.op_type == "HardSigmoid") {
        *nodes = found;
        *out = nm.outputs[0];
        return true;
      }
      auto d = sole_consumer(nm.outputs[0]);
      if (!d) continue;
      const Node& nd = g_.nodes[*d];
      float six;
      if (!is(nd, "Div", 2) || nd.inputs[0] != nm.outputs[0] || !scalar_f32(nd.inputs[1], rank, &six) || six != 6.f)
        continue;
      found.push_back(*d);
      *nodes = found;
      *out = nd.outputs[0];
      return true;
    }
    return false;
  }

  // Folds `n` = Mul/Add(cur, c) or Sub(cur, c), c a per-channel float32 constant, into the
  // affine map y = scale * x + shift applied so far; false if `n` is not one.
  bool fold_per_channel(const Node& n, const std::string& cur, const std::string& other, int64_t M, int rank,
                        std::vector<double>* scale, std::vector<double>* shift) const {
    std::vector<double> c;
    if (!(n.op_type == "Mul" || n.op_type == "Add" || (n.op_type == "Sub" && n.inputs[0] == cur)) ||
        n.inputs.size() != 2 || other.empty() || !per_channel_f32(other, M, rank, &c))
      return false;
    for (int64_t m = 0; m < M; ++m) {
      if (n.op_type == "Mul") {
        (*scale)[m] *= c[m];
        (*shift)[m] *= c[m];
      } else {
        (*shift)[m] += n.op_type == "Add" ? c[m] : -c[m];
      }
    }
    return true;
  }

  // Replaces the chain that starts at node `first` and takes the nodes `eaten` (the
  // latest of them at `last`) by `fused`, which writes `out`, at position `last`.
  void replace_chain(size_t first, const std::vector<size_t>& eaten, size_t last, Node fused, const std::string& out) {
    fused.outputs[0] = out;
    for (size_t k : eaten) dead_[k] = true;
    dead_[first] = true;
    dead_[last] = false;
    g_.nodes[last] = std::move(fused);
    done_[last] = true;
  }

  bool fuse_conv(size_t ci) {
    const Node& conv = g_.nodes[ci];
    if (conv.op_type != "Conv" || !conv.domain.empty() || conv.outputs.size() != 1 || conv.outputs[0].empty() ||
        conv.inputs.size() < 2 || conv.inputs.size() > 3 || conv.inputs[0].empty() || conv.inputs[1].empty() ||
        conv.has_attr("_post_ops"))
      return false;
    if (type_of(conv.inputs[1]) != DataType::kFloat32) return false;
    int rank = conv_rank(conv);
    if (rank < 0) rank = 3;  // a Conv output has at least rank 3

    // Folding into weights: W (and B) constant float32.
    const Tensor* W = constant(conv.inputs[1]);
    const Tensor* B = conv.inputs.size() > 2 && !conv.inputs[2].empty() ? constant(conv.inputs[2]) : nullptr;
    bool has_bias = conv.inputs.size() > 2 && !conv.inputs[2].empty();
    bool can_fold = W && W->on_host() && W->dtype() == DataType::kFloat32 && W->rank() >= 3 && W->dim(0) > 0;
    int64_t M = can_fold ? W->dim(0) : 0;
    if (has_bias)
      can_fold = can_fold && B && B->on_host() && B->dtype() == DataType::kFloat32 && B->rank() == 1 && B->dim(0) == M;
    std::vector<double> scale, shift;
    if (can_fold) {
      scale.assign(M, 1.0);
      shift.assign(M, 0.0);
    }
    bool folded = false;

    std::vector<std::string> ops;
    std::vector<float> args;
    std::string sum_input;
    std::vector<size_t> eaten;
    std::string cur = conv.outputs[0];
    size_t last = ci;
    auto take = [&](std::vector<size_t> nodes, const std::string& out) {
      for (size_t k : nodes) {
        eaten.push_back(k);
        last = std::max(last, k);
      }
      cur = out;
    };
    auto push = [&](const char* op, float a, float b) {
      ops.push_back(op);
      args.push_back(a);
      args.push_back(b);
    };

    for (;;) {
      std::vector<size_t> hs_nodes;
      std::string hs_out;
      if (match_hardswish(cur, rank, &hs_nodes, &hs_out)) {
        push("hardswish", 0, 0);
        take(hs_nodes, hs_out);
        continue;
      }
      auto nx = sole_consumer(cur);
      if (!nx) break;
      const Node& n = g_.nodes[*nx];
      if (!n.domain.empty() || n.inputs.empty() || !only_first_output(n)) break;
      const std::string& out = n.outputs[0];
      const std::string other = other_input(n, cur);

      // Folds into the weights, before any post-op.
      if (can_fold && ops.empty()) {
        if (n.op_type == "BatchNormalization" && n.inputs.size() == 5 && n.inputs[0] == cur &&
            n.attr_int("training_mode", 0) == 0 && n.attr_int("spatial", 1) == 1 &&
            (n.opset >= 7 || n.attr_int("is_test", 1) == 1)) {
          std::vector<double> gamma, beta, mean, var;
          if (vector_f32(n.inputs[1], M, &gamma) && vector_f32(n.inputs[2], M, &beta) &&
              vector_f32(n.inputs[3], M, &mean) && vector_f32(n.inputs[4], M, &var)) {
            double eps = n.attr_float("epsilon", 1e-5f);
            for (int64_t m = 0; m < M; ++m) {
              double s = gamma[m] / std::sqrt(var[m] + eps);
              scale[m] *= s;
              shift[m] = (shift[m] - mean[m]) * s + beta[m];
            }
            folded = true;
            take({*nx}, out);
            continue;
          }
        }
        if (fold_per_channel(n, cur, other, M, rank, &scale, &shift)) {
          folded = true;
          take({*nx}, out);
          continue;
        }
      }

      // Post-ops.
      if (auto op = unary_fused_op(n, cur, rank, lookup())) {
        add_fused_op(ops, args, *op);
        take({*nx}, out);
        continue;
      }
      if ((n.op_type == "Add" || n.op_type == "Sum") && n.inputs.size() == 2 && !other.empty() && sum_input.empty() &&
          !constant(other)) {
        sum_input = other;
        push("sum", 0, 0);
        take({*nx}, out);
        continue;
      }
      break;
    }
    if (eaten.empty()) return false;

    Node fused = conv;
    if (folded) {
      // The weights are scaled in place when nothing else can see them: this Conv is their
      // only reader, they are no graph input or output, and no other tensor shares their
      // buffer (ConstantOfShape weights, and most imported ones). Otherwise into a copy.
      // A weight tensor is often most of the model: a copy means fresh memory to fault in.
      const std::string& wname = conv.inputs[1];
      bool in_place = num_uses(wname) == 1 && !pinned_.count(wname) && !graph_inputs_.count(wname) &&
                      W->buffer() && W->buffer().use_count() == 1;
      int64_t per = W->numel() / M;
      const float* wp = W->data<float>();
      Tensor w2 = in_place ? *W : Tensor::host(DataType::kFloat32, W->shape());
      float* wq = w2.data<float>();
      Tensor b2 = Tensor::host(DataType::kFloat32, Shape{M});
      float* bq = b2.data<float>();
      for (int64_t m = 0; m < M; ++m) {
        const double sm = scale[m];
        const float* src = wp + m * per;
        float* dst = wq + m * per;
        for (int64_t k = 0; k < per; ++k) dst[k] = static_cast<float>(src[k] * sm);
        double b = B ? B->data<float>()[m] : 0.0;
        bq[m] = static_cast<float>(b * scale[m] + shift[m]);
      }
      std::string wn = in_place ? wname : fresh(wname);
      std::string bn = fresh(has_bias ? conv.inputs[2] : wname + "_bias");
      if (!in_place) g_.initializers[wn] = std::move(w2);
      g_.initializers[bn] = std::move(b2);
      fused.inputs.resize(3);
      fused.inputs[1] = wn;
      fused.inputs[2] = bn;
    }
    if (!ops.empty()) set_fused_ops(fused, ops, args);
    if (!sum_input.empty()) {
      fused.inputs.resize(4);
      fused.inputs[3] = sum_input;
      ir::Attribute s;
      s.type = AttrType::kString;
      s.s = sum_input;
      fused.attrs["_sum_input"] = s;
    }
    replace_chain(ci, eaten, last, std::move(fused), cur);
    return true;
  }

  // ----- QDQ convolutions -> QLinearConv (int8 kernels)
  //
  //   DequantizeLinear(xq, xs, xz) ┐
  //   DequantizeLinear(wq, ws, wz) ┼ Conv [→ Relu] → QuantizeLinear(·, ys, yz)
  //   [DequantizeLinear(bq, xs·ws)]┘
  //
  // becomes QLinearConv(xq, xs, xz, wq, ws, wz, ys, yz, bq), writing the QuantizeLinear's
  // output: the convolution then runs on int8 data with the requantisation fused (the
  // CPU's oneDNN int8 kernel), and its result stays int8 for the next such group. The
  // two compute the same real-valued convolution and round once, so they agree to one
  // quantisation step. Scales and zero points must be constants: x and y per tensor, w
  // per tensor or per output channel (axis 0), b int32 with scale x_scale·w_scale (as
  // quantisers write it) and zero point 0. A Relu between Conv and QuantizeLinear goes
  // only where it changes nothing (y's zero point is the smallest value of its type).
  // In CPU sessions a ConvTranspose whose kernel equals its stride fuses likewise (w per
  // output channel on its axis 1), into the internal QLinearConvTranspose.

  // The live node writing `v`.
  std::optional<size_t> producer(const std::string& v) const {
    auto it = producer_.find(v);
    if (it == producer_.end() || dead_[it->second]) return std::nullopt;
    return it->second;
  }

  bool constant_int8(const std::string& name, int64_t max_n, DataType* t) const {
    const Tensor* c = constant(name);
    if (!c || !c->on_host() || (c->dtype() != DataType::kUInt8 && c->dtype() != DataType::kInt8) || c->rank() > 1) return false;
    if (c->numel() != 1 && c->numel() != max_n) return false;
    *t = c->dtype();
    return true;
  }

  // A QuantizeLinear/DequantizeLinear of the default domain with constant scale (f32,
  // one value or `per` values on `axis_want` when per > 1) and zero point (int8/uint8 or
  // omitted). `*zt` is the zero point's type (kUndefined when omitted).
  bool qdq_params(const Node& n, int64_t per, int axis_want, int rank, DataType* zt) const {
    if (!n.domain.empty() || n.inputs.size() < 2 || n.inputs[1].empty() || n.outputs.size() != 1) return false;
    if (n.has_attr("block_size") && n.attr_int("block_size", 0) != 0) return false;
    const Tensor* sc = constant(n.inputs[1]);
    if (!sc || !sc->on_host() || sc->dtype() != DataType::kFloat32 || sc->rank() > 1) return false;
    if (sc->numel() != 1) {
      if (per <= 1 || sc->numel() != per) return false;
      int64_t axis = n.attr_int("axis", 1);
      if (axis < 0) axis += rank;
      if (axis != axis_want) return false;
    }
    *zt = DataType::kUndefined;
    if (n.inputs.size() > 2 && !n.inputs[2].empty()) {
      const Tensor* z = constant(n.inputs[2]);
      if (!z || !z->on_host() || (z->dtype() != DataType::kUInt8 && z->dtype() != DataType::kInt8) || z->rank() > 1 ||
          z->numel() != sc->numel())
        return false;
      *zt = z->dtype();
    }
    return true;
  }

  // The zero point input of Q/DQ node `n` (`zt` its type, kUndefined when omitted), or a
  // new constant zero of type `t` with `count` values: QLinearConv and QLinearMatMul
  // require every zero point.
  std::string zero_point_of(const Node& n, DataType zt, DataType t, int64_t count) {
    return zt == DataType::kUndefined ? zero_point(n.inputs[0], t, count) : n.inputs[2];
  }

  // A constant zero point of `t` named for `base`.
  std::string zero_point(const std::string& base, DataType t, int64_t n) {
    std::string name = fresh(base + "_zero_point");
    Tensor z = Tensor::host(t, n == 1 ? Shape{} : Shape{n});
    std::memset(z.raw(), 0, z.nbytes());
    g_.initializers[name] = std::move(z);
    return name;
  }

  // A quantised bias `v`: DequantizeLinear(bq int32 [M], bs = xs * ws, zero point 0), `xs`
  // one scale, `ws` one or M; `*bq` names the int32 constant, `*db` is its dequantiser.
  bool int32_bias(const std::string& v, int64_t M, const Tensor* xs_t, const Tensor* ws, std::string* bq,
                  std::optional<size_t>* db) const {
    *db = producer(v);
    if (!*db || !xs_t || !ws) return false;
    const Node& DB = g_.nodes[**db];
    const Tensor* b = DB.op_type == "DequantizeLinear" && DB.domain.empty() ? constant(DB.inputs[0]) : nullptr;
    if (!b || !b->on_host() || b->dtype() != DataType::kInt32 || b->rank() != 1 || b->dim(0) != M) return false;
    const Tensor* bs = DB.inputs.size() > 1 ? constant(DB.inputs[1]) : nullptr;
    if (!bs || !bs->on_host() || bs->dtype() != DataType::kFloat32 || (bs->numel() != 1 && bs->numel() != M)) return false;
    if (bs->numel() > 1 && DB.attr_int("axis", 1) != 0 && DB.attr_int("axis", 1) != -1) return false;  // as written, invalid
    if (DB.inputs.size() > 2 && !DB.inputs[2].empty()) {
      const Tensor* bz = constant(DB.inputs[2]);
      if (!bz || !bz->on_host() || bz->dtype() != DataType::kInt32) return false;
      for (int64_t i = 0; i < bz->numel(); ++i)
        if (bz->data<int32_t>()[i] != 0) return false;
    }
    const float xs = xs_t->data<float>()[0];
    for (int64_t m = 0; m < M; ++m) {
      const float want = xs * ws->data<float>()[ws->numel() == 1 ? 0 : m];
      const float got = bs->data<float>()[bs->numel() == 1 ? 0 : m];
      if (std::fabs(got - want) > 1e-6f * std::fabs(want) + 1e-30f) return false;
    }
    *bq = DB.inputs[0];
    return true;
  }

  // A QuantizeLinear `Q` that fits the int8 kernels (per tensor, its output type that of
  // its zero point, uint8 when omitted): y's type in `*yt`, its zero point's in `*yzt`.
  bool int8_quantizer(const Node& Q, int rank, DataType* yt, DataType* yzt) const {
    if (Q.op_type != "QuantizeLinear" || !qdq_params(Q, 1, 1, rank, yzt)) return false;
    *yt = *yzt == DataType::kUndefined ? DataType::kUInt8 : *yzt;
    return !(Q.has_attr("output_dtype") && Q.attr_int("output_dtype", 0) != 0 &&
             Q.attr_int("output_dtype", 0) != static_cast<int64_t>(*yt == DataType::kUInt8 ? 2 : 3));
  }

  bool fuse_qdq_conv(size_t ci) {
    const Node& conv = g_.nodes[ci];
    // A ConvTranspose whose kernel equals its stride becomes the CPU's internal
    // QLinearConvTranspose (backend/qlinear_conv_transpose.h).
    const bool transpose = conv.op_type == "ConvTranspose" && cpu_ops_;
    if ((conv.op_type != "Conv" && !transpose) || !conv.domain.empty() || conv.outputs.size() != 1 ||
        conv.outputs[0].empty() || conv.inputs.size() < 2 || conv.inputs.size() > 3 || conv.has_attr("_post_ops"))
      return false;
    auto dx = producer(conv.inputs[0]);
    auto dw = producer(conv.inputs[1]);
    if (!dx || !dw) return false;
    const Node& DX = g_.nodes[*dx];
    const Node& DW = g_.nodes[*dw];
    if (DX.op_type != "DequantizeLinear" || DW.op_type != "DequantizeLinear") return false;
    // w: constant int8/uint8 [M, C/G, k...], per tensor or per output channel.
    const Tensor* wq = constant(DW.inputs[0]);
    if (!wq || !wq->on_host() || (wq->dtype() != DataType::kUInt8 && wq->dtype() != DataType::kInt8) || wq->rank() < 3 ||
        wq->dim(0) < 1)
      return false;
    // Output channels: a Conv's weight axis 0, a ConvTranspose's axis 1 ([C, M, kh, kw]).
    if (transpose && wq->rank() != 4) return false;
    const int w_axis = transpose ? 1 : 0;
    const int64_t M = wq->dim(w_axis);
    const int rank = wq->rank();
    if (transpose && !transpose_is_pixel_product(parse_conv_attrs(conv), {wq->dim(0), M, wq->dim(2), wq->dim(3)}))
      return false;
    DataType xzt = DataType::kUndefined, wzt = DataType::kUndefined, yzt = DataType::kUndefined;
    if (!qdq_params(DX, 1, 1, rank, &xzt) || !qdq_params(DW, M, w_axis, rank, &wzt)) return false;
    const DataType xt = type_of(DX.inputs[0]);
    if (xt != DataType::kUInt8 && xt != DataType::kInt8) return false;
    if ((xzt != DataType::kUndefined && xzt != xt) || (wzt != DataType::kUndefined && wzt != wq->dtype())) return false;
    // The output: Conv [→ Relu] → QuantizeLinear, each the sole reader of what it reads.
    std::vector<size_t> eaten;
    std::string cur = conv.outputs[0];
    auto nx = sole_consumer(cur);
    bool relu = false;
    if (nx && g_.nodes[*nx].op_type == "Relu" && g_.nodes[*nx].domain.empty() && g_.nodes[*nx].outputs.size() == 1) {
      relu = true;
      eaten.push_back(*nx);
      cur = g_.nodes[*nx].outputs[0];
      nx = sole_consumer(cur);
    }
    if (!nx) return false;
    const Node& Q = g_.nodes[*nx];
    DataType yt = DataType::kUndefined;
    if (!int8_quantizer(Q, rank, &yt, &yzt)) return false;
    if (relu) {
      const Tensor* yz = yzt == DataType::kUndefined ? nullptr : constant(Q.inputs[2]);
      const int64_t zero = yz ? (yt == DataType::kUInt8 ? yz->data<uint8_t>()[0] : yz->data<int8_t>()[0]) : 0;
      if (zero != (yt == DataType::kUInt8 ? 0 : -128)) return false;  // the Relu would clip: keep it in float
    }
    eaten.push_back(*nx);
    std::string bq;
    std::optional<size_t> db;
    if (conv.inputs.size() > 2 && !conv.inputs[2].empty() &&
        !int32_bias(conv.inputs[2], M, constant(DX.inputs[1]), constant(DW.inputs[1]), &bq, &db))
      return false;
    Node fused;
    fused.name = conv.name;
    fused.op_type = transpose ? kQLinearConvTranspose : "QLinearConv";
    fused.domain = transpose ? kQLinearConvTransposeDomain : "";
    fused.opset = transpose ? 1 : conv.opset;
    fused.attrs = conv.attrs;
    fused.inputs = {DX.inputs[0],
                    DX.inputs[1],
                    zero_point_of(DX, xzt, xt, 1),
                    DW.inputs[0],
                    DW.inputs[1],
                    zero_point_of(DW, wzt, wq->dtype(), constant(DW.inputs[1])->numel()),
                    Q.inputs[1],
                    zero_point_of(Q, yzt, DataType::kUInt8, 1)};
    if (!bq.empty()) fused.inputs.push_back(bq);
    fused.outputs = {Q.outputs[0]};
    const size_t last = *nx;
    replace_chain(ci, eaten, last, std::move(fused), Q.outputs[0]);
    // The weight and bias dequantisers are no longer read (the x one may still be).
    for (auto d : {dw, db, dx})
      if (d && !pinned_.count(g_.nodes[*d].outputs[0]) && num_uses_except(g_.nodes[*d].outputs[0], ci) == 0) dead_[*d] = true;
    return true;
  }

  // DequantizeLinear(aq, as, az) → MatMul(·, DequantizeLinear(bq 2-D constant, bs, bz))
  // → QuantizeLinear(·, ys, yz) becomes QLinearMatMul(aq, as, az, bq, bs, bz, ys, yz):
  // a per tensor, b per tensor or per column (axis 1), y per tensor, all constants.
  bool fuse_qdq_matmul(size_t mi) {
    const Node& mm = g_.nodes[mi];
    if (mm.op_type != "MatMul" || !mm.domain.empty() || mm.inputs.size() != 2 || mm.outputs.size() != 1 || mm.outputs[0].empty())
      return false;
    auto da = producer(mm.inputs[0]);
    auto db = producer(mm.inputs[1]);
    if (!da || !db) return false;
    const Node& DA = g_.nodes[*da];
    const Node& DB = g_.nodes[*db];
    if (DA.op_type != "DequantizeLinear" || DB.op_type != "DequantizeLinear") return false;
    const Tensor* bq = constant(DB.inputs[0]);
    if (!bq || !bq->on_host() || (bq->dtype() != DataType::kUInt8 && bq->dtype() != DataType::kInt8) || bq->rank() != 2) return false;
    DataType azt = DataType::kUndefined, bzt = DataType::kUndefined, yzt = DataType::kUndefined;
    if (!qdq_params(DA, 1, 1, 2, &azt) || !qdq_params(DB, bq->dim(1), 1, 2, &bzt)) return false;
    const DataType at = type_of(DA.inputs[0]);
    if (at != DataType::kUInt8 && at != DataType::kInt8) return false;
    if ((azt != DataType::kUndefined && azt != at) || (bzt != DataType::kUndefined && bzt != bq->dtype())) return false;
    auto nx = sole_consumer(mm.outputs[0]);
    if (!nx) return false;
    const Node& Q = g_.nodes[*nx];
    DataType yt = DataType::kUndefined;
    if (!int8_quantizer(Q, 2, &yt, &yzt)) return false;
    Node fused;
    fused.name = mm.name;
    fused.op_type = "QLinearMatMul";
    fused.opset = mm.opset;
    fused.inputs = {DA.inputs[0],
                    DA.inputs[1],
                    zero_point_of(DA, azt, at, 1),
                    DB.inputs[0],
                    DB.inputs[1],
                    zero_point_of(DB, bzt, bq->dtype(), constant(DB.inputs[1])->numel()),
                    Q.inputs[1],
                    zero_point_of(Q, yzt, DataType::kUInt8, 1)};
    fused.outputs = {Q.outputs[0]};
    const size_t last = *nx;
    replace_chain(mi, {last}, last, std::move(fused), Q.outputs[0]);
    for (auto d : {db, da})
      if (!pinned_.count(g_.nodes[*d].outputs[0]) && num_uses_except(g_.nodes[*d].outputs[0], mi) == 0) dead_[*d] = true;
    return true;
  }

  // DequantizeLinear(aq, as, az) → Gemm(·, DequantizeLinear(bq 2-D constant, bs, bz)
  // [, DequantizeLinear(cq int32 [N], as·bs)]) → QuantizeLinear(·, ys, yz), with transA 0,
  // alpha 1 and beta 1, becomes the internal QLinearGemm (backend/qlinear_gemm.h; CPU
  // sessions only): b per tensor or per output column (axis 1, or 0 when transB), stored
  // [K, N] — transposed here when transB.
  bool fuse_qdq_gemm(size_t gi) {
    const Node& gm = g_.nodes[gi];
    if (gm.op_type != "Gemm" || !gm.domain.empty() || gm.inputs.size() < 2 || gm.inputs.size() > 3 ||
        gm.outputs.size() != 1 || gm.outputs[0].empty() || gm.attr_int("transA", 0) != 0 ||
        gm.attr_float("alpha", 1.f) != 1.f)
      return false;
    const bool has_c = gm.inputs.size() > 2 && !gm.inputs[2].empty();
    if (has_c && gm.attr_float("beta", 1.f) != 1.f) return false;
    const bool trans_b = gm.attr_int("transB", 0) != 0;
    auto da = producer(gm.inputs[0]);
    auto db = producer(gm.inputs[1]);
    if (!da || !db) return false;
    const Node& DA = g_.nodes[*da];
    const Node& DB = g_.nodes[*db];
    if (DA.op_type != "DequantizeLinear" || DB.op_type != "DequantizeLinear") return false;
    const Tensor* bq = constant(DB.inputs[0]);
    if (!bq || !bq->on_host() || (bq->dtype() != DataType::kUInt8 && bq->dtype() != DataType::kInt8) || bq->rank() != 2 ||
        bq->numel() == 0)
      return false;
    const int64_t N = bq->dim(trans_b ? 0 : 1), K = bq->dim(trans_b ? 1 : 0);
    DataType azt = DataType::kUndefined, bzt = DataType::kUndefined, yzt = DataType::kUndefined, yt = DataType::kUndefined;
    if (!qdq_params(DA, 1, 1, 2, &azt) || !qdq_params(DB, N, trans_b ? 0 : 1, 2, &bzt)) return false;
    const DataType at = type_of(DA.inputs[0]);
    if (at != DataType::kUInt8 && at != DataType::kInt8) return false;
    if ((azt != DataType::kUndefined && azt != at) || (bzt != DataType::kUndefined && bzt != bq->dtype())) return false;
    auto nx = sole_consumer(gm.outputs[0]);
    if (!nx || !int8_quantizer(g_.nodes[*nx], 2, &yt, &yzt)) return false;
    const Node& Q = g_.nodes[*nx];
    std::string cq;
    std::optional<size_t> dc;
    if (has_c && !int32_bias(gm.inputs[2], N, constant(DA.inputs[1]), constant(DB.inputs[1]), &cq, &dc)) return false;
    std::string b = DB.inputs[0];
    if (trans_b) {
      // B [N, K] as [K, N], once.
      Tensor t = Tensor::host(bq->dtype(), Shape{K, N});
      const uint8_t* in = static_cast<const uint8_t*>(bq->raw());
      uint8_t* out = static_cast<uint8_t*>(t.raw());
      for (int64_t n = 0; n < N; ++n)
        for (int64_t k = 0; k < K; ++k) out[k * N + n] = in[n * K + k];
      b = fresh(DB.inputs[0] + "_transposed");
      g_.initializers[b] = std::move(t);
    }
    Node fused;
    fused.name = gm.name;
    fused.op_type = kQLinearGemm;
    fused.domain = kQLinearGemmDomain;
    fused.opset = 1;
    fused.inputs = {DA.inputs[0],
                    DA.inputs[1],
                    zero_point_of(DA, azt, at, 1),
                    b,
                    DB.inputs[1],
                    zero_point_of(DB, bzt, bq->dtype(), constant(DB.inputs[1])->numel()),
                    Q.inputs[1],
                    zero_point_of(Q, yzt, DataType::kUInt8, 1)};
    if (!cq.empty()) fused.inputs.push_back(cq);
    fused.outputs = {Q.outputs[0]};
    const size_t last = *nx;
    replace_chain(gi, {last}, last, std::move(fused), Q.outputs[0]);
    for (auto d : {db, dc, da})
      if (d && !pinned_.count(g_.nodes[*d].outputs[0]) && num_uses_except(g_.nodes[*d].outputs[0], gi) == 0) dead_[*d] = true;
    return true;
  }

  // Readers of `v` other than node `skip` (which is being replaced).
  size_t num_uses_except(const std::string& v, size_t skip) const {
    auto it = consumers_.find(v);
    if (it == consumers_.end()) return 0;
    size_t n = 0;
    for (size_t c : it->second)
      if (c != skip && !dead_[c]) ++n;
    return n;
  }

  // HardSwish written out (x*Clip(x+3,0,6)/6 or x*HardSigmoid(x)) on a value no Conv
  // fusion took — a graph input (the back part of a split model), an Add's output — becomes
  // one HardSwish node: one pass over the tensor instead of three or four.
  void fuse_standalone_hardswish() {
    std::vector<std::string> values;
    for (const auto& in : g_.inputs) values.push_back(in.name);
    for (size_t i = 0; i < g_.nodes.size(); ++i)
      if (!dead_[i])
        for (const auto& o : g_.nodes[i].outputs)
          if (!o.empty()) values.push_back(o);
    for (const std::string& v : values) {
      if (type_of(v) != DataType::kFloat32) continue;
      const ir::ValueInfo* vi = g_.info(v);
      // The constants may not broadcast the result to a higher rank.
      int rank = vi && vi->shape ? static_cast<int>(vi->shape->size()) : 0;
      std::vector<size_t> nodes;
      std::string out;
      if (!match_hardswish(v, rank, &nodes, &out)) continue;
      bool live = true;
      for (size_t k : nodes) live = live && !dead_[k];
      if (!live) continue;
      size_t last = *std::max_element(nodes.begin(), nodes.end());
      Node hs;
      hs.name = g_.nodes[last].name + "/hardswish";
      hs.op_type = "HardSwish";
      hs.opset = 14;
      hs.inputs = {v};
      hs.outputs = {out};
      for (size_t k : nodes) dead_[k] = true;
      dead_[last] = false;
      g_.nodes[last] = std::move(hs);
      done_[last] = true;
      index();
    }
  }

  // A BatchNormalization that no Conv absorbed (DenseNet's, on concatenated features):
  // per-channel Mul/Add constants after it fold into its scale and bias, and a Relu after
  // that becomes its `_relu` flag, so the four passes over the tensor become one.
  bool fuse_batchnorm(size_t bi) {
    const Node& bn = g_.nodes[bi];
    if (bn.op_type != "BatchNormalization" || !bn.domain.empty() || bn.inputs.size() != 5 || !only_first_output(bn) ||
        bn.attr_int("training_mode", 0) != 0 || bn.attr_int("spatial", 1) != 1 || bn.has_attr("_relu") ||
        !(bn.opset >= 7 || bn.attr_int("is_test", 1) == 1))
      return false;
    const ir::ValueInfo* xi = g_.info(bn.inputs[0]);
    if (!xi || !xi->shape || xi->shape->size() < 2 || type_of(bn.inputs[0]) != DataType::kFloat32) return false;
    const int rank = static_cast<int>(xi->shape->size());
    const Tensor* S = constant(bn.inputs[1]);
    if (!S || S->rank() != 1) return false;
    const int64_t C = S->dim(0);
    std::vector<double> gamma, beta, mean, var;
    if (!vector_f32(bn.inputs[1], C, &gamma) || !vector_f32(bn.inputs[2], C, &beta) ||
        !vector_f32(bn.inputs[3], C, &mean) || !vector_f32(bn.inputs[4], C, &var))
      return false;
    std::vector<double> scale(C, 1.0), shift(C, 0.0);
    bool folded = false, relu = false;
    std::vector<size_t> eaten;
    std::string cur = bn.outputs[0];
    size_t last = bi;
    for (;;) {
      auto nx = sole_consumer(cur);
      if (!nx) break;
      const Node& n = g_.nodes[*nx];
      if (!n.domain.empty() || n.inputs.empty() || !only_first_output(n)) break;
      const std::string other = other_input(n, cur);
      if (!relu && fold_per_channel(n, cur, other, C, rank, &scale, &shift)) {
        folded = true;
      } else if (!relu && n.op_type == "Relu" && n.inputs.size() == 1) {
        relu = true;
      } else {
        break;
      }
      eaten.push_back(*nx);
      last = std::max(last, *nx);
      cur = n.outputs[0];
      if (relu) break;
    }
    if (eaten.empty()) return false;
    Node fused = bn;
    if (folded) {
      // y = gamma' (x - mean) / sqrt(var + eps) + beta', with gamma' = gamma s, beta' = beta s + t.
      Tensor g2 = Tensor::host(DataType::kFloat32, Shape{C}), b2 = Tensor::host(DataType::kFloat32, Shape{C});
      for (int64_t m = 0; m < C; ++m) {
        g2.data<float>()[m] = static_cast<float>(gamma[m] * scale[m]);
        b2.data<float>()[m] = static_cast<float>(beta[m] * scale[m] + shift[m]);
      }
      std::string gn = fresh(bn.inputs[1]), bname = fresh(bn.inputs[2]);
      g_.initializers[gn] = std::move(g2);
      g_.initializers[bname] = std::move(b2);
      fused.inputs[1] = gn;
      fused.inputs[2] = bname;
    }
    if (relu) {
      ir::Attribute a;
      a.type = AttrType::kInt;
      a.i = 1;
      fused.attrs["_relu"] = a;
    }
    replace_chain(bi, eaten, last, std::move(fused), cur);
    return true;
  }

  void compact() {
    std::vector<Node> kept;
    kept.reserve(g_.nodes.size());
    for (size_t i = 0; i < g_.nodes.size(); ++i)
      if (!dead_[i]) kept.push_back(std::move(g_.nodes[i]));
    g_.nodes = std::move(kept);
    // Initializers nothing reads any more (replaced weights).
    std::unordered_set<std::string> used(pinned_.begin(), pinned_.end());
    for (const auto& n : g_.nodes)
      for (const auto& in : n.inputs) used.insert(in);
    for (auto it = g_.initializers.begin(); it != g_.initializers.end();) {
      if (!used.count(it->first) && !graph_inputs_.count(it->first)) it = g_.initializers.erase(it);
      else ++it;
    }
  }

  Graph& g_;
  bool input_defaults_constant_;
  bool cpu_ops_;  // may make the CPU backend's internal nodes (QLinearGemm)
  std::unordered_set<std::string> pinned_, graph_inputs_;
  std::unordered_map<std::string, std::vector<size_t>> consumers_;
  std::unordered_map<std::string, size_t> producer_;  // value -> the node writing it
  std::vector<bool> dead_, done_;
  int counter_ = 0;
};

}  // namespace

Status optimize_graph(ir::Graph& g, bool input_defaults_constant, bool cpu_ops) {
  return Optimizer(g, input_defaults_constant, cpu_ops).run();
}

}  // namespace bulkhead::exec
