// Shape and type inference rules for element-wise maths and activations, reductions,
// normalisations, convolution and pooling, matrix products, recurrent layers, attention,
// quantisation, random and window generators, losses, strings and the ai.onnx.ml
// operators bulkhead meets. See infer.h.
#include <algorithm>
#include <cctype>
#include <cmath>
#include <map>

#include "ir/infer_rules.h"

namespace bulkhead::ir::infer {
namespace {

Dims slice_dims(const Dims& d, size_t b, size_t e) { return Dims(d.begin() + b, d.begin() + e); }

// ---------------------------------------------------------------------------------------
// Element-wise and same-shape operators.

Status rule_not(Ctx& c) {
  BH_RETURN_IF_ERROR(c.require_type(0, DataType::kBool, "input"));
  return same_as_input0(c);
}

Status rule_clip(Ctx& c) {
  if (c.opset() >= 11) BH_RETURN_IF_ERROR(c.require_same_types({0, 1, 2}));
  return same_as_input0(c);
}

Status rule_prelu(Ctx& c) {
  BH_RETURN_IF_ERROR(c.require_same_types({0, 1}));
  return same_as_input0(c);
}

Status rule_bool_same_shape(Ctx& c) {
  c.set_type(0, DataType::kBool);
  if (const Dims* s = c.in_shape(0)) c.set_shape(0, *s);
  return Status::ok();
}

Status rule_dropout(Ctx& c) {
  c.same_as_input(0, 0);
  c.set_type(1, c.opset() >= 10 ? DataType::kBool : c.in_type(0));
  if (const Dims* s = c.in_shape(0)) c.set_shape(1, *s);
  return Status::ok();
}

// ---------------------------------------------------------------------------------------
// Reductions, ArgMax/ArgMin.

Status rule_reduce(Ctx& c) {
  c.set_type(0, c.in_type(0));
  const Dims* in = c.in_shape(0);
  const std::string& op = c.node.op_type;
  const bool axes_input = c.opset() >= 18 || (op == "ReduceSum" && c.opset() >= 13);
  const bool keepdims = c.node.attr_int("keepdims", 1) != 0;
  std::vector<int64_t> axes;
  if (axes_input) {
    if (c.has_input(1) && !c.in_ints(1, &axes)) {
      if (in && keepdims) c.set_rank(0, static_cast<int>(in->size()));
      return Status::ok();
    }
  } else {
    axes = c.node.attr_ints("axes");
  }
  if (!in) return Status::ok();
  const int r = static_cast<int>(in->size());
  if (axes.empty() && axes_input && c.node.attr_int("noop_with_empty_axes", 0) != 0) {
    c.set_shape(0, *in);
    if (const Data* d = c.in_data(0)) c.set_data(0, *d);
    return Status::ok();
  }
  std::vector<bool> red(r, axes.empty());
  for (int64_t a : axes) {
    int ax = norm_axis(a, r);
    if (ax < 0) return Status::ok();
    red[ax] = true;
  }
  Dims out;
  for (int i = 0; i < r; ++i) {
    if (!red[i]) out.push_back((*in)[i]);
    else if (keepdims) out.push_back(fixed_dim(1));
  }
  c.set_shape(0, out);
  // The product or sum of a 1-D shape tensor (view(-1) patterns).
  const Data* d = c.in_data(0);
  if (d && r == 1 && red[0] && d->all_known() && (op == "ReduceProd" || op == "ReduceSum")) {
    int64_t acc = op == "ReduceProd" ? 1 : 0;
    for (int64_t v : d->ints())
      if (op == "ReduceProd" ? __builtin_mul_overflow(acc, v, &acc) : __builtin_add_overflow(acc, v, &acc))
        return Status::ok();
    Data res;
    res.scalar = !keepdims;
    res.v.push_back(Elem::of(acc));
    c.set_data(0, std::move(res));
  }
  return Status::ok();
}

Status rule_arg(Ctx& c) {
  c.set_type(0, DataType::kInt64);
  const Dims* in = c.in_shape(0);
  if (!in) return Status::ok();
  const int r = static_cast<int>(in->size());
  const int axis = norm_axis(c.node.attr_int("axis", 0), r);
  if (axis < 0) return Status::ok();
  Dims out = *in;
  if (c.node.attr_int("keepdims", 1) != 0) out[axis] = fixed_dim(1);
  else out.erase(out.begin() + axis);
  c.set_shape(0, out);
  return Status::ok();
}

// ---------------------------------------------------------------------------------------
// Normalisations.

// X, scale, B share one type up to opset 13; from 14 the statistics (input 3, 4 and
// outputs 1, 2) have their own, and from 15 scale and B too.
Status rule_batch_norm(Ctx& c) {
  if (c.opset() < 14) {
    BH_RETURN_IF_ERROR(c.require_same_types({0, 1, 2, 3, 4}));
  } else {
    BH_RETURN_IF_ERROR(c.require_same_types(c.opset() < 15 ? std::vector<int>{0, 1, 2} : std::vector<int>{1, 2}));
    BH_RETURN_IF_ERROR(c.require_same_types({3, 4}));
  }
  c.same_as_input(0, 0);
  const Dims* in = c.in_shape(0);
  const DataType stat = c.opset() >= 14 ? c.in_type(3) : c.in_type(0);
  for (int o = 1; o < c.num_outputs(); ++o) {
    c.set_type(o, stat);
    if (in && in->size() >= 2) c.set_shape(o, {(*in)[1]});
  }
  return Status::ok();
}

Status rule_layer_norm(Ctx& c) {
  c.same_as_input(0, 0);
  const DataType stash = static_cast<DataType>(c.node.attr_int("stash_type", 1));
  c.set_type(1, stash);
  c.set_type(2, stash);
  if (const Dims* in = c.in_shape(0)) {
    const int r = static_cast<int>(in->size());
    const int axis = norm_axis(c.node.attr_int("axis", -1), r);
    if (axis >= 0) {
      Dims s = *in;
      for (int i = axis; i < r; ++i) s[i] = fixed_dim(1);
      c.set_shape(1, s);
      c.set_shape(2, s);
    }
  }
  return Status::ok();
}

// ---------------------------------------------------------------------------------------
// Convolution and pooling.

struct Window {
  std::vector<int64_t> kernel, strides, dilations, pads;
  std::string auto_pad = "NOTSET";
  bool ceil_mode = false;
};

bool read_window(const Node& n, size_t nsp, std::vector<int64_t> kernel, Window* w) {
  w->kernel = std::move(kernel);
  w->strides = n.attr_ints("strides", std::vector<int64_t>(nsp, 1));
  w->dilations = n.attr_ints("dilations", std::vector<int64_t>(nsp, 1));
  w->pads = n.attr_ints("pads", std::vector<int64_t>(2 * nsp, 0));
  w->auto_pad = n.attr_string("auto_pad", "NOTSET");
  w->ceil_mode = n.attr_int("ceil_mode", 0) != 0;
  if (w->kernel.size() != nsp || w->strides.size() != nsp || w->dilations.size() != nsp || w->pads.size() != 2 * nsp)
    return false;
  for (size_t i = 0; i < nsp; ++i)
    if (w->kernel[i] < 1 || w->strides[i] < 1 || w->dilations[i] < 1 || w->pads[i] < 0 || w->pads[i + nsp] < 0)
      return false;
  return w->auto_pad == "NOTSET" || w->auto_pad == "SAME_UPPER" || w->auto_pad == "SAME_LOWER" || w->auto_pad == "VALID";
}

// Output size of one spatial axis of Conv or a pool (as the CPU kernels compute it).
Dim window_out(const Dim& in, const Window& w, size_t i, bool pool) {
  const size_t nsp = w.kernel.size();
  const __int128 s = w.strides[i], dk = static_cast<__int128>(w.kernel[i] - 1) * w.dilations[i] + 1;
  const bool same = w.auto_pad == "SAME_UPPER" || w.auto_pad == "SAME_LOWER";
  if (!in.fixed()) {
    const bool no_pad = w.auto_pad == "VALID" || (w.auto_pad == "NOTSET" && w.pads[i] == 0 && w.pads[i + nsp] == 0);
    if (s == 1 && (same || (dk == 1 && no_pad))) return in;
    return Dim{};
  }
  const __int128 x = in.value;
  if (same) return wide_dim(x == 0 ? 0 : (x + s - 1) / s);
  const __int128 pb = w.auto_pad == "NOTSET" ? w.pads[i] : 0, pe = w.auto_pad == "NOTSET" ? w.pads[i + nsp] : 0;
  const __int128 span = x + pb + pe - dk;
  if (span < 0) return Dim{};
  if (pool && w.ceil_mode && w.auto_pad == "NOTSET") {
    __int128 out = (span + s - 1) / s + 1;
    if ((out - 1) * s >= x + pb) --out;
    return wide_dim(out);
  }
  return wide_dim(span / s + 1);
}

// Conv-like: X [N, C, spatial...], W [M, C/group, k...] -> [N, M, out...].
void conv_shape(Ctx& c, int x_in, int w_in, int out) {
  const Dims* x = c.in_shape(x_in);
  const Dims* wt = c.in_shape(w_in);
  int rank = x ? static_cast<int>(x->size()) : wt ? static_cast<int>(wt->size()) : -1;
  if (rank < 3) return;
  const size_t nsp = static_cast<size_t>(rank - 2);
  std::vector<int64_t> kernel = c.node.attr_ints("kernel_shape");
  if (kernel.empty() && wt && wt->size() == nsp + 2)
    for (size_t i = 0; i < nsp; ++i) kernel.push_back((*wt)[i + 2].fixed() ? (*wt)[i + 2].value : -1);
  Dims o(rank);
  if (x) o[0] = (*x)[0];
  if (wt && wt->size() == nsp + 2) o[1] = (*wt)[0];
  Window w;
  if (x && read_window(c.node, nsp, kernel, &w))
    for (size_t i = 0; i < nsp; ++i) o[i + 2] = window_out((*x)[i + 2], w, i, false);
  c.set_shape(out, o);
}

Status rule_conv(Ctx& c) {
  BH_RETURN_IF_ERROR(c.require_same_types({0, 1, 2}));
  c.set_type(0, c.in_type(0));
  conv_shape(c, 0, 1, 0);
  return Status::ok();
}

Status rule_conv_integer(Ctx& c) {
  c.set_type(0, DataType::kInt32);
  conv_shape(c, 0, 1, 0);
  return Status::ok();
}

Status rule_qlinear_conv(Ctx& c) {
  c.set_type(0, c.in_type(7));
  conv_shape(c, 0, 3, 0);
  return Status::ok();
}

Status rule_deform_conv(Ctx& c) {
  c.set_type(0, c.in_type(0));
  const Dims* x = c.in_shape(0);
  const Dims* w = c.in_shape(1);
  const Dims* off = c.in_shape(2);
  if (!x || !off || x->size() < 3 || off->size() != x->size()) return Status::ok();
  Dims o = *off;
  o[0] = (*x)[0];
  o[1] = w && w->size() == x->size() ? (*w)[0] : Dim{};
  c.set_shape(0, o);
  return Status::ok();
}

Status rule_conv_transpose(Ctx& c) {
  BH_RETURN_IF_ERROR(c.require_same_types({0, 1, 2}));
  c.set_type(0, c.in_type(0));
  const Dims* x = c.in_shape(0);
  const Dims* wt = c.in_shape(1);
  if (!x || x->size() < 3) return Status::ok();
  const size_t nsp = x->size() - 2;
  const Node& n = c.node;
  Dims o(x->size());
  o[0] = (*x)[0];
  const int64_t group = n.attr_int("group", 1);
  if (wt && wt->size() == x->size()) o[1] = mul_dim((*wt)[1], fixed_dim(group));
  std::vector<int64_t> kernel = n.attr_ints("kernel_shape");
  if (kernel.empty() && wt && wt->size() == x->size())
    for (size_t i = 0; i < nsp; ++i) kernel.push_back((*wt)[i + 2].fixed() ? (*wt)[i + 2].value : -1);
  const std::vector<int64_t> output_shape = n.attr_ints("output_shape");
  const std::vector<int64_t> opad = n.attr_ints("output_padding", std::vector<int64_t>(nsp, 0));
  Window w;
  const bool geometry = read_window(n, nsp, kernel, &w) && opad.size() == nsp;
  const bool same = w.auto_pad == "SAME_UPPER" || w.auto_pad == "SAME_LOWER";
  for (size_t i = 0; i < nsp; ++i) {
    if (!output_shape.empty()) {
      const size_t k = output_shape.size();
      if (k == nsp || k == nsp + 2) o[i + 2] = fixed_dim(output_shape[k - nsp + i]);
      continue;
    }
    const Dim& in = (*x)[i + 2];
    if (!geometry) continue;
    if (same && !n.has_attr("pads")) {
      o[i + 2] = mul_dim(in, fixed_dim(w.strides[i]));
      continue;
    }
    if (!in.fixed()) continue;
    const __int128 dk = static_cast<__int128>(w.kernel[i] - 1) * w.dilations[i] + 1;
    const __int128 natural = static_cast<__int128>(w.strides[i]) * (in.value - 1) + opad[i] + dk;
    const bool use_pads = w.auto_pad == "NOTSET" || same;
    o[i + 2] = wide_dim(natural - (use_pads ? static_cast<__int128>(w.pads[i]) + w.pads[i + nsp] : 0));
  }
  c.set_shape(0, o);
  return Status::ok();
}

Status rule_pool(Ctx& c) {
  c.same_as_input(0, 0);
  c.set_type(0, c.in_type(0));
  c.set_type(1, DataType::kInt64);  // MaxPool's Indices
  const Dims* x = c.in_shape(0);
  if (!x) return Status::ok();
  if (x->size() < 3) {
    if (c.num_outputs() > 0) c.out[0].shape.reset();
    return Status::ok();
  }
  const size_t nsp = x->size() - 2;
  Dims o = *x;
  Window w;
  if (read_window(c.node, nsp, c.node.attr_ints("kernel_shape"), &w)) {
    for (size_t i = 0; i < nsp; ++i) o[i + 2] = window_out((*x)[i + 2], w, i, true);
  } else {
    for (size_t i = 0; i < nsp; ++i) o[i + 2] = Dim{};
  }
  c.set_shape(0, o);
  c.set_shape(1, o);
  return Status::ok();
}

Status rule_global_pool(Ctx& c) {
  c.set_type(0, c.in_type(0));
  const Dims* x = c.in_shape(0);
  if (!x || x->size() < 2) return Status::ok();
  Dims o = *x;
  for (size_t i = 2; i < o.size(); ++i) o[i] = fixed_dim(1);
  c.set_shape(0, o);
  return Status::ok();
}

Status rule_max_unpool(Ctx& c) {
  c.set_type(0, c.in_type(0));
  const Dims* x = c.in_shape(0);
  if (!x || x->size() < 3) return Status::ok();
  const size_t nsp = x->size() - 2;
  if (c.has_input(2)) {
    if (const Data* d = c.in_data(2)) c.set_shape(0, d->dims());
    else c.set_rank(0, static_cast<int>(x->size()));
    return Status::ok();
  }
  Dims o = *x;
  Window w;
  const bool geometry = read_window(c.node, nsp, c.node.attr_ints("kernel_shape"), &w);
  for (size_t i = 0; i < nsp; ++i) {
    const Dim& in = (*x)[i + 2];
    o[i + 2] = geometry && in.fixed()
                   ? wide_dim(static_cast<__int128>(in.value - 1) * w.strides[i] + w.kernel[i] - w.pads[i] -
                              w.pads[i + nsp])
                   : Dim{};
  }
  c.set_shape(0, o);
  return Status::ok();
}

Status rule_roi_align(Ctx& c) {
  c.set_type(0, c.in_type(0));
  const Dims* x = c.in_shape(0);
  const Dims* rois = c.in_shape(1);
  Dims o(4);
  if (rois && !rois->empty()) o[0] = (*rois)[0];
  if (x && x->size() == 4) o[1] = (*x)[1];
  o[2] = fixed_dim(c.node.attr_int("output_height", 1));
  o[3] = fixed_dim(c.node.attr_int("output_width", 1));
  c.set_shape(0, o);
  return Status::ok();
}

// ---------------------------------------------------------------------------------------
// Matrix products.

// Numpy matmul of a [..., M, K] and b [..., K, N] (1-D operands promoted and dropped).
std::optional<Dims> matmul_dims(const Dims& a, const Dims& b) {
  if (a.empty() || b.empty()) return std::nullopt;
  Dims pa = a, pb = b;
  const bool va = pa.size() == 1, vb = pb.size() == 1;
  if (va) pa.insert(pa.begin(), fixed_dim(1));
  if (vb) pb.push_back(fixed_dim(1));
  Dims batch = broadcast_dims(slice_dims(pa, 0, pa.size() - 2), slice_dims(pb, 0, pb.size() - 2));
  if (!va) batch.push_back(pa[pa.size() - 2]);
  if (!vb) batch.push_back(pb.back());
  return batch;
}

Status rule_matmul(Ctx& c) {
  const std::string& op = c.node.op_type;
  int a = 0, b = 1;
  if (op == "MatMul") {
    BH_RETURN_IF_ERROR(c.require_same_types({0, 1}));
    c.set_type(0, c.in_type(0));
  } else if (op == "MatMulInteger") {
    c.set_type(0, DataType::kInt32);
  } else {  // QLinearMatMul
    b = 3;
    c.set_type(0, c.in_type(7));
  }
  const Dims* sa = c.in_shape(a);
  const Dims* sb = c.in_shape(b);
  if (sa && sb)
    if (auto d = matmul_dims(*sa, *sb)) c.set_shape(0, *d);
  return Status::ok();
}

Status rule_gemm(Ctx& c) {
  BH_RETURN_IF_ERROR(c.require_same_types({0, 1, 2}));
  c.set_type(0, c.in_type(0));
  const Dims* a = c.in_shape(0);
  const Dims* b = c.in_shape(1);
  Dims o(2);
  if (a && a->size() == 2) o[0] = (*a)[c.node.attr_int("transA", 0) != 0 ? 1 : 0];
  if (b && b->size() == 2) o[1] = (*b)[c.node.attr_int("transB", 0) != 0 ? 0 : 1];
  c.set_shape(0, o);
  return Status::ok();
}

// Einsum: letters map to the dims they label; "..." broadcasts.
Status rule_einsum(Ctx& c) {
  std::string eq;
  for (char ch : c.node.attr_string("equation", ""))
    if (ch != ' ') eq += ch;
  std::string lhs = eq, rhs;
  const bool explicit_out = eq.find("->") != std::string::npos;
  if (explicit_out) {
    lhs = eq.substr(0, eq.find("->"));
    rhs = eq.substr(eq.find("->") + 2);
  }
  std::vector<std::string> terms;
  for (size_t p = 0;;) {
    size_t q = lhs.find(',', p);
    terms.push_back(lhs.substr(p, q == std::string::npos ? std::string::npos : q - p));
    if (q == std::string::npos) break;
    p = q + 1;
  }
  DataType t = DataType::kUndefined;
  std::vector<int> all;
  for (int i = 0; i < c.num_inputs(); ++i) all.push_back(i);
  BH_RETURN_IF_ERROR(c.require_same_types(all));
  for (int i = 0; i < c.num_inputs() && t == DataType::kUndefined; ++i) t = c.in_type(i);
  c.set_type(0, t);
  if (static_cast<int>(terms.size()) != c.num_inputs()) return Status::ok();
  std::map<char, Dim> dim_of;
  std::map<char, int> count;
  std::optional<Dims> ellipsis;
  bool ellipsis_used = false;
  for (size_t i = 0; i < terms.size(); ++i) {
    const Dims* s = c.in_shape(static_cast<int>(i));
    if (!s) return Status::ok();
    std::string term = terms[i];
    size_t e = term.find("...");
    std::string before = e == std::string::npos ? term : term.substr(0, e);
    std::string after = e == std::string::npos ? std::string() : term.substr(e + 3);
    const size_t named = before.size() + after.size();
    if (named > s->size() || (e == std::string::npos && named != s->size())) return Status::ok();
    auto label = [&](char ch, const Dim& d) -> bool {
      if (!std::isalpha(static_cast<unsigned char>(ch))) return false;
      auto it = dim_of.find(ch);
      dim_of[ch] = it == dim_of.end() ? d : (it->second.fixed() && it->second.value == 1) ? d
                                          : (d.fixed() && d.value == 1) ? it->second
                                                                          : meet_dim(it->second, d);
      ++count[ch];
      return true;
    };
    for (size_t k = 0; k < before.size(); ++k)
      if (!label(before[k], (*s)[k])) return Status::ok();
    const size_t tail = s->size() - after.size();
    for (size_t k = 0; k < after.size(); ++k)
      if (!label(after[k], (*s)[tail + k])) return Status::ok();
    if (e != std::string::npos) {
      ellipsis_used = true;
      Dims mid = slice_dims(*s, before.size(), tail);
      ellipsis = ellipsis ? broadcast_dims(*ellipsis, mid) : mid;
    }
  }
  Dims out;
  if (!explicit_out) {
    if (ellipsis_used) out = *ellipsis;
    for (auto& [ch, n] : count)
      if (n == 1) out.push_back(dim_of[ch]);
  } else {
    size_t e = rhs.find("...");
    for (size_t k = 0; k < rhs.size(); ++k) {
      if (k == e) {
        if (!ellipsis) return Status::ok();
        out.insert(out.end(), ellipsis->begin(), ellipsis->end());
        k += 2;
        continue;
      }
      auto it = dim_of.find(rhs[k]);
      if (it == dim_of.end()) return Status::ok();
      out.push_back(it->second);
    }
  }
  c.set_shape(0, out);
  return Status::ok();
}

// ---------------------------------------------------------------------------------------
// Recurrent layers and attention.

Status rule_rnn(Ctx& c) {
  const DataType t = c.in_type(0);
  for (int o = 0; o < c.num_outputs(); ++o) c.set_type(o, t);
  const Dims* x = c.in_shape(0);
  const int gates = c.node.op_type == "LSTM" ? 4 : c.node.op_type == "GRU" ? 3 : 1;
  Dim hidden;
  if (c.node.has_attr("hidden_size")) hidden = fixed_dim(c.node.attr_int("hidden_size", 0));
  else if (const Dims* w = c.in_shape(1); w && w->size() == 3 && (*w)[1].fixed() && (*w)[1].value % gates == 0)
    hidden = fixed_dim((*w)[1].value / gates);
  const Dim dirs = fixed_dim(c.node.attr_string("direction", "forward") == "bidirectional" ? 2 : 1);
  const bool batch_first = c.opset() >= 14 && c.node.attr_int("layout", 0) != 0;
  Dim seq, batch;
  if (x && x->size() == 3) {
    seq = (*x)[batch_first ? 1 : 0];
    batch = (*x)[batch_first ? 0 : 1];
  } else if (x) {
    return Status::ok();
  }
  c.set_shape(0, batch_first ? Dims{batch, seq, dirs, hidden} : Dims{seq, dirs, batch, hidden});
  for (int o = 1; o < c.num_outputs(); ++o) c.set_shape(o, batch_first ? Dims{batch, dirs, hidden} : Dims{dirs, batch, hidden});
  return Status::ok();
}

// Attention (opset 23): Q [B, Hq, Sq, D] or [B, Sq, Hq*D]; K, V likewise with kv heads.
Status rule_attention(Ctx& c) {
  const DataType t = c.in_type(0);
  c.set_type(0, t);
  c.set_type(1, c.in_type(1));
  c.set_type(2, c.in_type(2));
  c.set_type(3, t);
  const Dims* q = c.in_shape(0);
  const Dims* k = c.in_shape(1);
  const Dims* v = c.in_shape(2);
  if (!q || !k || !v || q->empty()) return Status::ok();  // a rank-0 Q is refused by the kernel
  const int64_t qh = c.node.attr_int("q_num_heads", 0), kvh = c.node.attr_int("kv_num_heads", 0);
  Dim batch = (*q)[0], sq, hq, kv_heads, skv, dk, dv;
  if (q->size() == 4) {
    hq = (*q)[1];
    sq = (*q)[2];
  } else if (q->size() == 3 && qh > 0) {
    hq = fixed_dim(qh);
    sq = (*q)[1];
  } else {
    return Status::ok();
  }
  if (k->size() == 4 && v->size() == 4) {
    kv_heads = (*k)[1];
    skv = (*k)[2];
    dk = (*k)[3];
    dv = (*v)[3];
  } else if (k->size() == 3 && v->size() == 3 && kvh > 0) {
    kv_heads = fixed_dim(kvh);
    skv = (*k)[1];
    dk = (*k)[2].fixed() && (*k)[2].value % kvh == 0 ? fixed_dim((*k)[2].value / kvh) : Dim{};
    dv = (*v)[2].fixed() && (*v)[2].value % kvh == 0 ? fixed_dim((*v)[2].value / kvh) : Dim{};
  } else {
    return Status::ok();
  }
  if (q->size() == 4) c.set_shape(0, {batch, hq, sq, dv});
  else c.set_shape(0, {batch, sq, mul_dim(hq, dv)});
  Dim total = skv;
  if (c.has_input(4)) {
    const Dims* pk = c.in_shape(4);
    total = pk && pk->size() == 4 ? add_dim((*pk)[2], skv) : Dim{};
  }
  c.set_shape(1, {batch, kv_heads, total, dk});
  c.set_shape(2, {batch, kv_heads, total, dv});
  c.set_shape(3, {batch, hq, sq, total});
  return Status::ok();
}

// LinearAttention (opset 27): query [B, T, Hq*dk], value [B, T, Hkv*dv] -> output
// [B, T, Hq*dv] of query's type, present_state [B, Hkv, dk, dv] of past_state's type
// (query's without past_state).
Status rule_linear_attention(Ctx& c) {
  c.set_type(0, c.in_type(0));
  c.set_type(1, c.has_input(3) ? c.in_type(3) : c.in_type(0));
  const int64_t qh = c.node.attr_int("q_num_heads", 0), kvh = c.node.attr_int("kv_num_heads", 0);
  const Dims* q = c.in_shape(0);
  const Dims* v = c.in_shape(2);
  if (qh <= 0 || kvh <= 0 || !q || !v || q->size() != 3 || v->size() != 3) return Status::ok();
  const Dim dk = (*q)[2].fixed() && (*q)[2].value % qh == 0 ? fixed_dim((*q)[2].value / qh) : Dim{};
  const Dim dv = (*v)[2].fixed() && (*v)[2].value % kvh == 0 ? fixed_dim((*v)[2].value / kvh) : Dim{};
  c.set_shape(0, {(*q)[0], (*q)[1], mul_dim(fixed_dim(qh), dv)});
  c.set_shape(1, {(*q)[0], fixed_dim(kvh), dk, dv});
  return Status::ok();
}

// CausalConvWithState (opset 27): input [B, C, L], weight [C, 1, K] -> output like the
// input, present_state [B, C, K-1] of the input's type.
Status rule_causal_conv_with_state(Ctx& c) {
  c.same_as_input(0, 0);
  c.set_type(1, c.in_type(0));
  const Dims* x = c.in_shape(0);
  const Dims* w = c.in_shape(1);
  if (!x || x->size() != 3 || !w || w->size() != 3 || !(*w)[2].fixed() || (*w)[2].value < 1) return Status::ok();
  c.set_shape(1, {(*x)[0], (*x)[1], fixed_dim((*w)[2].value - 1)});
  return Status::ok();
}

// FlexAttention (ai.onnx.preview): Q [B, Hq, L, E], K [B, Hkv, S, E], V [B, Hkv, S, Ev] ->
// Y [B, Hq, L, Ev] of V's type. score_mod, mask_mod and prob_mod each take the whole
// [B, Hq, L, S] tensor, float32 (float64 for float64 Q).
Status rule_flex_attention(Ctx& c) {
  c.set_type(0, c.in_type(2));
  const DataType qt = c.in_type(0);
  const Dims* q = c.in_shape(0);
  const Dims* k = c.in_shape(1);
  const Dims* v = c.in_shape(2);
  ValueInfo scores;
  scores.dtype = qt == DataType::kUndefined || qt == DataType::kFloat64 ? qt : DataType::kFloat32;
  if (q && k && q->size() == 4 && k->size() == 4) scores.shape = Dims{(*q)[0], (*q)[1], (*q)[2], (*k)[2]};
  for (const char* attr : {"score_mod", "mask_mod", "prob_mod"}) {
    auto r = c.infer_subgraph(attr, {&scores});
    if (!r.is_ok()) return r.status();
  }
  if (q && v && q->size() == 4 && v->size() == 4) c.set_shape(0, {(*q)[0], (*q)[1], (*q)[2], (*v)[3]});
  return Status::ok();
}

// ---------------------------------------------------------------------------------------
// Quantisation.

Status rule_quantize(Ctx& c) {
  DataType t = c.in_type(2);
  if (!c.has_input(2)) {
    const int64_t od = c.opset() >= 21 ? c.node.attr_int("output_dtype", 0) : 0;
    t = od != 0 ? static_cast<DataType>(od) : DataType::kUInt8;
  }
  c.set_type(0, t);
  if (const Dims* s = c.in_shape(0)) c.set_shape(0, *s);
  return Status::ok();
}

Status rule_dequantize(Ctx& c) {
  const int64_t od = c.node.attr_int("output_dtype", 0);
  c.set_type(0, od != 0 ? static_cast<DataType>(od) : c.opset() >= 19 ? c.in_type(1) : DataType::kFloat32);
  if (const Dims* s = c.in_shape(0)) c.set_shape(0, *s);
  return Status::ok();
}

Status rule_dynamic_quantize(Ctx& c) {
  c.set_type(0, DataType::kUInt8);
  if (const Dims* s = c.in_shape(0)) c.set_shape(0, *s);
  c.set(1, DataType::kFloat32, {});
  c.set(2, DataType::kUInt8, {});
  return Status::ok();
}

// ---------------------------------------------------------------------------------------
// Generators.

Status rule_random(Ctx& c) {
  c.set_type(0, static_cast<DataType>(c.node.attr_int("dtype", 1)));
  if (c.node.has_attr("shape")) {
    Dims d;
    for (int64_t v : c.node.attr_ints("shape")) d.push_back(v >= 0 ? fixed_dim(v) : Dim{});
    c.set_shape(0, d);
  }
  return Status::ok();
}

Status rule_dtype_or_input(Ctx& c) {
  const int64_t dt = c.node.attr_int("dtype", 0);
  c.set_type(0, dt != 0 ? static_cast<DataType>(dt) : c.in_type(0));
  if (const Dims* s = c.in_shape(0)) c.set_shape(0, *s);
  return Status::ok();
}

Status rule_multinomial(Ctx& c) {
  c.set_type(0, static_cast<DataType>(c.node.attr_int("dtype", 6)));
  const Dims* x = c.in_shape(0);
  c.set_shape(0, {x && x->size() == 2 ? (*x)[0] : Dim{}, fixed_dim(c.node.attr_int("sample_size", 1))});
  return Status::ok();
}

Status rule_window(Ctx& c) {
  c.set_type(0, static_cast<DataType>(c.node.attr_int("output_datatype", 1)));
  std::vector<int64_t> size;
  if (c.in_ints(0, &size) && size.size() == 1 && size[0] >= 0) c.set_shape(0, {fixed_dim(size[0])});
  else c.set_rank(0, 1);
  return Status::ok();
}

Status rule_mel_weight_matrix(Ctx& c) {
  c.set_type(0, static_cast<DataType>(c.node.attr_int("output_datatype", 1)));
  std::vector<int64_t> bins, dft;
  Dims o(2);
  if (c.in_ints(1, &dft) && dft.size() == 1) o[0] = fixed_dim(dft[0] / 2 + 1);
  if (c.in_ints(0, &bins) && bins.size() == 1) o[1] = fixed_dim(bins[0]);
  c.set_shape(0, o);
  return Status::ok();
}

// ---------------------------------------------------------------------------------------
// Geometry, linear algebra, losses, detection.

Status rule_det(Ctx& c) {
  c.set_type(0, c.in_type(0));
  if (const Dims* s = c.in_shape(0); s && s->size() >= 2) c.set_shape(0, slice_dims(*s, 0, s->size() - 2));
  return Status::ok();
}

Status rule_affine_grid(Ctx& c) {
  c.set_type(0, c.in_type(0));
  const Data* size = c.in_data(1);
  if (!size || (size->v.size() != 4 && size->v.size() != 5)) return Status::ok();
  const Dims sd = size->dims();
  Dims o{sd[0]};
  o.insert(o.end(), sd.begin() + 2, sd.end());
  o.push_back(fixed_dim(static_cast<int64_t>(size->v.size()) - 2));
  c.set_shape(0, o);
  return Status::ok();
}

Status rule_grid_sample(Ctx& c) {
  c.set_type(0, c.in_type(0));
  const Dims* x = c.in_shape(0);
  const Dims* g = c.in_shape(1);
  if (!x || !g || x->size() < 3 || g->size() != x->size()) return Status::ok();
  Dims o{(*x)[0], (*x)[1]};
  o.insert(o.end(), g->begin() + 1, g->end() - 1);
  c.set_shape(0, o);
  return Status::ok();
}

Status rule_nll_loss(Ctx& c) {
  c.set_type(0, c.in_type(0));
  if (c.node.attr_string("reduction", "mean") == "none") {
    if (const Dims* s = c.in_shape(1)) c.set_shape(0, *s);
  } else {
    c.set_shape(0, {});
  }
  if (c.num_outputs() > 1) c.same_as_input(1, 0);
  return Status::ok();
}

Status rule_nms(Ctx& c) {
  c.set(0, DataType::kInt64, {Dim{}, fixed_dim(3)});
  return Status::ok();
}

// SwiGLU (opset 28) of a gate `a` and a value `b`: Swish(a) * b.
Status rule_swiglu(Ctx& c) {
  if (c.num_inputs() != 2) return Status::ok();
  c.set_type(0, c.in_type(0));
  const Dims* a = c.in_shape(0);
  const Dims* b = c.in_shape(1);
  if (a && b) c.set_shape(0, broadcast_dims(*a, *b));
  return Status::ok();
}

Status rule_type_of_input0(Ctx& c) {
  c.set_type(0, c.in_type(0));
  return Status::ok();
}

// ---------------------------------------------------------------------------------------
// Strings and ai.onnx.ml.

Status rule_string_same_rank(Ctx& c) {
  c.set_type(0, DataType::kString);
  c.set_rank(0, c.in_rank(0));
  return Status::ok();
}

Status rule_string_concat(Ctx& c) {
  c.set_type(0, DataType::kString);
  const Dims* a = c.in_shape(0);
  const Dims* b = c.in_shape(1);
  if (a && b) c.set_shape(0, broadcast_dims(*a, *b));
  return Status::ok();
}

Status rule_string_split(Ctx& c) {
  c.set_type(0, DataType::kString);
  c.set_type(1, DataType::kInt64);
  if (const Dims* s = c.in_shape(0)) {
    Dims o = *s;
    o.push_back(Dim{});
    c.set_shape(0, o);
    c.set_shape(1, *s);
  }
  return Status::ok();
}

Status rule_tfidf(Ctx& c) {
  c.set_type(0, DataType::kFloat32);
  c.set_rank(0, c.in_rank(0));
  return Status::ok();
}

Status rule_image_decoder(Ctx& c) {
  c.set(0, DataType::kUInt8, Dims(3));
  return Status::ok();
}

Status rule_label_encoder(Ctx& c) {
  DataType t = DataType::kUndefined;
  if (const Attribute* a = c.node.attr("values_tensor"); a && a->type == AttrType::kTensor) t = a->t.dtype();
  else if (c.node.has_attr("values_strings")) t = DataType::kString;
  else if (c.node.has_attr("values_int64s")) t = DataType::kInt64;
  else if (c.node.has_attr("values_floats")) t = DataType::kFloat32;
  c.set_type(0, t);
  if (const Dims* s = c.in_shape(0)) c.set_shape(0, *s);
  return Status::ok();
}

// ai.onnx.preview.training optimisers: inputs R, T, then `groups` blocks of n tensors (X,
// G, then the states); outputs X_new and the new states, each like its input.
Status rule_optimizer(Ctx& c, int groups) {
  const int rest = c.num_inputs() - 2;
  if (rest < groups || rest % groups != 0) return Status::ok();  // the kernel says why
  const int n = rest / groups;
  for (int o = 0; o < c.num_outputs() && o < (groups - 1) * n; ++o) {
    const int block = o / n;
    c.same_as_input(o, 2 + (block == 0 ? 0 : block + 1) * n + o % n);
  }
  return Status::ok();
}

}  // namespace

void add_nn_rules(RuleTable& t) {
  for (const char* op :
       {"Acos",     "Acosh",      "Asin",      "Asinh",    "Atan",      "Atanh",       "Ceil",
        "Celu",    "Cos",      "Cosh",       "Elu",       "Erf",      "Exp",       "Floor",       "Gelu",
        "HardSigmoid", "HardSwish", "Hardmax", "Log",     "LogSoftmax", "LpNormalization", "LRN", "MeanVarianceNormalization",
        "Mish",    "Reciprocal", "Relu",      "Round",    "Selu",      "Shrink",      "Sigmoid",
        "Sign",    "Sin",      "Sinh",       "Softmax",   "Softplus", "Softsign",  "Sqrt",        "Tan",
        "Tanh",    "ThresholdedRelu", "Swish", "BitwiseNot", "LeakyRelu", "InstanceNormalization",
        "GroupNormalization", "RMSNormalization", "RotaryEmbedding"})
    t[op] = same_as_input0;
  t["Not"] = rule_not;
  t["Clip"] = rule_clip;
  t["PRelu"] = rule_prelu;
  t["IsNaN"] = rule_bool_same_shape;
  t["IsInf"] = rule_bool_same_shape;
  t["RegexFullMatch"] = rule_bool_same_shape;
  t["Dropout"] = rule_dropout;
  for (const char* op : {"ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1", "ReduceL2",
                         "ReduceLogSum", "ReduceLogSumExp", "ReduceSumSquare"})
    t[op] = rule_reduce;
  t["ArgMax"] = rule_arg;
  t["ArgMin"] = rule_arg;
  t["BatchNormalization"] = rule_batch_norm;
  t["LayerNormalization"] = rule_layer_norm;
  t["Conv"] = rule_conv;
  t["ConvInteger"] = rule_conv_integer;
  t["QLinearConv"] = rule_qlinear_conv;
  t["DeformConv"] = rule_deform_conv;
  t["ConvTranspose"] = rule_conv_transpose;
  t["MaxPool"] = rule_pool;
  t["AveragePool"] = rule_pool;
  t["LpPool"] = rule_pool;
  t["GlobalAveragePool"] = rule_global_pool;
  t["GlobalMaxPool"] = rule_global_pool;
  t["GlobalLpPool"] = rule_global_pool;
  t["MaxUnpool"] = rule_max_unpool;
  t["RoiAlign"] = rule_roi_align;
  t["MatMul"] = rule_matmul;
  t["MatMulInteger"] = rule_matmul;
  t["QLinearMatMul"] = rule_matmul;
  t["Gemm"] = rule_gemm;
  t["Einsum"] = rule_einsum;
  t["LSTM"] = rule_rnn;
  t["GRU"] = rule_rnn;
  t["RNN"] = rule_rnn;
  t["Attention"] = rule_attention;
  t["LinearAttention"] = rule_linear_attention;
  t["CausalConvWithState"] = rule_causal_conv_with_state;
  t["ai.onnx.preview:FlexAttention"] = rule_flex_attention;
  t["QuantizeLinear"] = rule_quantize;
  t["DequantizeLinear"] = rule_dequantize;
  t["DynamicQuantizeLinear"] = rule_dynamic_quantize;
  t["RandomNormal"] = rule_random;
  t["RandomUniform"] = rule_random;
  t["RandomNormalLike"] = rule_dtype_or_input;
  t["RandomUniformLike"] = rule_dtype_or_input;
  t["Bernoulli"] = rule_dtype_or_input;
  t["Multinomial"] = rule_multinomial;
  t["HannWindow"] = rule_window;
  t["HammingWindow"] = rule_window;
  t["BlackmanWindow"] = rule_window;
  t["MelWeightMatrix"] = rule_mel_weight_matrix;
  t["Det"] = rule_det;
  t["AffineGrid"] = rule_affine_grid;
  t["GridSample"] = rule_grid_sample;
  t["NegativeLogLikelihoodLoss"] = rule_nll_loss;
  t["SoftmaxCrossEntropyLoss"] = rule_nll_loss;
  t["NonMaxSuppression"] = rule_nms;
  t["SwiGLU"] = rule_swiglu;
  for (const char* op : {"DFT", "STFT", "Col2Im"}) t[op] = rule_type_of_input0;
  t["StringNormalizer"] = rule_string_same_rank;
  t["StringConcat"] = rule_string_concat;
  t["StringSplit"] = rule_string_split;
  t["TfIdfVectorizer"] = rule_tfidf;
  t["ImageDecoder"] = rule_image_decoder;
  t["ai.onnx.ml:LabelEncoder"] = rule_label_encoder;
  t["ai.onnx.ml:Binarizer"] = same_as_input0;
  t["ai.onnx.ml:ArrayFeatureExtractor"] = rule_type_of_input0;
  t["ai.onnx.preview.training:Adagrad"] = [](Ctx& c) { return rule_optimizer(c, 3); };
  t["ai.onnx.preview.training:Momentum"] = [](Ctx& c) { return rule_optimizer(c, 3); };
  t["ai.onnx.preview.training:Adam"] = [](Ctx& c) { return rule_optimizer(c, 4); };
}

}  // namespace bulkhead::ir::infer
