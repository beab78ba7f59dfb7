// Sequence-mixing operators of opset 27 and ai.onnx.preview: LinearAttention (the linear,
// gated, delta and gated-delta recurrences over a [d_k, d_v] state per key/value head),
// CausalConvWithState (depthwise causal Conv1d carrying its last k-1 inputs) and
// FlexAttention (scaled dot-product attention with score_mod / mask_mod / prob_mod
// subgraphs run over the whole score tensor).
//
// Everything computes in float32 (float64 for float64 inputs) and converts float16 and
// bfloat16 on the way in and out, as the ONNX reference implementations and the ops'
// function bodies do.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "backends/cpu/cpu_kernels.h"
#include "backends/cpu/cpu_util.h"
#include "backends/cpu/kernels/cast.h"

namespace bulkhead::cpu {
namespace {

bool node_has_input(const ir::Node& n, size_t i) { return i < n.inputs.size() && !n.inputs[i].empty(); }

DataType known_input_type(const KernelInfo& info, size_t i) {
  return i < info.input_types.size() ? info.input_types[i] : DataType::kUndefined;
}

// The element type a kernel computes in for inputs of type `t`.
DataType compute_type(DataType t) { return t == DataType::kFloat64 ? DataType::kFloat64 : DataType::kFloat32; }

// Refuses, at session creation, a known non-float type for input `i` (`what`).
Status require_float_input(const KernelInfo& info, size_t i, const char* what) {
  DataType t = known_input_type(info, i);
  if (!node_has_input(info.node, i) || t == DataType::kUndefined || dtype_is_float(t)) return Status::ok();
  return unsupported(info.where() + info.node.op_type + " takes float16, bfloat16, float32 or float64 tensors, not " +
                     dtype_name(t) + " (input '" + what + "')");
}

Status require_float(KernelContext& ctx, const Tensor& t, const char* what) {
  if (dtype_is_float(t.dtype())) return Status::ok();
  return unsupported(ctx.where() + "takes float16, bfloat16, float32 or float64 tensors, not " + dtype_name(t.dtype()) +
                     " (input '" + what + "')");
}

// `x` in element type `ct`: x itself when it has it, a converted host copy otherwise.
Result<Tensor> in_type(KernelContext& ctx, const Tensor& x, DataType ct) {
  if (x.dtype() == ct) return x;
  Tensor t = Tensor::host(ct, x.shape());
  BH_RETURN_IF_ERROR(ew::convert_into(x, t, ctx.threads(), ctx.where()));
  return t;
}

// Output `i` of element type `dt` holding `computed` (any float type, same shape).
Status store_output(KernelContext& ctx, int i, DataType dt, const Tensor& computed) {
  BH_ASSIGN_OR_RETURN(Tensor out, ctx.allocate_output(i, dt, computed.shape()));
  return ew::convert_into(computed, out, ctx.threads(), ctx.where());
}

std::string dims(std::initializer_list<int64_t> d) {
  std::string s = "[";
  for (int64_t v : d) {
    if (s.size() > 1) s += ',';
    s += std::to_string(v);
  }
  s += ']';
  return s;
}

// =====================================================================================
// LinearAttention (opset 27)
// =====================================================================================
//
// query [B, T, Hq*dk], key [B, T, Hkv*dk], value [B, T, Hkv*dv]; per (batch, kv head) a
// state S [dk, dv], from past_state [B, Hkv, dk, dv] or zeros. For each step t:
//   gated rules:  S *= exp(decay_t)            (decay per head or per key row)
//   delta rules:  v_t = beta_t * (v_t - S^T (erase_gate_t ⊙ k_t))
//   all rules:    S += k_t v_t^T ;  o_t = scale * q_t^T S  (q head h reads kv head h / (Hq/Hkv))
// output [B, T, Hq*dv] in the query's type; present_state S in past_state's type (the
// query's without past_state).

struct LinearAttentionAttrs {
  int64_t q_heads = 0, kv_heads = 0;
  bool gating = true, delta = true;
  float scale = 0;  // 0: 1/sqrt(dk)
};

template <typename A>
void linear_attention_run(const LinearAttentionAttrs& a, int threads, int64_t B, int64_t T, int64_t dk, int64_t dv,
                          const A* q, const A* k, const A* v, const A* past, const A* decay, bool decay_per_key,
                          const A* beta, bool beta_per_head, const A* erase, A* y, A* present) {
  const int64_t Hq = a.q_heads, Hkv = a.kv_heads, G = Hq / Hkv;
  const A scale = a.scale != 0 ? A(a.scale) : A(1) / std::sqrt(A(dk));
  parallel_for(threads, B * Hkv, 1, [&](int64_t begin, int64_t end) {
    std::vector<A> S(static_cast<size_t>(dk * dv)), vt(static_cast<size_t>(dv)), ke(static_cast<size_t>(dk));
    for (int64_t bh = begin; bh < end; ++bh) {
      const int64_t b = bh / Hkv, h = bh % Hkv;
      if (past) std::copy(past + bh * dk * dv, past + (bh + 1) * dk * dv, S.begin());
      else std::fill(S.begin(), S.end(), A(0));
      for (int64_t t = 0; t < T; ++t) {
        const int64_t row = b * T + t;
        const A* kt = k + row * Hkv * dk + h * dk;
        const A* vs = v + row * Hkv * dv + h * dv;
        if (a.gating) {
          for (int64_t i = 0; i < dk; ++i) {
            const A g = std::exp(decay_per_key ? decay[row * Hkv * dk + h * dk + i] : decay[row * Hkv + h]);
            A* s = S.data() + i * dv;
            for (int64_t m = 0; m < dv; ++m) s[m] *= g;
          }
        }
        if (a.delta) {
          for (int64_t i = 0; i < dk; ++i) ke[i] = erase ? erase[row * Hkv * dk + h * dk + i] * kt[i] : kt[i];
          const A bt = beta_per_head ? beta[row * Hkv + h] : beta[row];
          for (int64_t m = 0; m < dv; ++m) {
            A r = 0;
            for (int64_t i = 0; i < dk; ++i) r += S[i * dv + m] * ke[i];
            vt[m] = bt * (vs[m] - r);
          }
        } else {
          std::copy(vs, vs + dv, vt.begin());
        }
        for (int64_t i = 0; i < dk; ++i) {
          A* s = S.data() + i * dv;
          for (int64_t m = 0; m < dv; ++m) s[m] += kt[i] * vt[m];
        }
        for (int64_t hq = h * G; hq < (h + 1) * G; ++hq) {
          const A* qt = q + row * Hq * dk + hq * dk;
          A* yt = y + row * Hq * dv + hq * dv;
          for (int64_t m = 0; m < dv; ++m) yt[m] = 0;
          for (int64_t i = 0; i < dk; ++i) {
            const A* s = S.data() + i * dv;
            for (int64_t m = 0; m < dv; ++m) yt[m] += qt[i] * s[m];
          }
          for (int64_t m = 0; m < dv; ++m) yt[m] *= scale;
        }
      }
      std::copy(S.begin(), S.end(), present + bh * dk * dv);
    }
  });
}

Status linear_attention_compute(KernelContext& ctx, const LinearAttentionAttrs& a) {
  const std::string w = ctx.where();
  BH_ASSIGN_OR_RETURN(const Tensor* qp, required_input(ctx, 0, "query"));
  BH_ASSIGN_OR_RETURN(const Tensor* kp, required_input(ctx, 1, "key"));
  BH_ASSIGN_OR_RETURN(const Tensor* vp, required_input(ctx, 2, "value"));
  BH_ASSIGN_OR_RETURN(const Tensor* pp, optional_input(ctx, 3, "past_state"));
  BH_ASSIGN_OR_RETURN(const Tensor* dp, optional_input(ctx, 4, "decay"));
  BH_ASSIGN_OR_RETURN(const Tensor* bp, optional_input(ctx, 5, "beta"));
  BH_ASSIGN_OR_RETURN(const Tensor* ep, optional_input(ctx, 6, "erase_gate"));
  const Tensor *named[] = {qp, kp, vp, pp, dp, bp, ep};
  const char* names[] = {"query", "key", "value", "past_state", "decay", "beta", "erase_gate"};
  for (int i = 0; i < 7; ++i)
    if (named[i]) BH_RETURN_IF_ERROR(require_float(ctx, *named[i], names[i]));
  if (kp->dtype() != qp->dtype() || vp->dtype() != qp->dtype())
    return invalid_argument(w + "query, key and value must have one element type, got " + qp->describe() + ", " +
                            kp->describe() + " and " + vp->describe());
  if (qp->rank() != 3 || kp->rank() != 3 || vp->rank() != 3)
    return invalid_argument(w + "query, key and value must be 3-D [batch, sequence, heads * head_size], got " +
                            qp->describe() + ", " + kp->describe() + " and " + vp->describe());
  const int64_t B = qp->dim(0), T = qp->dim(1), Hq = a.q_heads, Hkv = a.kv_heads;
  if (kp->dim(0) != B || kp->dim(1) != T || vp->dim(0) != B || vp->dim(1) != T)
    return invalid_argument(w + "key " + kp->describe() + " and value " + vp->describe() +
                            " do not match the batch and sequence of query " + qp->describe());
  if (qp->dim(2) % Hq != 0)
    return invalid_argument(w + "query's last dimension " + std::to_string(qp->dim(2)) + " is not divisible by q_num_heads " +
                            std::to_string(Hq));
  if (vp->dim(2) % Hkv != 0)
    return invalid_argument(w + "value's last dimension " + std::to_string(vp->dim(2)) +
                            " is not divisible by kv_num_heads " + std::to_string(Hkv));
  const int64_t dk = qp->dim(2) / Hq, dv = vp->dim(2) / Hkv;
  if (kp->dim(2) != Hkv * dk)
    return invalid_argument(w + "key's last dimension " + std::to_string(kp->dim(2)) + " must be kv_num_heads * head_size = " +
                            std::to_string(Hkv * dk));
  if (pp && pp->shape() != Shape{B, Hkv, dk, dv})
    return invalid_argument(w + "past_state must be " + dims({B, Hkv, dk, dv}) + ", got " + pp->describe());
  auto batch_seq = [&](const Tensor& t) { return t.rank() == 3 && t.dim(0) == B && t.dim(1) == T; };
  bool decay_per_key = false, beta_per_head = false;
  if (dp) {
    if (!batch_seq(*dp) || (dp->dim(2) != Hkv && dp->dim(2) != Hkv * dk))
      return invalid_argument(w + "decay must be " + dims({B, T, Hkv}) + " or " + dims({B, T, Hkv * dk}) + ", got " +
                              dp->describe());
    decay_per_key = dp->dim(2) == Hkv * dk;
  }
  if (bp) {
    if (!batch_seq(*bp) || (bp->dim(2) != Hkv && bp->dim(2) != 1))
      return invalid_argument(w + "beta must be " + dims({B, T, Hkv}) + " or " + dims({B, T, 1}) + ", got " + bp->describe());
    beta_per_head = bp->dim(2) == Hkv && Hkv != 1;
  }
  if (ep && (!batch_seq(*ep) || ep->dim(2) != Hkv * dk))
    return invalid_argument(w + "erase_gate must be " + dims({B, T, Hkv * dk}) + ", got " + ep->describe());

  const DataType ct = compute_type(qp->dtype());
  Tensor y = Tensor::host(ct, Shape{B, T, Hq * dv});
  Tensor present = Tensor::host(ct, Shape{B, Hkv, dk, dv});
  BH_ASSIGN_OR_RETURN(Tensor q, in_type(ctx, *qp, ct));
  BH_ASSIGN_OR_RETURN(Tensor k, in_type(ctx, *kp, ct));
  BH_ASSIGN_OR_RETURN(Tensor v, in_type(ctx, *vp, ct));
  Tensor past, decay, beta, erase;
  if (pp) {
    BH_ASSIGN_OR_RETURN(past, in_type(ctx, *pp, ct));
  }
  if (dp) {
    BH_ASSIGN_OR_RETURN(decay, in_type(ctx, *dp, ct));
  }
  if (bp) {
    BH_ASSIGN_OR_RETURN(beta, in_type(ctx, *bp, ct));
  }
  if (ep) {
    BH_ASSIGN_OR_RETURN(erase, in_type(ctx, *ep, ct));
  }
  auto run = [&](auto tag) {
    using A = decltype(tag);
    auto ptr = [](const Tensor& t) { return t.defined() ? t.data<A>() : nullptr; };
    linear_attention_run<A>(a, ctx.threads(), B, T, dk, dv, q.data<A>(), k.data<A>(), v.data<A>(), ptr(past), ptr(decay),
                            decay_per_key, ptr(beta), beta_per_head, ptr(erase), y.data<A>(), present.data<A>());
  };
  if (ct == DataType::kFloat64) run(double{});
  else run(float{});
  BH_RETURN_IF_ERROR(store_output(ctx, 0, qp->dtype(), y));
  if (ctx.output_wanted(1)) BH_RETURN_IF_ERROR(store_output(ctx, 1, pp ? pp->dtype() : qp->dtype(), present));
  return Status::ok();
}

Result<std::unique_ptr<Kernel>> make_linear_attention(const KernelInfo& info) {
  const ir::Node& n = info.node;
  LinearAttentionAttrs a;
  if (!n.has_attr("q_num_heads") || !n.has_attr("kv_num_heads"))
    return invalid_argument(info.where() + "q_num_heads and kv_num_heads are required");
  a.q_heads = n.attr_int("q_num_heads", 0);
  a.kv_heads = n.attr_int("kv_num_heads", 0);
  if (a.q_heads <= 0 || a.kv_heads <= 0 || a.q_heads % a.kv_heads != 0)
    return invalid_argument(info.where() + "q_num_heads (" + std::to_string(a.q_heads) +
                            ") must be a positive multiple of kv_num_heads (" + std::to_string(a.kv_heads) + ")");
  const std::string rule = n.attr_string("update_rule", "gated_delta");
  if (rule != "linear" && rule != "gated" && rule != "delta" && rule != "gated_delta")
    return invalid_argument(info.where() + "update_rule must be linear, gated, delta or gated_delta, got '" + rule + "'");
  a.gating = rule == "gated" || rule == "gated_delta";
  a.delta = rule == "delta" || rule == "gated_delta";
  a.scale = n.attr_float("scale", 0.0f);
  if (!std::isfinite(a.scale)) return invalid_argument(info.where() + "scale must be finite");
  // chunk_size is a tuning hint with no effect on the result.
  const bool has_decay = node_has_input(n, 4), has_beta = node_has_input(n, 5), has_erase = node_has_input(n, 6);
  if (a.gating != has_decay)
    return invalid_argument(info.where() + "update_rule '" + rule + "' " + (a.gating ? "requires" : "forbids") +
                            " the decay input");
  if (a.delta != has_beta)
    return invalid_argument(info.where() + "update_rule '" + rule + "' " + (a.delta ? "requires" : "forbids") +
                            " the beta input");
  if (has_erase && !a.delta)
    return invalid_argument(info.where() + "update_rule '" + rule + "' forbids the erase_gate input");
  if (n.inputs.size() > 7)
    return invalid_argument(info.where() + "takes at most 7 inputs, got " + std::to_string(n.inputs.size()));
  const char* names[] = {"query", "key", "value", "past_state", "decay", "beta", "erase_gate"};
  for (size_t i = 0; i < 7; ++i) BH_RETURN_IF_ERROR(require_float_input(info, i, names[i]));
  return make_kernel([a](KernelContext& ctx) { return linear_attention_compute(ctx, a); });
}

// =====================================================================================
// CausalConvWithState (opset 27)
// =====================================================================================
//
// input [B, C, L], weight [C, 1, K], bias [C], past_state [B, C, K-1] (zeros when omitted).
// padded = concat(past_state, input) along the last axis; output = the depthwise valid
// Conv1d of padded with weight (+ bias), rounded to the input's type, then SiLU when
// activation is silu or swish; present_state = padded's last K-1 positions.

enum class ConvActivation { kNone, kSilu };

// `v` rounded to element type `dt` and back (the reference rounds the convolution to the
// input's type before the activation).
float round_to(DataType dt, float v) {
  if (dt == DataType::kFloat16) return half_to_float(float_to_half(v));
  if (dt == DataType::kBFloat16) return bfloat16_to_float(float_to_bfloat16(v));
  return v;
}
double round_to(DataType, double v) { return v; }

template <typename A>
void causal_conv_run(ConvActivation act, DataType dt, int threads, int64_t B, int64_t C, int64_t L, int64_t K,
                     const A* x, const A* wt, const A* bias, const A* past, A* y) {
  parallel_for(threads, B * C, 1, [&](int64_t begin, int64_t end) {
    std::vector<A> padded(static_cast<size_t>(L + K - 1));
    for (int64_t bc = begin; bc < end; ++bc) {
      const int64_t c = bc % C;
      if (past) std::copy(past + bc * (K - 1), past + (bc + 1) * (K - 1), padded.begin());
      else std::fill(padded.begin(), padded.begin() + (K - 1), A(0));
      std::copy(x + bc * L, x + (bc + 1) * L, padded.begin() + (K - 1));
      const A* wc = wt + c * K;
      A* yo = y + bc * L;
      for (int64_t l = 0; l < L; ++l) {
        A acc = bias ? bias[c] : A(0);
        for (int64_t j = 0; j < K; ++j) acc += wc[j] * padded[l + j];
        if (act == ConvActivation::kSilu) {
          acc = round_to(dt, acc);
          acc = acc / (A(1) + std::exp(-acc));
        }
        yo[l] = acc;
      }
    }
  });
}

Status causal_conv_compute(KernelContext& ctx, ConvActivation act) {
  const std::string w = ctx.where();
  BH_ASSIGN_OR_RETURN(const Tensor* xp, required_input(ctx, 0, "input"));
  BH_ASSIGN_OR_RETURN(const Tensor* wp, required_input(ctx, 1, "weight"));
  BH_ASSIGN_OR_RETURN(const Tensor* bp, optional_input(ctx, 2, "bias"));
  BH_ASSIGN_OR_RETURN(const Tensor* pp, optional_input(ctx, 3, "past_state"));
  const DataType dt = xp->dtype();
  BH_RETURN_IF_ERROR(require_float(ctx, *xp, "input"));
  for (const Tensor* t : {wp, bp, pp})
    if (t && t->dtype() != dt)
      return invalid_argument(w + "input, weight, bias and past_state must have one element type, got " + xp->describe() +
                              " and " + t->describe());
  if (xp->rank() != 3) return invalid_argument(w + "input must be 3-D [batch, channels, length], got " + xp->describe());
  const int64_t B = xp->dim(0), C = xp->dim(1), L = xp->dim(2);
  if (wp->rank() != 3 || wp->dim(0) != C || wp->dim(1) != 1 || wp->dim(2) < 1)
    return invalid_argument(w + "weight must be [" + std::to_string(C) + ",1,k] with k >= 1 (one filter per channel), got " +
                            wp->describe());
  const int64_t K = wp->dim(2);
  if (bp && bp->shape() != Shape{C}) return invalid_argument(w + "bias must be " + dims({C}) + ", got " + bp->describe());
  if (pp && pp->shape() != Shape{B, C, K - 1})
    return invalid_argument(w + "past_state must be " + dims({B, C, K - 1}) + ", got " + pp->describe());

  const DataType ct = compute_type(dt);
  Tensor y = Tensor::host(ct, Shape{B, C, L});
  BH_ASSIGN_OR_RETURN(Tensor x, in_type(ctx, *xp, ct));
  BH_ASSIGN_OR_RETURN(Tensor wt, in_type(ctx, *wp, ct));
  Tensor bias, past;
  if (bp) {
    BH_ASSIGN_OR_RETURN(bias, in_type(ctx, *bp, ct));
  }
  if (pp) {
    BH_ASSIGN_OR_RETURN(past, in_type(ctx, *pp, ct));
  }
  auto run = [&](auto tag) {
    using A = decltype(tag);
    causal_conv_run<A>(act, dt, ctx.threads(), B, C, L, K, x.data<A>(), wt.data<A>(), bias.defined() ? bias.data<A>() : nullptr,
                       past.defined() ? past.data<A>() : nullptr, y.data<A>());
  };
  if (ct == DataType::kFloat64) run(double{});
  else run(float{});
  BH_RETURN_IF_ERROR(store_output(ctx, 0, dt, y));
  if (!ctx.output_wanted(1)) return Status::ok();
  // present_state: element copies of padded's tail, in the input's own type.
  BH_ASSIGN_OR_RETURN(Tensor present, ctx.allocate_output(1, dt, Shape{B, C, K - 1}));
  const size_t es = dtype_size(dt);
  char* dst = static_cast<char*>(present.raw());
  const char* xs = static_cast<const char*>(xp->raw());
  const char* ps = pp ? static_cast<const char*>(pp->raw()) : nullptr;
  for (int64_t bc = 0; bc < B * C; ++bc)
    for (int64_t j = 0; j < K - 1; ++j) {
      const int64_t n = L + j;  // position in padded
      char* d = dst + static_cast<size_t>(bc * (K - 1) + j) * es;
      if (n >= K - 1) std::memcpy(d, xs + static_cast<size_t>(bc * L + n - (K - 1)) * es, es);
      else if (ps) std::memcpy(d, ps + static_cast<size_t>(bc * (K - 1) + n) * es, es);
      else std::memset(d, 0, es);
    }
  return Status::ok();
}

Result<std::unique_ptr<Kernel>> make_causal_conv(const KernelInfo& info) {
  const std::string act = info.node.attr_string("activation", "none");
  if (act != "none" && act != "silu" && act != "swish")
    return invalid_argument(info.where() + "activation must be none, silu or swish, got '" + act + "'");
  const char* names[] = {"input", "weight", "bias", "past_state"};
  for (size_t i = 0; i < 4; ++i) BH_RETURN_IF_ERROR(require_float_input(info, i, names[i]));
  const ConvActivation a = act == "none" ? ConvActivation::kNone : ConvActivation::kSilu;
  return make_kernel([a](KernelContext& ctx) { return causal_conv_compute(ctx, a); });
}

// =====================================================================================
// FlexAttention (ai.onnx.preview, version 1)
// =====================================================================================
//
// Q [B, Hq, L, E], K [B, Hkv, S, E], V [B, Hkv, S, Ev], Hq a multiple of Hkv (query head h
// reads kv head h / (Hq/Hkv)):
//   scores = (Q K^T) * scale                  [B, Hq, L, S], scale 1/sqrt(E) by default
//   scores = score_mod(scores), then mask_mod(scores)   when given
//   probs  = Softmax(scores, last axis)       (a row of -inf only: zeros, as Softmax here)
//   probs  = prob_mod(probs)                  when given
//   Y      = probs V                          [B, Hq, L, Ev] in V's element type
// Scores and probabilities are float32 (float64 for float64 Q and K); each subgraph takes
// the whole tensor as its one input and gives one tensor of the same shape.

const char* const kFlexStages[] = {"score_mod", "mask_mod", "prob_mod"};

struct FlexAttrs {
  bool has_scale = false;
  float scale = 1;
  bool stage[3] = {false, false, false};  // score_mod, mask_mod, prob_mod present
};

// Runs stage `s` on `x` (element type ct) and returns its result in ct.
Result<Tensor> run_stage(KernelContext& ctx, int s, const Tensor& x, DataType ct) {
  const char* name = kFlexStages[s];
  BH_ASSIGN_OR_RETURN(std::vector<Value> outs, ctx.run_subgraph(name, {Value(x)}));
  if (outs.size() != 1 || !outs[0].is_tensor())
    return invalid_argument(ctx.where() + name + " must give one tensor");
  const Tensor& r = outs[0].tensor;
  if (!dtype_is_float(r.dtype()) || r.shape() != x.shape())
    return invalid_argument(ctx.where() + name + " must give a float tensor of the shape it takes, " + x.describe() +
                            ", got " + r.describe());
  if (!r.raw() && r.numel() > 0) return invalid_argument(ctx.where() + name + "'s result is not in host memory");
  return in_type(ctx, r, ct);
}

template <typename A>
void flex_scores(int threads, int64_t B, int64_t Hq, int64_t Hkv, int64_t L, int64_t S, int64_t E, A scale, const A* q,
                 const A* k, A* scores) {
  const int64_t G = Hq / Hkv;
  parallel_for(threads, B * Hq, 1, [&](int64_t begin, int64_t end) {
    for (int64_t bh = begin; bh < end; ++bh) {
      const int64_t b = bh / Hq, h = bh % Hq;
      const A* kb = k + (b * Hkv + h / G) * S * E;
      for (int64_t i = 0; i < L; ++i) {
        const A* qi = q + (bh * L + i) * E;
        A* si = scores + (bh * L + i) * S;
        for (int64_t j = 0; j < S; ++j) {
          const A* kj = kb + j * E;
          A acc = 0;
          for (int64_t e = 0; e < E; ++e) acc += qi[e] * kj[e];
          si[j] = acc * scale;
        }
      }
    }
  });
}

template <typename A>
void softmax_rows(int threads, int64_t rows, int64_t n, const A* x, A* y) {
  parallel_for(threads, rows, 1, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const A* xr = x + r * n;
      A* yr = y + r * n;
      A m = -std::numeric_limits<A>::infinity();
      for (int64_t j = 0; j < n; ++j) m = std::max(m, xr[j]);
      if (std::isinf(m) && m < 0) {  // every score masked: no probability mass (as Softmax here)
        std::fill(yr, yr + n, A(0));
        continue;
      }
      A sum = 0;
      for (int64_t j = 0; j < n; ++j) sum += (yr[j] = std::exp(xr[j] - m));
      for (int64_t j = 0; j < n; ++j) yr[j] /= sum;
    }
  });
}

template <typename A>
void flex_output(int threads, int64_t B, int64_t Hq, int64_t Hkv, int64_t L, int64_t S, int64_t Ev, const A* p,
                 const A* v, A* y) {
  const int64_t G = Hq / Hkv;
  parallel_for(threads, B * Hq, 1, [&](int64_t begin, int64_t end) {
    for (int64_t bh = begin; bh < end; ++bh) {
      const int64_t b = bh / Hq, h = bh % Hq;
      const A* vb = v + (b * Hkv + h / G) * S * Ev;
      for (int64_t i = 0; i < L; ++i) {
        const A* pi = p + (bh * L + i) * S;
        A* yi = y + (bh * L + i) * Ev;
        std::fill(yi, yi + Ev, A(0));
        for (int64_t j = 0; j < S; ++j) {
          const A pj = pi[j];
          const A* vj = vb + j * Ev;
          for (int64_t e = 0; e < Ev; ++e) yi[e] += pj * vj[e];
        }
      }
    }
  });
}

Status flex_attention_compute(KernelContext& ctx, const FlexAttrs& a) {
  const std::string w = ctx.where();
  BH_ASSIGN_OR_RETURN(const Tensor* qp, required_input(ctx, 0, "Q"));
  BH_ASSIGN_OR_RETURN(const Tensor* kp, required_input(ctx, 1, "K"));
  BH_ASSIGN_OR_RETURN(const Tensor* vp, required_input(ctx, 2, "V"));
  BH_RETURN_IF_ERROR(require_float(ctx, *qp, "Q"));
  BH_RETURN_IF_ERROR(require_float(ctx, *vp, "V"));
  if (kp->dtype() != qp->dtype())
    return invalid_argument(w + "Q and K must have one element type, got " + qp->describe() + " and " + kp->describe());
  if (qp->rank() != 4 || kp->rank() != 4 || vp->rank() != 4)
    return invalid_argument(w + "Q, K and V must be 4-D [batch, heads, sequence, head_size], got " + qp->describe() + ", " +
                            kp->describe() + " and " + vp->describe());
  const int64_t B = qp->dim(0), Hq = qp->dim(1), L = qp->dim(2), E = qp->dim(3);
  const int64_t Hkv = kp->dim(1), S = kp->dim(2), Ev = vp->dim(3);
  if (kp->dim(0) != B || vp->dim(0) != B || kp->dim(3) != E || vp->dim(1) != Hkv || vp->dim(2) != S)
    return invalid_argument(w + "K " + kp->describe() + " and V " + vp->describe() + " do not match Q " + qp->describe());
  if (Hkv <= 0 || Hq % Hkv != 0)
    return invalid_argument(w + "Q's " + std::to_string(Hq) + " heads are not a multiple of K's " + std::to_string(Hkv));
  const DataType ct = compute_type(qp->dtype());
  BH_ASSIGN_OR_RETURN(Tensor q, in_type(ctx, *qp, ct));
  BH_ASSIGN_OR_RETURN(Tensor k, in_type(ctx, *kp, ct));
  BH_ASSIGN_OR_RETURN(Tensor v, in_type(ctx, *vp, ct));
  Tensor scores = Tensor::host(ct, Shape{B, Hq, L, S});
  const double scale = a.has_scale ? a.scale : 1.0 / std::sqrt(static_cast<double>(E));
  if (ct == DataType::kFloat64)
    flex_scores<double>(ctx.threads(), B, Hq, Hkv, L, S, E, scale, q.data<double>(), k.data<double>(), scores.data<double>());
  else
    flex_scores<float>(ctx.threads(), B, Hq, Hkv, L, S, E, static_cast<float>(scale), q.data<float>(), k.data<float>(),
                       scores.data<float>());
  for (int s = 0; s < 2; ++s) {
    if (!a.stage[s]) continue;
    BH_ASSIGN_OR_RETURN(scores, run_stage(ctx, s, scores, ct));
  }
  Tensor probs = Tensor::host(ct, scores.shape());
  if (ct == DataType::kFloat64) softmax_rows<double>(ctx.threads(), B * Hq * L, S, scores.data<double>(), probs.data<double>());
  else softmax_rows<float>(ctx.threads(), B * Hq * L, S, scores.data<float>(), probs.data<float>());
  if (a.stage[2]) {
    BH_ASSIGN_OR_RETURN(probs, run_stage(ctx, 2, probs, ct));
  }
  Tensor y = Tensor::host(ct, Shape{B, Hq, L, Ev});
  if (ct == DataType::kFloat64)
    flex_output<double>(ctx.threads(), B, Hq, Hkv, L, S, Ev, probs.data<double>(), v.data<double>(), y.data<double>());
  else
    flex_output<float>(ctx.threads(), B, Hq, Hkv, L, S, Ev, probs.data<float>(), v.data<float>(), y.data<float>());
  return store_output(ctx, 0, vp->dtype(), y);
}

Result<std::unique_ptr<Kernel>> make_flex_attention(const KernelInfo& info) {
  const ir::Node& n = info.node;
  FlexAttrs a;
  for (const auto& [name, attr] : n.attrs) {
    bool known = name == "scale";
    for (const char* s : kFlexStages) known = known || name == s;
    if (!known) return unsupported(info.where() + "attribute '" + name + "' is not supported");
  }
  if (const ir::Attribute* s = n.attr("scale")) {
    if (s->type != ir::AttrType::kFloat) return invalid_argument(info.where() + "scale must be a float");
    a.has_scale = true;
    a.scale = s->f;
  }
  // The element type the subgraphs see: float32 scores, float64 for float64 Q and K.
  const DataType qt = known_input_type(info, 0);
  const DataType ct = qt == DataType::kUndefined ? DataType::kUndefined : compute_type(qt);
  for (int s = 0; s < 3; ++s) {
    const ir::Attribute* g = n.attr(kFlexStages[s]);
    if (!g) continue;
    if (g->type != ir::AttrType::kGraph || !g->g)
      return invalid_argument(info.where() + kFlexStages[s] + " must be a graph");
    if (g->g->inputs.size() != 1 || g->g->outputs.size() != 1)
      return unsupported(info.where() + kFlexStages[s] + " must take one input (the whole " +
                         (s == 2 ? "probability" : "score") + " tensor) and give one output; it takes " +
                         std::to_string(g->g->inputs.size()) + " and gives " + std::to_string(g->g->outputs.size()));
    const DataType declared = g->g->inputs[0].dtype;
    if (ct != DataType::kUndefined && declared != DataType::kUndefined && declared != ct)
      return invalid_argument(info.where() + kFlexStages[s] + " declares " + dtype_name(declared) + " input, but takes " +
                              dtype_name(ct) + " " + (s == 2 ? "probabilities" : "scores") + " for " + dtype_name(qt) +
                              " Q and K");
    a.stage[s] = true;
  }
  BH_RETURN_IF_ERROR(require_float_input(info, 0, "Q"));
  BH_RETURN_IF_ERROR(require_float_input(info, 1, "K"));
  BH_RETURN_IF_ERROR(require_float_input(info, 2, "V"));
  return make_kernel([a](KernelContext& ctx) { return flex_attention_compute(ctx, a); });
}

}  // namespace

void register_sequence_attention_kernels(KernelTable& t) {
  t.add("LinearAttention", 27, make_linear_attention);
  t.add("CausalConvWithState", 27, make_causal_conv);
  t.add("FlexAttention", 1, make_flex_attention, "ai.onnx.preview");
}

}  // namespace bulkhead::cpu
