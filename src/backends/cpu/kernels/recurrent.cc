// Recurrent layers: RNN, GRU, LSTM (all opsets; layout from opset 14).
//
// Weights stay in the model's row-major layout ([gates*hidden][input]): every product is a
// run of contiguous dot products that the compiler vectorises. The input projection for
// every timestep is computed up front (four rows per weight pass); each step then only
// does the recurrent mat-vec and the gate maths. Constant weights and combined biases are
// prepared once when the kernel is created.
#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
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

// Vectorisable float exp (Cephes expf: range reduction by ln 2, degree-6 polynomial,
// about 1 ulp), used by the float sigmoid/tanh below so the gate loops vectorise.
inline float exp_approx(float x) {
  x = std::min(88.3762626647949f, std::max(-87.3365447504f, x));
  float fx = std::floor(x * 1.44269504088896341f + 0.5f);
  float r = x - fx * 0.693359375f + fx * 2.12194440e-4f;
  float z = r * r;
  float y = 1.9875691500E-4f;
  y = y * r + 1.3981999507E-3f;
  y = y * r + 8.3334519073E-3f;
  y = y * r + 4.1665795894E-2f;
  y = y * r + 1.6666665459E-1f;
  y = y * r + 5.0000001201E-1f;
  y = y * z + r + 1.0f;
  int32_t n = static_cast<int32_t>(fx) + 127;
  uint32_t bits = static_cast<uint32_t>(n) << 23;
  float scale;
  std::memcpy(&scale, &bits, sizeof(scale));
  return y * scale;
}

inline void sigmoid_f32(float* x, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) x[i] = 1.0f / (1.0f + exp_approx(-x[i]));
}

// tanh: odd polynomial for |x| < 0.625 (Cephes tanhf), 1 - 2 / (exp(2|x|) + 1) beyond.
inline void tanh_f32(float* x, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) {
    float v = x[i], a = std::abs(v);
    float z = v * v;
    float p = ((((-5.70498872745E-3f * z + 2.06390887954E-2f) * z - 5.37397155531E-2f) * z + 1.33314422036E-1f) * z -
               3.33332819422E-1f) * z * v + v;
    float e = exp_approx(2.0f * std::min(a, 9.0f));
    float q = 1.0f - 2.0f / (e + 1.0f);
    q = v < 0 ? -q : q;
    x[i] = a < 0.625f ? p : q;
  }
}

template <typename T>
void activate(const Activation& a, T* x, int64_t n) {
  const T al = static_cast<T>(a.alpha), be = static_cast<T>(a.beta);
  if constexpr (std::is_same_v<T, float>) {
    if (a.kind == Act::kSigmoid) return sigmoid_f32(x, n);
    if (a.kind == Act::kTanh) return tanh_f32(x, n);
  }
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

// Dot product; the simd reduction lets the compiler reassociate and vectorise.
template <typename T>
inline T dot(const T* __restrict a, const T* __restrict b, int64_t n) {
  T s = T(0);
#pragma omp simd reduction(+ : s)
  for (int64_t j = 0; j < n; ++j) s += a[j] * b[j];
  return s;
}

// Four dot products against one vector (shares the loads of v).
template <typename T>
inline void dot4(const T* __restrict m0, const T* __restrict m1, const T* __restrict m2, const T* __restrict m3,
                 const T* __restrict v, int64_t n, T* out) {
  T s0 = T(0), s1 = T(0), s2 = T(0), s3 = T(0);
#pragma omp simd reduction(+ : s0, s1, s2, s3)
  for (int64_t j = 0; j < n; ++j) {
    T x = v[j];
    s0 += m0[j] * x;
    s1 += m1[j] * x;
    s2 += m2[j] * x;
    s3 += m3[j] * x;
  }
  out[0] += s0;
  out[1] += s1;
  out[2] += s2;
  out[3] += s3;
}

// out[0:rows] += M[row0 : row0+rows, 0:k] · v, M row-major with k columns.
template <typename T>
inline void matvec_acc(const T* m, int64_t row0, int64_t rows, int64_t k, const T* v, T* out) {
  const T* base = m + row0 * k;
  int64_t r = 0;
  for (; r + 4 <= rows; r += 4)
    dot4(base + r * k, base + (r + 1) * k, base + (r + 2) * k, base + (r + 3) * k, v, k, out + r);
  for (; r < rows; ++r) out[r] += dot(base + r * k, v, k);
}

// Four input rows against one weight row at a time (shares the loads of the weight row).
template <typename T>
inline void matvec4_acc(const T* m, int64_t rows, int64_t k, const T* v0, const T* v1, const T* v2, const T* v3,
                        T* o0, T* o1, T* o2, T* o3) {
  for (int64_t r = 0; r < rows; ++r) {
    const T* __restrict w = m + r * k;
    T s0 = T(0), s1 = T(0), s2 = T(0), s3 = T(0);
#pragma omp simd reduction(+ : s0, s1, s2, s3)
    for (int64_t j = 0; j < k; ++j) {
      T x = w[j];
      s0 += v0[j] * x;
      s1 += v1[j] * x;
      s2 += v2[j] * x;
      s3 += v3[j] * x;
    }
    o0[r] += s0;
    o1[r] += s1;
    o2[r] += s2;
    o3[r] += s3;
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

// Weights of one element type, in the model's row-major layout ([nd][G*H][K]: each gate
// row is contiguous, so every product is a run of contiguous dot products), with the
// biases combined. Built once for constant weights, per call otherwise.
template <typename T>
struct Weights {
  int64_t I = 0, H = 0;
  const T* w = nullptr;  // [nd][G*H][I]
  const T* r = nullptr;  // [nd][G*H][H]
  Tensor w_keep, r_keep; // keep the weights alive
  std::vector<T> bias;   // [nd][G*H]: Wb + Rb (GRU with linear_before_reset: h gate Wb only)
  std::vector<T> rbh;    // [nd][H]: GRU recurrent bias of the h gate when linear_before_reset
  std::vector<T> peep;   // [nd][3H] LSTM peepholes (i, o, f), empty when absent
};

template <typename T>
const T* host_data(const Tensor& t) {
  return static_cast<const T*>(t.raw());
}

template <typename T>
Result<Weights<T>> prepare(const Config& cfg, const Tensor& W, const Tensor& R, const Tensor* B, const Tensor* P,
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

  Weights<T> p;
  p.I = I;
  p.H = H;
  p.w = host_data<T>(W);
  p.r = host_data<T>(R);
  p.w_keep = W;
  p.r_keep = R;
  p.bias.assign(static_cast<size_t>(nd * GH), T(0));
  const bool lbr = cfg.cell == Cell::kGru && cfg.linear_before_reset;
  if (lbr) p.rbh.assign(static_cast<size_t>(nd * H), T(0));
  if (B) {
    for (int d = 0; d < nd; ++d) {
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

bool is_half(DataType t) { return t == DataType::kFloat16 || t == DataType::kBFloat16; }

// A float16 / bfloat16 tensor as float32 (allocated from `alloc`).
template <typename Alloc>
Result<Tensor> half_to_f32(const Tensor& t, Alloc&& alloc) {
  BH_ASSIGN_OR_RETURN(Tensor f, alloc(t.shape()));
  const uint16_t* src = static_cast<const uint16_t*>(t.raw());
  if (!src && t.numel()) return invalid_argument("tensor is not in host memory");
  float* dst = f.data<float>();
  const bool bf = t.dtype() == DataType::kBFloat16;
  for (int64_t i = 0; i < t.numel(); ++i) dst[i] = bf ? bfloat16_to_float(src[i]) : half_to_float(src[i]);
  return f;
}

// Presents a float16/bfloat16 call to the float32 code: inputs of the half type are
// converted to float32, outputs are computed in float32 scratch and converted back by
// finish().
class HalfContext final : public KernelContext {
 public:
  HalfContext(KernelContext& base, DataType half) : base_(base), half_(half) {}

  Status init() {
    const int n = base_.num_inputs();
    conv_.resize(n);
    converted_.assign(n, false);
    for (int i = 0; i < n; ++i) {
      const Tensor* t = base_.input(i);
      if (!t || t->dtype() != half_) continue;
      auto r = half_to_f32(*t, [&](const Shape& s) { return base_.allocate_scratch(DataType::kFloat32, s); });
      if (!r.is_ok()) return r.status().with_context(base_.where() + "input " + std::to_string(i) + ": ");
      conv_[i] = Value(std::move(r).value());
      converted_[i] = true;
    }
    outs_.resize(base_.num_outputs());
    return Status::ok();
  }
  Status finish() {
    for (size_t i = 0; i < outs_.size(); ++i) {
      const Tensor& f = outs_[i];
      if (!f.defined()) continue;
      BH_ASSIGN_OR_RETURN(Tensor o, base_.allocate_output(static_cast<int>(i), half_, f.shape()));
      uint16_t* dst = static_cast<uint16_t*>(o.raw());
      const float* src = f.data<float>();
      const bool bf = half_ == DataType::kBFloat16;
      for (int64_t k = 0; k < f.numel(); ++k) dst[k] = bf ? float_to_bfloat16(src[k]) : float_to_half(src[k]);
    }
    return Status::ok();
  }

  int num_inputs() const override { return base_.num_inputs(); }
  const Value* input_value(int i) const override {
    return i >= 0 && i < static_cast<int>(converted_.size()) && converted_[i] ? &conv_[i] : base_.input_value(i);
  }
  int num_outputs() const override { return base_.num_outputs(); }
  bool output_wanted(int i) const override { return base_.output_wanted(i); }
  Result<Tensor> allocate_output(int i, DataType dtype, const Shape& shape) override {
    if (i < 0 || i >= static_cast<int>(outs_.size())) return internal_error(where() + "output index out of range");
    BH_ASSIGN_OR_RETURN(Tensor t, base_.allocate_scratch(dtype, shape));
    outs_[i] = t;
    return t;
  }
  Status set_output(int i, Value value) override { return base_.set_output(i, std::move(value)); }
  Result<Tensor> allocate_scratch(DataType dtype, const Shape& shape) override {
    return base_.allocate_scratch(dtype, shape);
  }
  int threads() const override { return base_.threads(); }
  Result<std::vector<Value>> run_subgraph(const std::string& attr, std::vector<Value> inputs) override {
    return base_.run_subgraph(attr, std::move(inputs));
  }
  const std::string& where() const override { return base_.where(); }

 private:
  KernelContext& base_;
  DataType half_;
  std::vector<Value> conv_;
  std::vector<bool> converted_;
  std::vector<Tensor> outs_;
};

class RecurrentKernel final : public Kernel {
 public:
  // `pf_dtype`: the element type the float32 weights in `pf` were converted from.
  RecurrentKernel(Config cfg, std::optional<Weights<float>> pf, std::optional<Weights<double>> pd, DataType pf_dtype)
      : cfg_(std::move(cfg)), packed_f_(std::move(pf)), packed_d_(std::move(pd)), packed_half_(pf_dtype) {}

  Status compute(KernelContext& ctx) const override {
    const Tensor* X = ctx.input(0);
    if (!X) return invalid_argument(ctx.where() + "input X is missing");
    if (packed_f_ && X->dtype() == DataType::kFloat32 && packed_half_ != DataType::kFloat32)
      return invalid_argument(ctx.where() + "X is float32 but the weights are " + dtype_name(packed_half_));
    switch (X->dtype()) {
      case DataType::kFloat32: return run<float>(ctx, packed_f_ ? &*packed_f_ : nullptr);
      case DataType::kFloat64: return run<double>(ctx, packed_d_ ? &*packed_d_ : nullptr);
      case DataType::kFloat16:
      case DataType::kBFloat16: {
        if (packed_f_ && packed_half_ != X->dtype())
          return invalid_argument(ctx.where() + "X is " + dtype_name(X->dtype()) + " but the weights are " +
                                  dtype_name(packed_half_));
        HalfContext hc(ctx, X->dtype());
        BH_RETURN_IF_ERROR(hc.init());
        BH_RETURN_IF_ERROR(run<float>(hc, packed_f_ ? &*packed_f_ : nullptr));
        return hc.finish();
      }
      default: return unsupported(ctx.where() + "unsupported element type " + dtype_name(X->dtype()));
    }
  }

 private:
  template <typename T>
  Status run(KernelContext& ctx, const Weights<T>* pre) const {
    const Cell cell = cfg_.cell;
    const bool lstm = cell == Cell::kLstm;
    const Tensor& X = *ctx.input(0);
    std::optional<Weights<T>> local;
    if (!pre) {
      const Tensor* W = ctx.input(1);
      const Tensor* R = ctx.input(2);
      if (!W || !R) return invalid_argument(ctx.where() + "inputs W and R are required");
      if (W->dtype() != X.dtype())
        return invalid_argument(ctx.where() + "X is " + dtype_name(X.dtype()) + " but W is " + dtype_name(W->dtype()));
      const Tensor* B = ctx.has_input(3) ? ctx.input(3) : nullptr;
      const Tensor* P = lstm && ctx.has_input(7) ? ctx.input(7) : nullptr;
      auto r = prepare<T>(cfg_, *W, *R, B, P, "");
      if (!r.is_ok()) return r.status().with_context(ctx.where());
      local = std::move(r).value();
      pre = &*local;
    }
    const Weights<T>& pk = *pre;
    const int G = cell_gates(cell);
    const int nd = cfg_.num_dir;
    const int64_t H = pk.H, I = pk.I, GH = G * H;
    const bool layout1 = cfg_.layout != 0;

    if (X.rank() != 3) return invalid_argument(ctx.where() + "X must have rank 3, got " + X.describe());
    if (!X.raw() && X.numel()) return invalid_argument(ctx.where() + "X is not in host memory");
    const int64_t T_len = layout1 ? X.dim(1) : X.dim(0);
    const int64_t batch = layout1 ? X.dim(0) : X.dim(1);
    if (X.dim(2) != I)
      return invalid_argument(ctx.where() + "X has input size " + std::to_string(X.dim(2)) + " but W expects " +
                              std::to_string(I));

    std::vector<int64_t> lens(static_cast<size_t>(batch), T_len);
    if (ctx.has_input(4)) {
      const Tensor* sl = ctx.input(4);
      if (!sl || (sl->dtype() != DataType::kInt32 && sl->dtype() != DataType::kInt64) || sl->rank() != 1 ||
          sl->dim(0) != batch)
        return invalid_argument(ctx.where() + "sequence_lens must be an int32 tensor of shape [" + std::to_string(batch) + "]");
      lens = read_int_tensor(*sl);
      for (int64_t l : lens)
        if (l < 0 || l > T_len)
          return invalid_argument(ctx.where() + "sequence_lens value " + std::to_string(l) + " is outside [0, " +
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
        return invalid_argument(ctx.where() + name + " must be " + dtype_name(X.dtype()) + shape_to_string(state_shape) +
                                ", got " + (s ? s->describe() : std::string("a non-tensor")));
      if (!s->raw() && s->numel()) return invalid_argument(ctx.where() + name + " is not in host memory");
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
      const T* wd = pk.w + d * GH * I;
      const T* rd = pk.r + d * GH * H;
      const T* bias = pk.bias.data() + d * GH;
      const T* rbh = pk.rbh.empty() ? nullptr : pk.rbh.data() + d * H;
      const T* peep = pk.peep.empty() ? nullptr : pk.peep.data() + d * 3 * H;
      const Activation* act = &cfg_.acts[static_cast<size_t>(d * na)];

      // Input projection for every row of X (X viewed as [rows][I], rows in X's own
      // order): xproj[row] = bias + X[row] · W^T, four rows at a time.
      const int64_t blocks = (rows + 3) / 4;
      const int64_t grain = std::max<int64_t>(1, (1 << 15) / std::max<int64_t>(1, 4 * I * GH));
      parallel_for(ctx.threads(), blocks, grain, [&](int64_t b0, int64_t b1) {
        for (int64_t blk = b0; blk < b1; ++blk) {
          const int64_t r0 = blk * 4, n = std::min<int64_t>(4, rows - r0);
          for (int64_t r = r0; r < r0 + n; ++r) std::memcpy(xproj.data() + r * GH, bias, sizeof(T) * GH);
          if (n == 4) {
            matvec4_acc(wd, GH, I, x + r0 * I, x + (r0 + 1) * I, x + (r0 + 2) * I, x + (r0 + 3) * I,
                        xproj.data() + r0 * GH, xproj.data() + (r0 + 1) * GH, xproj.data() + (r0 + 2) * GH,
                        xproj.data() + (r0 + 3) * GH);
          } else {
            for (int64_t r = r0; r < r0 + n; ++r) matvec_acc(wd, 0, GH, I, x + r * I, xproj.data() + r * GH);
          }
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
            std::memcpy(g, xproj.data() + (layout1 ? b * T_len + t : t * batch + b) * GH, sizeof(T) * GH);
            if (cell == Cell::kLstm) {
              matvec_acc(rd, 0, GH, H, h, g);
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
              matvec_acc(rd, 0, 2 * H, H, h, g);
              clip_vec(gz, 2 * H, has_clip, clip);
              activate(act[0], gz, 2 * H);  // z and r
              T* tb = tmp.data() + b * 2 * H;
              if (cfg_.linear_before_reset) {
                T* rec = tb;
                if (rbh) std::memcpy(rec, rbh, sizeof(T) * H);
                else std::fill(rec, rec + H, T(0));
                matvec_acc(rd, 2 * H, H, H, h, rec);
                for (int64_t k = 0; k < H; ++k) gh[k] += gr[k] * rec[k];
              } else {
                T* rh = tb;
                for (int64_t k = 0; k < H; ++k) rh[k] = gr[k] * h[k];
                matvec_acc(rd, 2 * H, H, H, rh, gh);
              }
              clip_vec(gh, H, has_clip, clip);
              activate(act[1], gh, H);
              for (int64_t k = 0; k < H; ++k) h[k] = (T(1) - gz[k]) * gh[k] + gz[k] * h[k];
            } else {
              matvec_acc(rd, 0, GH, H, h, g);
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
  std::optional<Weights<float>> packed_f_;
  std::optional<Weights<double>> packed_d_;
  DataType packed_half_ = DataType::kFloat32;
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
  const int64_t layout = n.attr_int("layout", 0);
  if (layout != 0 && layout != 1) return invalid_argument(where + "layout must be 0 or 1");
  cfg.layout = static_cast<int>(layout);
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
  std::optional<Weights<float>> pf;
  std::optional<Weights<double>> pd;
  DataType pf_dtype = DataType::kFloat32;
  bool all_const = info.input_is_constant(1) && info.input_is_constant(2) && (!present(3) || info.input_is_constant(3)) &&
                   (!lstm || !present(7) || info.input_is_constant(7));
  if (all_const) {
    const Tensor& W = info.constant_inputs[1];
    const Tensor& R = info.constant_inputs[2];
    const Tensor* B = present(3) ? &info.constant_inputs[3] : nullptr;
    const Tensor* P = lstm && present(7) ? &info.constant_inputs[7] : nullptr;
    if (W.dtype() == DataType::kFloat32) {
      BH_ASSIGN_OR_RETURN(pf, prepare<float>(cfg, W, R, B, P, where));
    } else if (is_half(W.dtype())) {
      // Weights converted to float32 once; the computation runs in float32.
      auto to_f32 = [&](const Tensor* t) -> Result<Tensor> {
        if (t->dtype() != W.dtype()) return invalid_argument(where + "W, R, B and P must share one element type");
        return half_to_f32(*t, [](const Shape& s) -> Result<Tensor> { return Tensor::host(DataType::kFloat32, s); });
      };
      BH_ASSIGN_OR_RETURN(Tensor Wf, to_f32(&W));
      BH_ASSIGN_OR_RETURN(Tensor Rf, to_f32(&R));
      Tensor Bf, Pf;
      if (B) { BH_ASSIGN_OR_RETURN(Bf, to_f32(B)); }
      if (P) { BH_ASSIGN_OR_RETURN(Pf, to_f32(P)); }
      BH_ASSIGN_OR_RETURN(pf, prepare<float>(cfg, Wf, Rf, B ? &Bf : nullptr, P ? &Pf : nullptr, where));
      pf_dtype = W.dtype();
    } else if (W.dtype() == DataType::kFloat64) {
      BH_ASSIGN_OR_RETURN(pd, prepare<double>(cfg, W, R, B, P, where));
    } else {
      return unsupported(where + "unsupported element type " + dtype_name(W.dtype()));
    }
  } else if (!info.input_types.empty() && info.input_types[0] != DataType::kUndefined &&
             info.input_types[0] != DataType::kFloat32 && info.input_types[0] != DataType::kFloat64 &&
             !is_half(info.input_types[0])) {
    return unsupported(where + "unsupported element type " + dtype_name(info.input_types[0]));
  }
  return std::unique_ptr<Kernel>(std::make_unique<RecurrentKernel>(std::move(cfg), std::move(pf), std::move(pd), pf_dtype));
}

}  // namespace

void register_recurrent_kernels(KernelTable& t) {
  t.add("RNN", 1, [](const KernelInfo& info) { return make_recurrent(Cell::kRnn, info); });
  t.add("GRU", 1, [](const KernelInfo& info) { return make_recurrent(Cell::kGru, info); });
  t.add("LSTM", 1, [](const KernelInfo& info) { return make_recurrent(Cell::kLstm, info); });
}

}  // namespace bulkhead::cpu
