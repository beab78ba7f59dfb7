// ai.onnx.ml operators: LabelEncoder, TreeEnsemble. (Binarizer and ArrayFeatureExtractor are in
// misc.cc.)
#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

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

// TreeEnsemble (ai.onnx.ml 5): each tree walks from its root through branch nodes (feature
// <=, <, >=, >, ==, != split, or membership in a set) to a leaf, which adds its weight to
// its target; the trees' contributions are aggregated (average, sum, min, max) and
// post-transformed (none, softmax, logistic, softmax ignoring zeros, probit). Computed in
// double. The node graph is checked at session creation: indices in range, no cycles.
struct TreeModel {
  enum Mode : uint8_t { kLeq = 0, kLt, kGte, kGt, kEq, kNeq, kMember };
  struct Node {
    uint8_t mode;
    int64_t feature;
    double split;
    int64_t next[2];  // [false, true]: a node index, or a leaf index where is_leaf
    bool is_leaf[2];
    bool missing_true;
    int64_t set = -1;  // index into sets for kMember
  };
  std::vector<Node> nodes;
  std::vector<std::unordered_set<double>> sets;  // NaN members are kept apart
  std::vector<bool> set_has_nan;
  std::vector<int64_t> roots, leaf_target;
  std::vector<double> leaf_weight;
  int64_t targets = 0, features = 0;
  int64_t aggregate = 1, post = 0;
};

Result<std::vector<double>> doubles_attr(const ir::Node& n, const char* name, const std::string& where, bool required) {
  const ir::Attribute* a = n.attr(name);
  if (!a) {
    if (required) return invalid_model(where + "missing attribute '" + name + "'");
    return std::vector<double>{};
  }
  if (a->type == ir::AttrType::kFloats) return std::vector<double>(a->floats.begin(), a->floats.end());
  if (a->type != ir::AttrType::kTensor || !dtype_is_float(a->t.dtype()))
    return invalid_model(where + "attribute '" + name + "' must be a floating-point tensor");
  Tensor d = Tensor::host(DataType::kFloat64, a->t.shape());
  BH_RETURN_IF_ERROR(ew::convert_into(a->t, d, 1, where));
  return std::vector<double>(d.data<double>(), d.data<double>() + d.numel());
}

double erfinv(double y) {
  // Newton steps on erf from a rough start; y in (-1, 1).
  double x = y * (1.0 + 0.2 * y * y);
  for (int i = 0; i < 60; ++i) {
    const double e = std::erf(x) - y;
    const double dx = e / (2.0 / std::sqrt(M_PI) * std::exp(-x * x));
    x -= dx;
    if (std::fabs(dx) < 1e-15 * std::max(1.0, std::fabs(x))) break;
  }
  return x;
}

Result<std::unique_ptr<Kernel>> make_tree_ensemble(const KernelInfo& info) {
  const ir::Node& n = info.node;
  const std::string w = info.where();
  auto m = std::make_shared<TreeModel>();
  const auto modes_attr = n.attr("nodes_modes");
  if (!modes_attr || modes_attr->type != ir::AttrType::kTensor || modes_attr->t.dtype() != DataType::kUInt8)
    return invalid_model(w + "nodes_modes must be a uint8 tensor");
  const Tensor& modes = modes_attr->t;
  const int64_t count = modes.numel();
  const auto features = n.attr_ints("nodes_featureids"), tn = n.attr_ints("nodes_truenodeids"), fn = n.attr_ints("nodes_falsenodeids"),
             tl = n.attr_ints("nodes_trueleafs"), fl = n.attr_ints("nodes_falseleafs"), mt = n.attr_ints("nodes_missing_value_tracks_true");
  BH_ASSIGN_OR_RETURN(auto splits, doubles_attr(n, "nodes_splits", w, true));
  BH_ASSIGN_OR_RETURN(auto members, doubles_attr(n, "membership_values", w, false));
  BH_ASSIGN_OR_RETURN(m->leaf_weight, doubles_attr(n, "leaf_weights", w, true));
  m->leaf_target = n.attr_ints("leaf_targetids");
  m->roots = n.attr_ints("tree_roots");
  m->targets = n.attr_int("n_targets", 0);
  m->aggregate = n.attr_int("aggregate_function", 1);
  m->post = n.attr_int("post_transform", 0);
  auto sized = [&](size_t got, const char* what) -> Status {
    if (static_cast<int64_t>(got) != count)
      return invalid_model(w + what + " has " + std::to_string(got) + " values for " + std::to_string(count) + " nodes");
    return Status::ok();
  };
  BH_RETURN_IF_ERROR(sized(features.size(), "nodes_featureids"));
  BH_RETURN_IF_ERROR(sized(splits.size(), "nodes_splits"));
  BH_RETURN_IF_ERROR(sized(tn.size(), "nodes_truenodeids"));
  BH_RETURN_IF_ERROR(sized(fn.size(), "nodes_falsenodeids"));
  BH_RETURN_IF_ERROR(sized(tl.size(), "nodes_trueleafs"));
  BH_RETURN_IF_ERROR(sized(fl.size(), "nodes_falseleafs"));
  if (!mt.empty()) BH_RETURN_IF_ERROR(sized(mt.size(), "nodes_missing_value_tracks_true"));
  if (m->leaf_target.size() != m->leaf_weight.size())
    return invalid_model(w + "leaf_targetids and leaf_weights differ in length");
  if (m->targets < 1 || m->targets > (int64_t{1} << 24)) return invalid_model(w + "n_targets must be between 1 and 2^24");
  if (m->aggregate < 0 || m->aggregate > 3) return unsupported(w + "aggregate_function " + std::to_string(m->aggregate) + " is not 0-3");
  if (m->post < 0 || m->post > 4) return unsupported(w + "post_transform " + std::to_string(m->post) + " is not 0-4");
  for (int64_t t : m->leaf_target)
    if (t < 0 || t >= m->targets) return invalid_model(w + "leaf target " + std::to_string(t) + " is outside n_targets");
  const int64_t leaves = static_cast<int64_t>(m->leaf_weight.size());
  size_t member_pos = 0;
  m->nodes.resize(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) {
    TreeModel::Node& d = m->nodes[i];
    d.mode = modes.data<uint8_t>()[i];
    if (d.mode > TreeModel::kMember) return unsupported(w + "node " + std::to_string(i) + " has mode " + std::to_string(d.mode) + " (0-6)");
    d.feature = features[i];
    if (d.feature < 0 || d.feature > (int64_t{1} << 30)) return invalid_model(w + "node " + std::to_string(i) + " has feature " + std::to_string(d.feature));
    m->features = std::max(m->features, d.feature + 1);
    d.split = splits[i];
    d.next[1] = tn[i];
    d.next[0] = fn[i];
    d.is_leaf[1] = tl[i] != 0;
    d.is_leaf[0] = fl[i] != 0;
    d.missing_true = !mt.empty() && mt[i] != 0;
    for (int side = 0; side < 2; ++side)
      if (d.next[side] < 0 || d.next[side] >= (d.is_leaf[side] ? leaves : count))
        return invalid_model(w + "node " + std::to_string(i) + " points to " + (d.is_leaf[side] ? "leaf " : "node ") +
                             std::to_string(d.next[side]) + ", which does not exist");
    if (d.mode == TreeModel::kMember) {
      // Each membership node takes the next NaN-terminated run of membership_values.
      std::unordered_set<double> set;
      while (member_pos < members.size() && !std::isnan(members[member_pos])) set.insert(members[member_pos++]);
      if (member_pos >= members.size()) return invalid_model(w + "membership_values has no set for node " + std::to_string(i));
      ++member_pos;
      d.set = static_cast<int64_t>(m->sets.size());
      m->sets.push_back(std::move(set));
    }
  }
  if (m->roots.empty()) return invalid_model(w + "tree_roots is empty");
  // Every walk must end: no cycles among the nodes the roots reach.
  std::vector<uint8_t> state(static_cast<size_t>(count), 0);  // 0 new, 1 on the path, 2 done
  for (int64_t r : m->roots) {
    if (r < 0 || r >= count) return invalid_model(w + "tree root " + std::to_string(r) + " does not exist");
    std::vector<std::pair<int64_t, int>> stack{{r, 0}};
    while (!stack.empty()) {
      auto& [node, side] = stack.back();
      if (side == 0) {
        if (state[node] == 2) { stack.pop_back(); continue; }
        state[node] = 1;
      }
      if (side == 2) {
        state[node] = 2;
        stack.pop_back();
        continue;
      }
      const TreeModel::Node& d = m->nodes[node];
      const int s = side++;
      if (d.is_leaf[s]) continue;
      const int64_t c = d.next[s];
      if (state[c] == 1) return invalid_model(w + "the nodes reached from root " + std::to_string(r) + " form a cycle");
      if (state[c] == 0) stack.push_back({c, 0});
    }
  }
  return make_kernel([m](KernelContext& ctx) -> Status {
    const Tensor* x = ctx.input(0);
    if (!x || !dtype_is_float(x->dtype())) return invalid_argument(ctx.where() + "X must be a floating-point tensor");
    if (x->rank() != 1 && x->rank() != 2) return invalid_argument(ctx.where() + "X must be [N, F] or [F], got " + x->describe());
    const int64_t rows = x->rank() == 2 ? x->dim(0) : 1, cols = x->dim(-1);
    if (cols < m->features)
      return invalid_argument(ctx.where() + "X has " + std::to_string(cols) + " features, the trees use " + std::to_string(m->features));
    Tensor xd = Tensor::host(DataType::kFloat64, x->shape());
    BH_RETURN_IF_ERROR(ew::convert_into(*x, xd, 1, ctx.where()));
    const double* xv = xd.data<double>();
    const int64_t T = m->targets;
    std::vector<double> out(static_cast<size_t>(rows * T), 0.0);
    parallel_for(ctx.threads(), rows, 16, [&](int64_t b, int64_t e) {
      std::vector<bool> seen(static_cast<size_t>(T));
      for (int64_t r = b; r < e; ++r) {
        double* o = out.data() + r * T;
        std::fill(seen.begin(), seen.end(), false);
        for (int64_t root : m->roots) {
          int64_t node = root;
          while (true) {
            const TreeModel::Node& d = m->nodes[node];
            const double v = xv[r * cols + d.feature];
            bool go;
            if (std::isnan(v) && d.mode != TreeModel::kMember) go = d.missing_true;
            else switch (d.mode) {
              case TreeModel::kLeq: go = v <= d.split; break;
              case TreeModel::kLt: go = v < d.split; break;
              case TreeModel::kGte: go = v >= d.split; break;
              case TreeModel::kGt: go = v > d.split; break;
              case TreeModel::kEq: go = v == d.split; break;
              case TreeModel::kNeq: go = v != d.split; break;
              default: go = std::isnan(v) ? d.missing_true : m->sets[d.set].count(v) > 0; break;
            }
            if (d.is_leaf[go]) {
              const int64_t leaf = d.next[go], t = m->leaf_target[leaf];
              const double lw = m->leaf_weight[leaf];
              if (m->aggregate == 2) o[t] = seen[t] ? std::min(o[t], lw) : lw;
              else if (m->aggregate == 3) o[t] = seen[t] ? std::max(o[t], lw) : lw;
              else o[t] += lw;
              seen[t] = true;
              break;
            }
            node = d.next[go];
          }
        }
        if (m->aggregate == 0)
          for (int64_t t = 0; t < T; ++t) o[t] /= static_cast<double>(m->roots.size());
        if (m->post == 1 || m->post == 3) {  // softmax (3: zeros stay zero and take no share)
          double mx = -INFINITY, sum = 0;
          for (int64_t t = 0; t < T; ++t)
            if (m->post == 1 || o[t] != 0) mx = std::max(mx, o[t]);
          for (int64_t t = 0; t < T; ++t) {
            if (m->post == 3 && o[t] == 0) continue;
            o[t] = std::exp(o[t] - mx);
            sum += o[t];
          }
          for (int64_t t = 0; t < T; ++t)
            if (sum > 0) o[t] /= sum;
        } else if (m->post == 2) {
          for (int64_t t = 0; t < T; ++t) o[t] = 1.0 / (1.0 + std::exp(-o[t]));
        } else if (m->post == 4) {
          for (int64_t t = 0; t < T; ++t) o[t] = std::sqrt(2.0) * erfinv(2.0 * o[t] - 1.0);
        }
      }
    });
    BH_ASSIGN_OR_RETURN(Tensor y, ctx.allocate_output(0, x->dtype(), {rows, T}));
    Tensor src = Tensor::host(DataType::kFloat64, {rows, T});
    std::copy(out.begin(), out.end(), src.data<double>());
    return ew::convert_into(src, y, 1, ctx.where());
  });
}

}  // namespace

void register_ml_kernels(KernelTable& t) {
  t.add("LabelEncoder", 1, make_label_encoder, "ai.onnx.ml");
  t.add("TreeEnsemble", 5, make_tree_ensemble, "ai.onnx.ml");
}

}  // namespace bulkhead::cpu
