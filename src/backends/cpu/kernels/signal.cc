// Signal processing on FFTW (Debian's libfftw3): DFT (forward and inverse, real or complex
// input, one-sided output and its inverse, any axis, zero-padded or truncated to
// dft_length) and STFT. Computed in double.
//
// FFTW's planner is not thread-safe, its execution on new arrays is: plans are made (with
// FFTW_ESTIMATE, microseconds) under one process-wide lock, per call, and freed under it;
// each thread transforms its own lines in its own buffers.
#include <fftw3.h>

#include <algorithm>
#include <cmath>
#include <complex>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "backends/cpu/cpu_kernels.h"
#include "backends/cpu/cpu_util.h"
#include "backends/cpu/kernels/cast.h"

namespace bulkhead::cpu {
namespace {

std::mutex& planner_mutex() {
  static std::mutex m;
  return m;
}

// An FFTW plan, made and destroyed under the planner lock.
class Plan {
 public:
  // kind: 0 complex forward, 1 complex backward, 2 complex-to-real backward (n real outputs
  // from n / 2 + 1 complex inputs).
  Plan(int kind, int n) {
    std::lock_guard<std::mutex> lock(planner_mutex());
    fftw_complex* a = fftw_alloc_complex(static_cast<size_t>(n) + 1);
    fftw_complex* b = fftw_alloc_complex(static_cast<size_t>(n) + 1);
    if (kind == 2) plan_ = fftw_plan_dft_c2r_1d(n, a, reinterpret_cast<double*>(b), FFTW_ESTIMATE);
    else plan_ = fftw_plan_dft_1d(n, a, b, kind == 0 ? FFTW_FORWARD : FFTW_BACKWARD, FFTW_ESTIMATE);
    fftw_free(a);
    fftw_free(b);
  }
  ~Plan() {
    std::lock_guard<std::mutex> lock(planner_mutex());
    if (plan_) fftw_destroy_plan(plan_);
  }
  Plan(const Plan&) = delete;
  Plan& operator=(const Plan&) = delete;
  bool ok() const { return plan_ != nullptr; }
  void complex(fftw_complex* in, fftw_complex* out) const { fftw_execute_dft(plan_, in, out); }
  void c2r(fftw_complex* in, double* out) const { fftw_execute_dft_c2r(plan_, in, out); }

 private:
  fftw_plan plan_ = nullptr;
};

// Per-thread FFTW-aligned buffers.
struct Buffers {
  explicit Buffers(size_t n) : in(fftw_alloc_complex(n + 1)), out(fftw_alloc_complex(n + 1)) {}
  ~Buffers() {
    fftw_free(in);
    fftw_free(out);
  }
  Buffers(const Buffers&) = delete;
  Buffers& operator=(const Buffers&) = delete;
  fftw_complex *in, *out;
};

Result<const Tensor*> float_input(KernelContext& ctx, int i, const char* what) {
  BH_ASSIGN_OR_RETURN(const Tensor* t, required_input(ctx, i, what));
  if (!dtype_is_float(t->dtype())) return invalid_argument(ctx.where() + what + " must be floating-point, got " + t->describe());
  return t;
}

Result<int64_t> optional_int(KernelContext& ctx, int i, const char* what, int64_t def) {
  const Tensor* t = ctx.input(i);
  if (!t) return def;
  if ((t->dtype() != DataType::kInt64 && t->dtype() != DataType::kInt32) || t->numel() != 1)
    return invalid_argument(ctx.where() + what + " must be one int32 or int64 value, got " + t->describe());
  return read_int_tensor(*t)[0];
}

Tensor as_double(const Tensor& t, const std::string& where, Status* st) {
  if (t.dtype() == DataType::kFloat64) return t;
  Tensor d = Tensor::host(DataType::kFloat64, t.shape());
  *st = ew::convert_into(t, d, 1, where);
  return d;
}

constexpr int64_t kMaxLength = int64_t{1} << 30;

// DFT. Opset 17 takes the axis as an attribute, opset 20 as input 2 (default -2).
Status dft_compute(KernelContext& ctx, bool inverse, bool onesided, int64_t axis_attr, bool axis_input) {
  BH_ASSIGN_OR_RETURN(const Tensor* xp, float_input(ctx, 0, "input"));
  const Tensor& x = *xp;
  const int r = x.rank();
  if (r < 2 || (x.dim(-1) != 1 && x.dim(-1) != 2))
    return invalid_argument(ctx.where() + "input must be [..., signal, 1] (real) or [..., signal, 2] (complex), got " + x.describe());
  int64_t axis = axis_attr;
  if (axis_input) {
    BH_ASSIGN_OR_RETURN(axis, optional_int(ctx, 2, "axis", -2));
  }
  // The axis counts the signal dimensions, not the last (real/imaginary) one.
  if (axis < -r || axis > r - 2 || axis == -1)
    return invalid_argument(ctx.where() + "axis " + std::to_string(axis) + " is out of range for " + x.describe());
  if (axis < 0) axis += r;
  const int64_t L = x.dim(static_cast<int>(axis));
  const bool complex_in = x.dim(-1) == 2;
  if (inverse && onesided && !complex_in)
    return invalid_argument(ctx.where() + "an inverse one-sided DFT takes a complex (one-sided) spectrum, got " + x.describe());
  const int64_t def_len = inverse && onesided ? 2 * (L - 1) : L;
  BH_ASSIGN_OR_RETURN(int64_t n, optional_int(ctx, 1, "dft_length", def_len));
  if (n < 1 || n > kMaxLength) return invalid_argument(ctx.where() + "dft_length must be between 1 and 2^30, got " + std::to_string(n));
  int64_t outer = 1, inner = 1;
  for (int i = 0; i < axis; ++i) outer *= x.dim(i);
  for (int i = static_cast<int>(axis) + 1; i < r - 1; ++i) inner *= x.dim(i);
  const bool c2r = inverse && onesided;
  const int64_t out_len = c2r ? n : onesided ? n / 2 + 1 : n;
  Shape ys = x.shape();
  ys[axis] = out_len;
  ys.back() = c2r ? 1 : 2;
  BH_ASSIGN_OR_RETURN(Tensor y, ctx.allocate_output(0, x.dtype(), ys));
  if (y.numel() == 0) return Status::ok();
  Status st;
  Tensor xd = as_double(x, ctx.where(), &st);
  BH_RETURN_IF_ERROR(st);
  Tensor yd = x.dtype() == DataType::kFloat64 ? y : Tensor::host(DataType::kFloat64, ys);
  const double* xv = xd.data<double>();
  double* yv = yd.data<double>();
  const int64_t c = x.dim(-1);
  Plan plan(c2r ? 2 : inverse ? 1 : 0, static_cast<int>(n));
  if (!plan.ok()) return internal_error(ctx.where() + "FFTW could not plan a transform of length " + std::to_string(n));
  // c2r reads n / 2 + 1 bins of the input; the others n values.
  const int64_t take = std::min(L, c2r ? n / 2 + 1 : n);
  const double scale = inverse ? 1.0 / static_cast<double>(n) : 1.0;
  parallel_for(ctx.threads(), outer * inner, 1, [&](int64_t b, int64_t e) {
    Buffers buf(static_cast<size_t>(n));
    for (int64_t line = b; line < e; ++line) {
      const int64_t o = line / inner, i = line % inner;
      const int64_t in_len = c2r ? n / 2 + 1 : n;
      std::memset(buf.in, 0, sizeof(fftw_complex) * static_cast<size_t>(in_len));
      for (int64_t k = 0; k < take; ++k) {
        const double* p = xv + ((o * L + k) * inner + i) * c;
        buf.in[k][0] = p[0];
        buf.in[k][1] = complex_in ? p[1] : 0.0;
      }
      if (c2r) {
        double* real = reinterpret_cast<double*>(buf.out);
        plan.c2r(buf.in, real);
        for (int64_t k = 0; k < n; ++k) yv[(o * out_len + k) * inner + i] = real[k] * scale;
      } else {
        plan.complex(buf.in, buf.out);
        for (int64_t k = 0; k < out_len; ++k) {
          double* q = yv + ((o * out_len + k) * inner + i) * 2;
          q[0] = buf.out[k][0] * scale;
          q[1] = buf.out[k][1] * scale;
        }
      }
    }
  });
  if (x.dtype() != DataType::kFloat64) return ew::convert_into(yd, y, ctx.threads(), ctx.where());
  return Status::ok();
}

// STFT (opset 17): signal [batch, length, 1 or 2], frame_step, optional window
// [frame_length], optional frame_length -> [batch, frames, bins, 2] with frames =
// 1 + (length - frame_length) / frame_step and bins = frame_length / 2 + 1 when one-sided.
Status stft_compute(KernelContext& ctx, bool onesided) {
  BH_ASSIGN_OR_RETURN(const Tensor* sp, float_input(ctx, 0, "signal"));
  const Tensor& s = *sp;
  if (s.rank() != 3 || (s.dim(2) != 1 && s.dim(2) != 2))
    return invalid_argument(ctx.where() + "signal must be [batch, length, 1 or 2], got " + s.describe());
  const bool complex_in = s.dim(2) == 2;
  if (onesided && complex_in) return invalid_argument(ctx.where() + "a one-sided STFT takes a real signal, got " + s.describe());
  BH_ASSIGN_OR_RETURN(int64_t step, optional_int(ctx, 1, "frame_step", -1));
  if (step < 1) return invalid_argument(ctx.where() + "frame_step must be a positive integer");
  const Tensor* w = ctx.input(2);
  if (w && (w->rank() != 1 || !dtype_is_float(w->dtype())))
    return invalid_argument(ctx.where() + "window must be a 1-D floating-point tensor, got " + w->describe());
  BH_ASSIGN_OR_RETURN(int64_t flen, optional_int(ctx, 3, "frame_length", w ? w->dim(0) : -1));
  if (flen < 1 || flen > kMaxLength) return invalid_argument(ctx.where() + "needs a frame_length or a window");
  if (w && w->dim(0) != flen)
    return invalid_argument(ctx.where() + "window has " + std::to_string(w->dim(0)) + " values for frame_length " + std::to_string(flen));
  const int64_t B = s.dim(0), len = s.dim(1);
  if (flen > len)
    return invalid_argument(ctx.where() + "frame_length " + std::to_string(flen) + " is longer than the signal (" + std::to_string(len) + ")");
  const int64_t frames = 1 + (len - flen) / step, bins = onesided ? flen / 2 + 1 : flen;
  BH_ASSIGN_OR_RETURN(Tensor y, ctx.allocate_output(0, s.dtype(), {B, frames, bins, 2}));
  Status st;
  Tensor sd = as_double(s, ctx.where(), &st);
  BH_RETURN_IF_ERROR(st);
  std::vector<double> win(static_cast<size_t>(flen), 1.0);
  if (w) {
    Tensor wd = as_double(*w, ctx.where(), &st);
    BH_RETURN_IF_ERROR(st);
    std::copy(wd.data<double>(), wd.data<double>() + flen, win.begin());
  }
  Tensor yd = s.dtype() == DataType::kFloat64 ? y : Tensor::host(DataType::kFloat64, y.shape());
  const double* sv = sd.data<double>();
  double* yv = yd.data<double>();
  const int64_t c = s.dim(2);
  Plan plan(0, static_cast<int>(flen));
  if (!plan.ok()) return internal_error(ctx.where() + "FFTW could not plan a transform of length " + std::to_string(flen));
  parallel_for(ctx.threads(), B * frames, 1, [&](int64_t b0, int64_t e0) {
    Buffers buf(static_cast<size_t>(flen));
    for (int64_t bf = b0; bf < e0; ++bf) {
      const int64_t b = bf / frames, f = bf % frames;
      for (int64_t k = 0; k < flen; ++k) {
        const double* p = sv + (b * len + f * step + k) * c;
        buf.in[k][0] = p[0] * win[k];
        buf.in[k][1] = complex_in ? p[1] * win[k] : 0.0;
      }
      plan.complex(buf.in, buf.out);
      for (int64_t k = 0; k < bins; ++k) {
        double* q = yv + (bf * bins + k) * 2;
        q[0] = buf.out[k][0];
        q[1] = buf.out[k][1];
      }
    }
  });
  if (s.dtype() != DataType::kFloat64) return ew::convert_into(yd, y, ctx.threads(), ctx.where());
  return Status::ok();
}

}  // namespace

void register_signal_kernels(KernelTable& t) {
  for (int since : {17, 20}) {
    t.add("DFT", since, [since](const KernelInfo& info) -> Result<std::unique_ptr<Kernel>> {
      const int64_t inv = info.node.attr_int("inverse", 0), one = info.node.attr_int("onesided", 0);
      if ((inv != 0 && inv != 1) || (one != 0 && one != 1))
        return invalid_argument(info.where() + "inverse and onesided must be 0 or 1");
      const int64_t axis = info.node.attr_int("axis", 1);
      const bool axis_input = since >= 20;
      return make_kernel([=](KernelContext& ctx) { return dft_compute(ctx, inv != 0, one != 0, axis, axis_input); });
    });
  }
  t.add("STFT", 17, [](const KernelInfo& info) -> Result<std::unique_ptr<Kernel>> {
    const int64_t one = info.node.attr_int("onesided", 1);
    if (one != 0 && one != 1) return invalid_argument(info.where() + "onesided must be 0 or 1");
    return make_kernel([one](KernelContext& ctx) { return stft_compute(ctx, one != 0); });
  });
}

}  // namespace bulkhead::cpu
