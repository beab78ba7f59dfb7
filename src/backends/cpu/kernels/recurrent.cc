// Recurrent layers: RNN, GRU, LSTM (all opsets; layout from opset 14).
//
// Weights are re-packed transposed ([input][gates*hidden]) so that both the input
// projection and the per-step recurrent product are contiguous axpy updates that the
// compiler vectorises. The input projection for every timestep is computed up front; each
// step then only does the recurrent mat-vec and the gate maths. Constant weights are
// packed once when the kernel is created.
#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "backends/cpu/cpu_kernels.h"
#include "backends/cpu/cpu_util.h"

namespace bulkhead::cpu {
namespace {

enum class Cell { kRnn, kGru, kLstm };

int cell_gates(Cell c) { return c == Cell::kRnn ? 1 : c == Cell::kGru ? 3 : 4; }
int cell_acts(Cell c) { return c == Cell::kRnn ? 1 : c == Cell::kGru ? 2 : 3; }

enum class Act { kSigmoid, kTanh, kRelu, kAffine, kLeakyRelu, kThresholdedRelu, kScaledTanh, kHardSigmoid, kElu,
                 kSoftsign, kSoftplus };

struct Activation {
  Act kind = Act::kSigmoid;
  float alpha = 0, beta = 0;
};

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// Parses activation names, consuming activation_alpha / activation_beta in order for the
// functions that take them (defaults as in the corresponding ONNX operators).
Result<std::vector<Activation>> parse_activations(const std::vector<std::string>& names, const std::vector<float>& alphas,
                                                  const std::vector<float>& betas, const std::string& where) {
  std::vector<Activation> r;
  size_t ai = 0, bi = 0;
  for (const std::string& n0 : names) {
    std::string n = lower(n0);
    Activation a;
    bool need_a = false, need_b = false;
    float da = 0, db = 0;
    if (n == "sigmoid") a.kind = Act::kSigmoid;
    else if (n == "tanh") a.kind = Act::kTanh;
    else if (n == "relu") a.kind = Act::kRelu;
    else if (n == "affine") a.kind = Act::kAffine, need_a = need_b = true, da = 1.f, db = 0.f;
    else if (n == "leakyrelu") a.kind = Act::kLeakyRelu, need_a = true, da = 0.01f;
    else if (n == "thresholdedrelu") a.kind = Act::kThresholdedRelu, need_a = true, da = 1.f;
    else if (n == "scaledtanh") a.kind = Act::kScaledTanh, need_a = need_b = true, da = 1.f, db = 1.f;
    else if (n == "hardsigmoid") a.kind = Act::kHardSigmoid, need_a = need_b = true, da = 0.2f, db = 0.5f;
    else if (n == "elu") a.kind = Act::kElu, need_a = true, da = 1.f;
    else if (n == "softsign") a.kind = Act::kSoftsign;
    else if (n == "softplus") a.kind = Act::kSoftplus;
    else return unsupported(where + "unsupported activation function '" + n0 + "'");
    a.alpha = need_a ? (ai < alphas.size() ? alphas[ai++] : da) : 0.f;
    a.beta = need_b ? (bi < betas.size() ? betas[bi++] : db) : 0.f;
    r.push_back(a);
  }
  return r;
}

template <typename T>
void activate(const Activation& a, T* x, int64_t n) {
  const T al = static_cast<T>(a.alpha), be = static_cast<T>(a.beta);
  switch (a.kind) {
    case Act::kSigmoid:
      for (int64_t i = 0; i < n; ++i) x[i] = T(1) / (T(1) + std::exp(-x[i]));
      break;
    case Act::kTanh:
      for (int64_t i = 0; i < n; ++i) x[i] = std::tanh(x[i]);
      break;
    case Act::kRelu:
      for (int64_t i = 0; i < n; ++i) x[i] = x[i] > T(0) ? x[i] : T(0);
      break;
    case Act::kAffine:
      for (int64_t i = 0; i < n; ++i) x[i] = al * x[i] + be;
      break;
    case Act::kLeakyRelu:
      for (int64_t i = 0; i < n; ++i) x[i] = x[i] >= T(0) ? x[i] : al * x[i];
      break;
    case Act::kThresholdedRelu:
      for (int64_t i = 0; i < n; ++i) x[i] = x[i] > al ? x[i] : T(0);
      break;
    case Act::kScaledTanh:
      for (int64_t i = 0; i < n; ++i) x[i] = al * std::tanh(be * x[i]);
      break;
    case Act::kHardSigmoid:
      for (int64_t i = 0; i < n; ++i) x[i] = std::min(T(1), std::max(T(0), al * x[i] + be));
      break;
    case Act::kElu:
      for (int64_t i = 0; i < n; ++i) x[i] = x[i] >= T(0) ? x[i] : al * (std::exp(x[i]) - T(1));
      break;
    case Act::kSoftsign:
      for (int64_t i = 0; i < n; ++i) x[i] = x[i] / (T(1) + std::abs(x[i]));
      break;
    case Act::kSoftplus:
      for (int64_t i = 0; i < n; ++i) x[i] = x[i] > T(20) ? x[i] : std::log1p(std::exp(x[i]));
      break;
  }
}

template <typename T>
inline void clip_vec(T* x, int64_t n, bool has_clip, T clip) {
  if (!has_clip) return;
  for (int64_t i = 0; i < n; ++i) x[i] = std::min(clip, std::max(-clip, x[i]));
}

// y[0:n] += a * x[0:n]
template <typename T>
inline void axpy(T a, const T* __restrict x, T* __restrict y, int64_t n) {
#pragma omp simd
  for (int64_t j = 0; j < n; ++j) y[j] += a * x[j];
}

// out[0:n] += v[0:k] · M[0:k, col:col+n] with M row-major of leading dimension ld.
template <typename T>
inline void matvec_acc(const T* v, const T* m, int64_t k, int64_t ld, int64_t col, int64_t n, T* out) {
  for (int64_t i = 0; i < k; ++i) {
    T a = v[i];
    if (a != T(0)) axpy(a, m + i * ld + col, out, n);
  }
}

struct Config {
  Cell cell = Cell::kLstm;
  int num_dir = 1;
  bool reverse = false;  // direction == "reverse"
  int64_t hidden_attr = -1;
  bool has_clip = false;
  float clip = 0;
  bool input_forget = false;
  int layout = 0;
  bool linear_before_reset = false;
  std::vector<Activation> acts;  // cell_acts(cell) per direction
};

// Weights re-packed for one element type.
template <typename T>
struct Packed {
  int64_t I = 0, H = 0;
  int nd = 1;
  std::vector<T> wt;    // [nd][I][G*H]
  std::vector<T> rt;    // [nd][H][G*H]
  std::vector<T> bias;  // [nd][G*H]: Wb + Rb (GRU with linear_before_reset: h gate Wb only)
  std::vector<T> rbh;   // [nd][H]: GRU recurrent bias of the h gate when linear_before_reset
  std::vector<T> peep;  // [nd][3H] LSTM peepholes (i, o, f), empty when absent
};

template <typename T>
const T* host_data(const Tensor& t) {
  return static_cast<const T*>(t.raw());
}

template <typename T>
Result<Packed<T>> pack(const Config& cfg, const Tensor& W, const Tensor& R, const Tensor* B, const Tensor* P,
                       const std::string& where) {
  const int G = cell_gates(cfg.cell);
  const DataType dt = W.dtype();
  if (R.dtype() != dt || (B && B->dtype() != dt) || (P && P->dtype() != dt))
    return invalid_argument(where + "W, R, B and P must share one element type");
  if (W.rank() != 3) return invalid_argument(where + "W must have rank 3, got " + W.describe());
  if (R.rank() != 3) return invalid_argument(where + "R must have rank 3, got " + R.describe());
  const int64_t H = R.dim(2);
  if (H <= 0) return invalid_argument(where + "R has an empty hidden dimension: " + R.describe());
  if (cfg.hidden_attr >= 0 && cfg.hidden_attr != H)
    return invalid_argument(where + "hidden_size is " + std::to_string(cfg.hidden_attr) + " but R is " + R.describe());
  const int64_t GH = G * H, I = W.dim(2);
  const int nd = cfg.num_dir;
  if (W.dim(0) != nd || W.dim(1) != GH)
    return invalid_argument(where + "W must be [" + std::to_string(nd) + "," + std::to_string(GH) + ",input_size], got " +
                            W.describe());
  if (R.dim(0) != nd || R.dim(1) != GH)
    return invalid_argument(where + "R must be [" + std::to_string(nd) + "," + std::to_string(GH) + "," +
                            std::to_string(H) + "], got " + R.describe());
  if (B && (B->rank() != 2 || B->dim(0) != nd || B->dim(1) != 2 * GH))
    return invalid_argument(where + "B must be [" + std::to_string(nd) + "," + std::to_string(2 * GH) + "], got " +
                            B->describe());
  if (P && (P->rank() != 2 || P->dim(0) != nd || P->dim(1) != 3 * H))
    return invalid_argument(where + "P must be [" + std::to_string(nd) + "," + std::to_string(3 * H) + "], got " +
                            P->describe());
  if (!W.raw() || !R.raw() || (B && !B->raw()) || (P && !P->raw()))
    return invalid_argument(where + "weights are not in host memory");

  Packed<T> p;
  p.I = I;
  p.H = H;
  p.nd = nd;
  p.wt.resize(static_cast<size_t>(nd * I * GH));
  p.rt.resize(static_cast<size_t>(nd * H * GH));
  p.bias.assign(static_cast<size_t>(nd * GH), T(0));
  const bool lbr = cfg.cell == Cell::kGru && cfg.linear_before_reset;
  if (lbr) p.rbh.assign(static_cast<size_t>(nd * H), T(0));
  const T* w = host_data<T>(W);
  const T* r = host_data<T>(R);
  for (int d = 0; d < nd; ++d) {
    for (int64_t g = 0; g < GH; ++g) {
      for (int64_t i = 0; i < I; ++i) p.wt[(d * I + i) * GH + g] = w[(d * GH + g) * I + i];
      for (int64_t i = 0; i < H; ++i) p.rt[(d * H + i) * GH + g] = r[(d * GH + g) * H + i];
    }
    if (B) {
      const T* b = host_data<T>(*B) + d * 2 * GH;
      for (int64_t g = 0; g < GH; ++g) {
        T wb = b[g], rb = b[GH + g];
        if (lbr && g >= 2 * H) {
          p.bias[d * GH + g] = wb;
          p.rbh[d * H + (g - 2 * H)] = rb;
        } else {
          p.bias[d * GH + g] = wb + rb;
        }
      }
    }
  }
  if (P) {
    const T* pp = host_data<T>(*P);
    p.peep.assign(pp, pp + nd * 3 * H);
  }
  return p;
}

class RecurrentKernel final : public Kernel {
 public:
  RecurrentKernel(Config cfg, std::optional<Packed<float>> pf, std::optional<Packed<double>> pd)
      : cfg_(std::move(cfg)), packed_f_(std::move(pf)), packed_d_(std::move(pd)) {}

  Status compute(KernelContext& ctx) const override {
    const Tensor* X = ctx.input(0);
    if (!X) return invalid_argument(ctx.where() + "input X is missing");
    switch (X->dtype()) {
      case DataType::kFloat32: return run<float>(ctx, packed_f_ ? &*packed_f_ : nullptr);
      case DataType::kFloat64: return run<double>(ctx, packed_d_ ? &*packed_d_ : nullptr);
      default: return unsupported(ctx.where() + "unsupported element type " + dtype_name(X->dtype()));
    }
  }

 private:
  template <typename T>
  Status run(KernelContext& ctx, const Packed<T>* pre) const {
    const std::string where = ctx.where();
    const Cell cell = cfg_.cell;
    const bool lstm = cell == Cell::kLstm;
    const Tensor& X = *ctx.input(0);
    std::optional<Packed<T>> local;
    if (!pre) {
      const Tensor* W = ctx.input(1);
      const Tensor* R = ctx.input(2);
      if (!W || !R) return invalid_argument(where + "inputs W and R are required");
      if (W->dtype() != X.dtype())
        return invalid_argument(where + "X is " + dtype_name(X.dtype()) + " but W is " + dtype_name(W->dtype()));
      const Tensor* B = ctx.has_input(3) ? ctx.input(3) : nullptr;
      const Tensor* P = lstm && ctx.has_input(7) ? ctx.input(7) : nullptr;
      auto r = pack<T>(cfg_, *W, *R, B, P, where);
      if (!r.is_ok()) return r.status();
      local = std::move(r).value();
      pre = &*local;
    }
    const Packed<T>& pk = *pre;
    const int G = cell_gates(cell);
    const int nd = cfg_.num_dir;
    const int64_t H = pk.H, I = pk.I, GH = G * H;
    const bool layout1 = cfg_.layout != 0;

    if (X.rank() != 3) return invalid_argument(where + "X must have rank 3, got " + X.describe());
    if (!X.raw() && X.numel()) return invalid_argument(where + "X is not in host memory");
    const int64_t T_len = layout1 ? X.dim(1) : X.dim(0);
    const int64_t batch = layout1 ? X.dim(0) : X.dim(1);
    if (X.dim(2) != I)
      return invalid_argument(where + "X has input size " + std::to_string(X.dim(2)) + " but W expects " +
                              std::to_string(I));

    std::vector<int64_t> lens(static_cast<size_t>(batch), T_len);
    if (ctx.has_input(4)) {
      const Tensor* sl = ctx.input(4);
      if (!sl || (sl->dtype() != DataType::kInt32 && sl->dtype() != DataType::kInt64) || sl->rank() != 1 ||
          sl->dim(0) != batch)
        return invalid_argument(where + "sequence_lens must be an int32 tensor of shape [" + std::to_string(batch) + "]");
      lens = read_int_tensor(*sl);
      for (int64_t l : lens)
        if (l < 0 || l > T_len)
          return invalid_argument(where + "sequence_lens value " + std::to_string(l) + " is outside [0, " +
                                  std::to_string(T_len) + "]");
    }
    const bool ragged = std::any_of(lens.begin(), lens.end(), [&](int64_t l) { return l != T_len; });

    // Initial states, laid out [nd][batch][H] internally.
    const Shape state_shape = layout1 ? Shape{batch, nd, H} : Shape{nd, batch, H};
    auto state_index = [&](int d, int64_t b) { return layout1 ? (b * nd + d) * H : (d * batch + b) * H; };
    auto load_state = [&](int idx, const char* name, std::vector<T>& dst) -> Status {
      dst.assign(static_cast<size_t>(nd * batch * H), T(0));
      if (!ctx.has_input(idx)) return Status::ok();
      const Tensor* s = ctx.input(idx);
      if (!s || s->dtype() != X.dtype() || s->shape() != state_shape)
        return invalid_argument(where + name + " must be " + dtype_name(X.dtype()) + shape_to_string(state_shape) +
                                ", got " + (s ? s->describe() : std::string("a non-tensor")));
      if (!s->raw() && s->numel()) return invalid_argument(where + name + " is not in host memory");
      const T* src = host_data<T>(*s);
      for (int d = 0; d < nd; ++d)
        for (int64_t b = 0; b < batch; ++b)
          std::memcpy(&dst[(d * batch + b) * H], src + state_index(d, b), sizeof(T) * H);
      return Status::ok();
    };
    std::vector<T> h_state, c_state;
    BH_RETURN_IF_ERROR(load_state(5, "initial_h", h_state));
    if (lstm) BH_RETURN_IF_ERROR(load_state(6, "initial_c", c_state));

    // Outputs.
    Tensor Y, Yh, Yc;
    if (ctx.num_outputs() > 0 && ctx.output_wanted(0)) {
      Shape ys = layout1 ? Shape{batch, T_len, nd, H} : Shape{T_len, nd, batch, H};
      BH_ASSIGN_OR_RETURN(Y, ctx.allocate_output(0, X.dtype(), ys));
      if (ragged && Y.nbytes()) std::memset(Y.raw(), 0, Y.nbytes());
    }
    if (ctx.num_outputs() > 1 && ctx.output_wanted(1)) {
      BH_ASSIGN_OR_RETURN(Yh, ctx.allocate_output(1, X.dtype(), state_shape));
    }
    if (lstm && ctx.num_outputs() > 2 && ctx.output_wanted(2)) {
      BH_ASSIGN_OR_RETURN(Yc, ctx.allocate_output(2, X.dtype(), state_shape));
    }
    T* y = Y.defined() ? Y.data<T>() : nullptr;

    const T* x = host_data<T>(X);
    const int64_t rows = T_len * batch;
    std::vector<T> xproj(static_cast<size_t>(rows * GH));
    std::vector<T> gates(static_cast<size_t>(batch * GH));
    std::vector<T> tmp(cell == Cell::kGru ? static_cast<size_t>(batch * 2 * H) : 0);
    const bool has_clip = cfg_.has_clip;
    const T clip = static_cast<T>(cfg_.clip);
    const int na = cell_acts(cell);

    for (int d = 0; d < nd; ++d) {
      const bool rev = cfg_.reverse || d == 1;
      const T* wt = pk.wt.data() + d * I * GH;
      const T* rt = pk.rt.data() + d * H * GH;
      const T* bias = pk.bias.data() + d * GH;
      const T* rbh = pk.rbh.empty() ? nullptr : pk.rbh.data() + d * H;
      const T* peep = pk.peep.empty() ? nullptr : pk.peep.data() + d * 3 * H;
      const Activation* act = &cfg_.acts[static_cast<size_t>(d * na)];

      // Input projection for every (t, b): xproj[t][b] = bias + x[t][b] · W^T.
      const int64_t grain = std::max<int64_t>(1, (1 << 16) / std::max<int64_t>(1, I * GH));
      parallel_for(ctx.threads(), rows, grain, [&](int64_t r0, int64_t r1) {
        for (int64_t r = r0; r < r1; ++r) {
          const int64_t t = r / batch, b = r % batch;
          const T* xr = x + (layout1 ? (b * T_len + t) : (t * batch + b)) * I;
          T* out = xproj.data() + r * GH;
          std::memcpy(out, bias, sizeof(T) * GH);
          matvec_acc(xr, wt, I, GH, 0, GH, out);
        }
      });

      T* hs = h_state.data() + d * batch * H;
      T* cs = lstm ? c_state.data() + d * batch * H : nullptr;
      for (int64_t s = 0; s < T_len; ++s) {
        auto step = [&](int64_t b0, int64_t b1) {
          for (int64_t b = b0; b < b1; ++b) {
            const int64_t len = lens[b];
            if (s >= len) continue;
            const int64_t t = rev ? len - 1 - s : s;
            T* g = gates.data() + b * GH;
            T* h = hs + b * H;
            std::memcpy(g, xproj.data() + (t * batch + b) * GH, sizeof(T) * GH);
            if (cell == Cell::kLstm) {
              matvec_acc(h, rt, H, GH, 0, GH, g);
              T* c = cs + b * H;
              T *gi = g, *go = g + H, *gf = g + 2 * H, *gc = g + 3 * H;
              if (peep) {
                for (int64_t k = 0; k < H; ++k) {
                  gi[k] += peep[k] * c[k];
                  gf[k] += peep[2 * H + k] * c[k];
                }
              }
              clip_vec(gi, H, has_clip, clip);
              activate(act[0], gi, H);
              if (cfg_.input_forget) {
                for (int64_t k = 0; k < H; ++k) gf[k] = T(1) - gi[k];
              } else {
                clip_vec(gf, H, has_clip, clip);
                activate(act[0], gf, H);
              }
              clip_vec(gc, H, has_clip, clip);
              activate(act[1], gc, H);
              for (int64_t k = 0; k < H; ++k) c[k] = gf[k] * c[k] + gi[k] * gc[k];
              if (peep)
                for (int64_t k = 0; k < H; ++k) go[k] += peep[H + k] * c[k];
              clip_vec(go, H, has_clip, clip);
              activate(act[0], go, H);
              // h = o * h_act(C); reuse gc as scratch for h_act(C).
              std::memcpy(gc, c, sizeof(T) * H);
              activate(act[2], gc, H);
              for (int64_t k = 0; k < H; ++k) h[k] = go[k] * gc[k];
            } else if (cell == Cell::kGru) {
              T *gz = g, *gr = g + H, *gh = g + 2 * H;
              matvec_acc(h, rt, H, GH, 0, 2 * H, g);
              clip_vec(gz, 2 * H, has_clip, clip);
              activate(act[0], gz, 2 * H);  // z and r
              T* tb = tmp.data() + b * 2 * H;
              if (cfg_.linear_before_reset) {
                T* rec = tb;
                if (rbh) std::memcpy(rec, rbh, sizeof(T) * H);
                else std::fill(rec, rec + H, T(0));
                matvec_acc(h, rt, H, GH, 2 * H, H, rec);
                for (int64_t k = 0; k < H; ++k) gh[k] += gr[k] * rec[k];
              } else {
                T* rh = tb;
                for (int64_t k = 0; k < H; ++k) rh[k] = gr[k] * h[k];
                matvec_acc(rh, rt, H, GH, 2 * H, H, gh);
              }
              clip_vec(gh, H, has_clip, clip);
              activate(act[1], gh, H);
              for (int64_t k = 0; k < H; ++k) h[k] = (T(1) - gz[k]) * gh[k] + gz[k] * h[k];
            } else {
              matvec_acc(h, rt, H, GH, 0, GH, g);
              clip_vec(g, H, has_clip, clip);
              activate(act[0], g, H);
              std::memcpy(h, g, sizeof(T) * H);
            }
            if (y) {
              T* yo = y + (layout1 ? ((b * T_len + t) * nd + d) * H : ((t * nd + d) * batch + b) * H);
              std::memcpy(yo, h, sizeof(T) * H);
            }
          }
        };
        const int64_t bgrain = std::max<int64_t>(1, (1 << 17) / std::max<int64_t>(1, H * GH));
        parallel_for(ctx.threads(), batch, bgrain, step);
      }
    }

    auto store_state = [&](Tensor& out, const std::vector<T>& src) {
      if (!out.defined()) return;
      T* dst = out.data<T>();
      for (int d = 0; d < nd; ++d)
        for (int64_t b = 0; b < batch; ++b) std::memcpy(dst + state_index(d, b), &src[(d * batch + b) * H], sizeof(T) * H);
    };
    store_state(Yh, h_state);
    if (lstm) store_state(Yc, c_state);
    return Status::ok();
  }

  Config cfg_;
  std::optional<Packed<float>> packed_f_;
  std::optional<Packed<double>> packed_d_;
};

Result<std::unique_ptr<Kernel>> make_recurrent(Cell cell, const KernelInfo& info) {
  const ir::Node& n = info.node;
  const std::string where = info.where();
  Config cfg;
  cfg.cell = cell;
  std::string dir = n.attr_string("direction", "forward");
  if (dir == "forward") cfg.num_dir = 1;
  else if (dir == "reverse") cfg.num_dir = 1, cfg.reverse = true;
  else if (dir == "bidirectional") cfg.num_dir = 2;
  else return invalid_argument(where + "unknown direction '" + dir + "'");
  cfg.hidden_attr = n.attr_int("hidden_size", -1);
  if (n.has_attr("hidden_size") && cfg.hidden_attr <= 0)
    return invalid_argument(where + "hidden_size must be positive, got " + std::to_string(cfg.hidden_attr));
  if (n.has_attr("clip")) {
    cfg.has_clip = true;
    cfg.clip = n.attr_float("clip", 0.f);
    if (!(cfg.clip >= 0)) return invalid_argument(where + "clip must be non-negative");
  }
  cfg.input_forget = cell == Cell::kLstm && n.attr_int("input_forget", 0) != 0;
  cfg.layout = static_cast<int>(n.attr_int("layout", 0));
  if (cfg.layout != 0 && cfg.layout != 1) return invalid_argument(where + "layout must be 0 or 1");
  cfg.linear_before_reset = cell == Cell::kGru && n.attr_int("linear_before_reset", 0) != 0;

  const int na = cell_acts(cell);
  std::vector<std::string> names = n.attr_strings("activations");
  if (names.empty()) {
    std::vector<std::string> def = cell == Cell::kRnn   ? std::vector<std::string>{"Tanh"}
                                   : cell == Cell::kGru ? std::vector<std::string>{"Sigmoid", "Tanh"}
                                                        : std::vector<std::string>{"Sigmoid", "Tanh", "Tanh"};
    for (int d = 0; d < cfg.num_dir; ++d) names.insert(names.end(), def.begin(), def.end());
  } else if (cfg.num_dir == 2 && static_cast<int>(names.size()) == na) {
    std::vector<std::string> twice = names;
    twice.insert(twice.end(), names.begin(), names.end());
    names = std::move(twice);
  }
  if (static_cast<int>(names.size()) != na * cfg.num_dir)
    return invalid_argument(where + "expected " + std::to_string(na * cfg.num_dir) + " activations, got " +
                            std::to_string(names.size()));
  BH_ASSIGN_OR_RETURN(cfg.acts, parse_activations(names, n.attr_floats("activation_alpha"),
                                                  n.attr_floats("activation_beta"), where));

  // Pre-pack constant weights.
  auto present = [&](size_t i) { return i < n.inputs.size() && !n.inputs[i].empty(); };
  const bool lstm = cell == Cell::kLstm;
  std::optional<Packed<float>> pf;
  std::optional<Packed<double>> pd;
  bool all_const = info.input_is_constant(1) && info.input_is_constant(2) && (!present(3) || info.input_is_constant(3)) &&
                   (!lstm || !present(7) || info.input_is_constant(7));
  if (all_const) {
    const Tensor& W = info.constant_inputs[1];
    const Tensor& R = info.constant_inputs[2];
    const Tensor* B = present(3) ? &info.constant_inputs[3] : nullptr;
    const Tensor* P = lstm && present(7) ? &info.constant_inputs[7] : nullptr;
    if (W.dtype() == DataType::kFloat32) {
      BH_ASSIGN_OR_RETURN(pf, pack<float>(cfg, W, R, B, P, where));
    } else if (W.dtype() == DataType::kFloat64) {
      BH_ASSIGN_OR_RETURN(pd, pack<double>(cfg, W, R, B, P, where));
    } else {
      return unsupported(where + "unsupported element type " + dtype_name(W.dtype()));
    }
  } else if (!info.input_types.empty() && info.input_types[0] != DataType::kUndefined &&
             info.input_types[0] != DataType::kFloat32 && info.input_types[0] != DataType::kFloat64) {
    return unsupported(where + "unsupported element type " + dtype_name(info.input_types[0]));
  }
  return std::unique_ptr<Kernel>(std::make_unique<RecurrentKernel>(std::move(cfg), std::move(pf), std::move(pd)));
}

}  // namespace

void register_recurrent_kernels(KernelTable& t) {
  t.add("RNN", 1, [](const KernelInfo& info) { return make_recurrent(Cell::kRnn, info); });
  t.add("GRU", 1, [](const KernelInfo& info) { return make_recurrent(Cell::kGru, info); });
  t.add("LSTM", 1, [](const KernelInfo& info) { return make_recurrent(Cell::kLstm, info); });
}

}  // namespace bulkhead::cpu
