// QLinearEltwise (domain "bulkhead", exec/qdq_eltwise.h): the element-wise float ops of a
// QDQ model between per-tensor DequantizeLinear inputs and a QuantizeLinear, in one pass.
// Values go a block at a time through float registers in cache: each input dequantised
// into its register, each op a loop over the block, the result quantised. Every formula is
// the one its own kernel uses (DequantizeLinear, Add, ..., QuantizeLinear), in the same
// float32 order, so the output is the unfused graph's bit for bit. A program of one input
// runs that way once, at creation, on all 256 bytes of each type, and then as a table.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>

#include "backends/cpu/cpu_kernels.h"
#include "backends/cpu/cpu_util.h"
#include "backends/cpu/kernels/activation_rows.h"
#include "backends/cpu/kernels/quant_util.h"
#include "backend/qlinear_eltwise.h"

namespace bulkhead::cpu {
namespace {

using Op = QLinearEltwiseOp;
constexpr int64_t kBlock = 1024;

struct Program {
  std::vector<float> scales, consts;
  std::vector<int32_t> zeros;
  std::vector<int> input_regs;
  std::vector<std::array<int64_t, 4>> code;
  float ys = 1;
  int32_t zy = 0;
  DataType yt = DataType::kUInt8;
  int result = 0, registers = 0;
  // The program is a residual connection: Add of the two inputs, then Relu or not
  // (ResNet's 16 per model); run by one loop per element when nothing broadcasts.
  enum class Residual { kNo, kAdd, kAddRelu } residual = Residual::kNo;
};

// A + B [-> Relu] -> Y in one pass: the program's own operations on each element, in its
// float32 order (this file is built with -ffp-contract=off, so no multiply and add become
// one fused operation), without going through the registers a block at a time. Where the
// scales bound |A + B| / y_scale below 2^29 (residual_fits), no value can be NaN, infinite
// or beyond the range quantize_one checks for, and the rounded quotient's integer is read
// from the bits of r + 1.5 * 2^23 (the same round half to even as quantize_one's add and
// subtract). On AVX-512 the same loop is compiled a second time for 512-bit vectors.
struct ResidualArgs {
  float sa, sb, sy, inv, rlo, rhi;
  int32_t za, zb, zy;
};

bool residual_fits(const Program& p) {
  const double bound = 255.0 * (std::fabs(double{p.scales[0]}) + std::fabs(double{p.scales[1]}));
  return std::isfinite(p.scales[0]) && std::isfinite(p.scales[1]) && quotient_by_reciprocal(p.ys) &&
         bound / std::fabs(double{p.ys}) < 0x1p29 && bound < 1e30;
}

template <typename TA, typename TB, typename TY, bool kRelu>
__attribute__((always_inline)) inline void residual_body(const TA* __restrict a, const TB* __restrict b, TY* __restrict y,
                                                        int64_t n, const ResidualArgs& r) {
  const float sa = r.sa, sb = r.sb, sy = r.sy, inv = r.inv, lo = r.rlo, hi = r.rhi, magic = 12582912.0f;
  const int32_t za = r.za, zb = r.zb, zy = r.zy - 0x4B400000;  // 0x4B400000: the bits of 1.5 * 2^23
  for (int64_t i = 0; i < n; ++i) {
    const float fa = static_cast<float>(int32_t{a[i]} - za) * sa;
    const float fb = static_cast<float>(int32_t{b[i]} - zb) * sb;
    float v = fa + fb;
    if constexpr (kRelu) v = v < 0.f ? 0.f : v;
    const float q = v * inv;
    float c = __builtin_fmaf(__builtin_fmaf(-q, sy, v), inv, q);
    c = c < lo ? lo : c;
    c = c > hi ? hi : c;
    const float t = c + magic;
    int32_t bits;
    std::memcpy(&bits, &t, sizeof bits);
    y[i] = static_cast<TY>(bits + zy);
  }
}

template <typename TA, typename TB, typename TY, bool kRelu>
__attribute__((noinline)) void residual_rows(const TA* a, const TB* b, TY* y, int64_t n, const ResidualArgs& r) {
  residual_body<TA, TB, TY, kRelu>(a, b, y, n, r);
}

// 512-bit vectors: GCC's target option for it; Clang has none there, and its own
// min_vector_width attribute instead.
#if defined(__clang__)
#define BH_AVX512_LOOP __attribute__((noinline, target("arch=x86-64-v4"), min_vector_width(512)))
#else
#define BH_AVX512_LOOP __attribute__((noinline, target("arch=x86-64-v4,prefer-vector-width=512")))
#endif

template <typename TA, typename TB, typename TY, bool kRelu>
BH_AVX512_LOOP void residual_rows_512(const TA* a, const TB* b, TY* y, int64_t n, const ResidualArgs& r) {
  residual_body<TA, TB, TY, kRelu>(a, b, y, n, r);
}

// BULKHEAD_CPU_AVX512=0 keeps the AVX2 copy where AVX-512 exists (to test and compare it).
bool have_avx512() {
  static const bool yes = [] {
    const char* e = std::getenv("BULKHEAD_CPU_AVX512");
    if (e && std::string(e) == "0") return false;
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
  }();
  return yes;
}

template <typename TA, typename TB, typename TY>
void residual_dispatch(bool relu, const void* a, const void* b, void* y, int64_t n, const ResidualArgs& r) {
  auto* pa = static_cast<const TA*>(a);
  auto* pb = static_cast<const TB*>(b);
  auto* py = static_cast<TY*>(y);
  if (have_avx512()) {
    if (relu) residual_rows_512<TA, TB, TY, true>(pa, pb, py, n, r);
    else residual_rows_512<TA, TB, TY, false>(pa, pb, py, n, r);
  } else {
    if (relu) residual_rows<TA, TB, TY, true>(pa, pb, py, n, r);
    else residual_rows<TA, TB, TY, false>(pa, pb, py, n, r);
  }
}

template <typename TA, typename TB>
void residual_dispatch_y(bool relu, bool y_u8, const void* a, const void* b, void* y, int64_t n, const ResidualArgs& r) {
  if (y_u8) residual_dispatch<TA, TB, uint8_t>(relu, a, b, y, n, r);
  else residual_dispatch<TA, TB, int8_t>(relu, a, b, y, n, r);
}

// The ops, each over one block, in loops GCC vectorises (operands as arrays or constants,
// never a per-element choice between them).
template <typename F>
__attribute__((always_inline)) inline void binary_loops(F f, float* __restrict d, const float* a, float ca, const float* b,
                                                        float cb, int64_t n) {
  if (a && b) {
    for (int64_t i = 0; i < n; ++i) d[i] = f(a[i], b[i]);
  } else if (a) {
    for (int64_t i = 0; i < n; ++i) d[i] = f(a[i], cb);
  } else {
    for (int64_t i = 0; i < n; ++i) d[i] = f(ca, b[i]);
  }
}

__attribute__((noinline)) void binary(Op op, float* __restrict d, const float* a, float ca, const float* b, float cb,
                                      int64_t n) {
  switch (op) {
    case Op::kAdd: binary_loops([](float x, float y) { return x + y; }, d, a, ca, b, cb, n); break;
    case Op::kSub: binary_loops([](float x, float y) { return x - y; }, d, a, ca, b, cb, n); break;
    case Op::kMul: binary_loops([](float x, float y) { return x * y; }, d, a, ca, b, cb, n); break;
    case Op::kDiv: binary_loops([](float x, float y) { return x / y; }, d, a, ca, b, cb, n); break;
    case Op::kMax: binary_loops([](float x, float y) { return (x != x) ? x : (x >= y ? x : y); }, d, a, ca, b, cb, n); break;
    case Op::kMin: binary_loops([](float x, float y) { return (x != x) ? x : (x <= y ? x : y); }, d, a, ca, b, cb, n); break;
    default: break;
  }
}

// y[i] = table[x[i]] for i < n, eight bytes at a time through 64-bit words: scalar
// lookups. The plain loop was vectorised with gathers, which ran it ~5x slower on an AVX2
// EPYC. (An optimize("no-tree-vectorize") attribute here instead changed the results of
// this file's residual loop, which must stay bit for bit: GCC's per-function options are
// not to be mixed with the file's -ffp-contract=off.)
__attribute__((noinline)) void lookup_bytes(const uint8_t* __restrict table, const uint8_t* __restrict x,
                                            uint8_t* __restrict y, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t in, out = 0;
    std::memcpy(&in, x + i, 8);
    for (int k = 0; k < 8; ++k) out |= uint64_t{table[(in >> (8 * k)) & 0xff]} << (8 * k);
    std::memcpy(y + i, &out, 8);
  }
  for (; i < n; ++i) y[i] = table[x[i]];
}

__attribute__((noinline)) void unary(Op op, float* __restrict d, const float* __restrict a, float c0, float c1, int64_t n) {
  switch (op) {
    case Op::kRelu:
      for (int64_t i = 0; i < n; ++i) d[i] = a[i] < 0.f ? 0.f : a[i];
      break;
    case Op::kClip:
      for (int64_t i = 0; i < n; ++i) {
        const float v = a[i] < c0 ? c0 : a[i];
        d[i] = v > c1 ? c1 : v;
      }
      break;
    case Op::kHardSwish:
      for (int64_t i = 0; i < n; ++i) {
        const float x = a[i];
        d[i] = x * std::max(0.f, std::min(1.f, x * static_cast<float>(1.0 / 6.0) + 0.5f));
      }
      break;
    case Op::kHardSigmoid:
      for (int64_t i = 0; i < n; ++i) d[i] = std::max(0.f, std::min(1.f, c0 * a[i] + c1));
      break;
    case Op::kSigmoid: sigmoid_rows_f32(a, d, n); break;
    case Op::kTanh: tanh_rows_f32(a, d, n); break;
    case Op::kLeakyRelu:
      for (int64_t i = 0; i < n; ++i) d[i] = a[i] < 0.f ? c0 * a[i] : a[i];
      break;
    default: break;
  }
}

class QLinearEltwiseKernel final : public Kernel {
 public:
  explicit QLinearEltwiseKernel(Program p) : p_(std::move(p)) {}

  Status compute(KernelContext& ctx) const override {
    const std::string& where = ctx.where();
    const size_t k = p_.scales.size();
    std::vector<const Tensor*> in(k);
    Shape out;
    for (size_t i = 0; i < k; ++i) {
      in[i] = ctx.input(static_cast<int>(i));
      if (!in[i] || (in[i]->dtype() != DataType::kUInt8 && in[i]->dtype() != DataType::kInt8))
        return invalid_argument(where + "input " + std::to_string(i) + " must be a uint8 or int8 tensor");
      BH_ASSIGN_OR_RETURN(out, i == 0 ? Result<Shape>(in[0]->shape()) : broadcast_shapes(out, in[i]->shape(), where));
    }
    BH_ASSIGN_OR_RETURN(Tensor y, ctx.allocate_output(0, p_.yt, out));
    const int64_t n = y.numel();
    if (n == 0) return Status::ok();
    // Inputs of the output's shape are read in place; broadcast ones through strides.
    std::vector<std::vector<int64_t>> strides(k);
    std::vector<int64_t> inner_of(k, 0);  // > 0: the input is its last `inner` elements, repeated
    // > 0: element j of the output reads element j / run_of of the input (an input that
    // matches the output on its leading dimensions and is 1 on the rest: a per-channel
    // vector [N, C, 1, 1] against NCHW), which stays the same for runs of run_of.
    std::vector<int64_t> run_of(k, 0);
    bool all_same = true;
    for (size_t i = 0; i < k; ++i)
      if (in[i]->shape() != out) {
        all_same = false;
        strides[i] = broadcast_strides(in[i]->shape(), out);
        // Leading strides 0, then the input's own row-major strides.
        int d = static_cast<int>(out.size()) - 1;
        int64_t inner = 1;
        while (d >= 0 && strides[i][d] == inner) inner *= out[d], --d;
        bool leading_zero = true;
        for (int e = d; e >= 0; --e) leading_zero = leading_zero && strides[i][e] == 0;
        if (leading_zero && inner == in[i]->numel()) inner_of[i] = inner;
        // Trailing broadcast dimensions after leading ones the input has in full.
        const Shape& is = in[i]->shape();
        const int pad = static_cast<int>(out.size()) - static_cast<int>(is.size());
        int e = static_cast<int>(out.size()) - 1;
        int64_t run = 1;
        while (e >= 0 && (e < pad || is[e - pad] == 1)) run *= out[e], --e;
        bool full = true;
        for (int f = 0; f <= e; ++f) full = full && f >= pad && is[f - pad] == out[f];
        if (!inner_of[i] && full && run > 1) run_of[i] = run;
      }
    const float flo = p_.yt == DataType::kUInt8 ? 0.f : -128.f, fhi = p_.yt == DataType::kUInt8 ? 255.f : 127.f;
    const float zy = static_cast<float>(p_.zy), rlo = flo - zy, rhi = fhi - zy;
    if (tables_) {
      // One input (so no broadcast): a table lookup per element.
      const uint8_t* table = table_[in[0]->dtype() == DataType::kUInt8 ? 0 : 1].data();
      const uint8_t* xp = static_cast<const uint8_t*>(in[0]->raw());
      uint8_t* yp = static_cast<uint8_t*>(y.raw());
      parallel_for(ctx.threads(), n, 1 << 16, [&](int64_t b, int64_t e) { lookup_bytes(table, xp + b, yp + b, e - b); });
      return Status::ok();
    }
    if (all_same && p_.residual != Program::Residual::kNo && residual_fits(p_)) {
      const bool relu = p_.residual == Program::Residual::kAddRelu, yu8 = p_.yt == DataType::kUInt8;
      const ResidualArgs ra{p_.scales[0], p_.scales[1], p_.ys, 1.0f / p_.ys, rlo, rhi, p_.zeros[0], p_.zeros[1], p_.zy};
      const bool a8 = in[0]->dtype() == DataType::kUInt8, b8 = in[1]->dtype() == DataType::kUInt8;
      const uint8_t* xa = static_cast<const uint8_t*>(in[0]->raw());
      const uint8_t* xb = static_cast<const uint8_t*>(in[1]->raw());
      uint8_t* yp = static_cast<uint8_t*>(y.raw());
      parallel_for(ctx.threads(), n, 1 << 14, [&](int64_t b, int64_t e) {
        if (a8 && b8) residual_dispatch_y<uint8_t, uint8_t>(relu, yu8, xa + b, xb + b, yp + b, e - b, ra);
        else if (a8) residual_dispatch_y<uint8_t, int8_t>(relu, yu8, xa + b, xb + b, yp + b, e - b, ra);
        else if (b8) residual_dispatch_y<int8_t, uint8_t>(relu, yu8, xa + b, xb + b, yp + b, e - b, ra);
        else residual_dispatch_y<int8_t, int8_t>(relu, yu8, xa + b, xb + b, yp + b, e - b, ra);
      });
      return Status::ok();
    }
    const int rank = static_cast<int>(out.size());
    parallel_for(ctx.threads(), n, 1 << 13, [&](int64_t b, int64_t e) {
      std::vector<float> regs(static_cast<size_t>(p_.registers) * kBlock);
      std::vector<uint8_t> gathered(all_same ? 0 : kBlock);
      for (int64_t i0 = b; i0 < e; i0 += kBlock) {
        const int64_t len = std::min(kBlock, e - i0);
        for (size_t i = 0; i < k; ++i) {
          const uint8_t* src = static_cast<const uint8_t*>(in[i]->raw());
          if (strides[i].empty()) {
            src += i0;
          } else {
            // The element of input i under each output index of the block: an input that
            // repeats along leading dimensions only (a per-channel vector channels-last, a
            // bias row) is read in runs; any other broadcast walks the indices.
            const int64_t inner = inner_of[i];
            if (const int64_t run = run_of[i]; run > 0) {
              for (int64_t j = 0; j < len;) {
                const int64_t at = i0 + j, n = std::min(len - j, run - at % run);
                std::memset(gathered.data() + j, src[at / run], static_cast<size_t>(n));
                j += n;
              }
            } else if (inner > 0) {
              for (int64_t j = 0; j < len;) {
                const int64_t at = (i0 + j) % inner, run = std::min(len - j, inner - at);
                std::memcpy(gathered.data() + j, src + at, static_cast<size_t>(run));
                j += run;
              }
            } else {
              std::vector<int64_t> idx(rank);
              int64_t rem = i0, off = 0;
              for (int d = rank - 1; d >= 0; --d) idx[d] = rem % out[d], rem /= out[d];
              for (int d = 0; d < rank; ++d) off += idx[d] * strides[i][d];
              for (int64_t j = 0; j < len; ++j) {
                gathered[j] = src[off];
                for (int d = rank - 1; d >= 0; --d) {
                  off += strides[i][d];
                  if (++idx[d] < out[d]) break;
                  off -= strides[i][d] * out[d];
                  idx[d] = 0;
                }
              }
            }
            src = gathered.data();
          }
          dequantize_input(i, in[i]->dtype(), src, len, regs.data());
        }
        finish_block(len, regs.data(), static_cast<uint8_t*>(y.raw()) + i0);
      }
    });
    return Status::ok();
  }

 private:
  // Input i's `len` values at `src` (uint8 or int8) into its register.
  void dequantize_input(size_t i, DataType t, const uint8_t* src, int64_t len, float* regs) const {
    float* r = regs + p_.input_regs[i] * kBlock;
    if (t == DataType::kUInt8) dequantize_rows(src, r, len, p_.zeros[i], p_.scales[i]);
    else dequantize_rows(reinterpret_cast<const int8_t*>(src), r, len, p_.zeros[i], p_.scales[i]);
  }

  // The program's ops over one block of `len` values whose inputs are in their registers,
  // the result quantised into `out`.
  void finish_block(int64_t len, float* regs, uint8_t* out) const {
    for (const auto& c : p_.code) {
      const Op op = static_cast<Op>(c[0]);
      float* d = regs + c[1] * kBlock;
      auto reg = [&](int64_t x) -> const float* { return x >= 0 ? regs + x * kBlock : nullptr; };
      auto cst = [&](int64_t x) { return x < 0 ? p_.consts[-x - 1] : 0.f; };
      if (op == Op::kRelu || op == Op::kHardSwish || op == Op::kSigmoid || op == Op::kTanh)
        unary(op, d, reg(c[2]), 0.f, 0.f, len);
      else if (op == Op::kLeakyRelu) unary(op, d, reg(c[2]), cst(c[3]), 0.f, len);
      else if (op == Op::kClip || op == Op::kHardSigmoid) unary(op, d, reg(c[2]), cst(c[3]), p_.consts[-c[3]], len);
      else binary(op, d, reg(c[2]), cst(c[2]), reg(c[3]), cst(c[3]), len);
    }
    const float flo = p_.yt == DataType::kUInt8 ? 0.f : -128.f, fhi = p_.yt == DataType::kUInt8 ? 255.f : 127.f;
    const float zy = static_cast<float>(p_.zy), rlo = flo - zy, rhi = fhi - zy;
    const float* res = regs + p_.result * kBlock;
    if (p_.yt == DataType::kUInt8) quantize_rows(res, out, len, p_.ys, zy, rlo, rhi);
    else quantize_rows(res, reinterpret_cast<int8_t*>(out), len, p_.ys, zy, rlo, rhi);
  }

 public:
  // A program of one input is a function of one byte: its 256 results, for a uint8 input
  // (table_[0]) and an int8 one (table_[1]), made by running it on every byte once. A run
  // then looks each element up: the same bytes as running the program on it.
  void make_tables() {
    if (p_.scales.size() != 1) return;
    std::vector<float> regs(static_cast<size_t>(std::max(p_.registers, 1)) * kBlock);
    uint8_t bytes[256];
    for (int b = 0; b < 256; ++b) bytes[b] = static_cast<uint8_t>(b);
    for (int t = 0; t < 2; ++t) {
      dequantize_input(0, t == 0 ? DataType::kUInt8 : DataType::kInt8, bytes, 256, regs.data());
      finish_block(256, regs.data(), table_[t].data());
    }
    tables_ = true;
  }

 private:
  Program p_;
  bool tables_ = false;
  std::array<std::array<uint8_t, 256>, 2> table_{};
};

Result<std::unique_ptr<Kernel>> make_qlinear_eltwise(const KernelInfo& info) {
  const ir::Node& n = info.node;
  const std::string where = info.where();
  Program p;
  p.scales = n.attr_floats("_x_scales");
  for (int64_t z : n.attr_ints("_x_zero_points")) p.zeros.push_back(static_cast<int32_t>(z));
  for (int64_t r : n.attr_ints("_x_registers")) p.input_regs.push_back(static_cast<int>(r));
  p.consts = n.attr_floats("_consts");
  const std::vector<int64_t> code = n.attr_ints("_code");
  p.ys = n.attr_float("_y_scale", 1.f);
  p.zy = static_cast<int32_t>(n.attr_int("_y_zero_point", 0));
  p.yt = static_cast<DataType>(n.attr_int("_y_type", static_cast<int64_t>(DataType::kUInt8)));
  p.result = static_cast<int>(n.attr_int("_result", -1));
  const size_t k = p.scales.size();
  if (k == 0 || k > static_cast<size_t>(kQLinearEltwiseMaxInputs) || p.zeros.size() != k || p.input_regs.size() != k ||
      n.inputs.size() != k)
    return invalid_argument(where + "inconsistent inputs (scales, zero points, registers)");
  if (p.yt != DataType::kUInt8 && p.yt != DataType::kInt8) return invalid_argument(where + "_y_type must be uint8 or int8");
  if (code.size() % 4) return invalid_argument(where + "_code must hold quadruples");
  // Every register read is written before (inputs first), every constant exists.
  std::vector<bool> set(kQLinearEltwiseMaxRegisters, false);
  for (int r : p.input_regs) {
    if (r < 0 || r >= kQLinearEltwiseMaxRegisters) return invalid_argument(where + "register out of range");
    set[r] = true;
  }
  auto ok_operand = [&](int64_t x, bool two_consts) {
    if (x >= 0) return x < kQLinearEltwiseMaxRegisters && set[x];
    const int64_t c = -x - 1;
    return c + (two_consts ? 1 : 0) < static_cast<int64_t>(p.consts.size());
  };
  int top = 0;
  for (const int r : p.input_regs) top = std::max(top, r + 1);
  for (size_t i = 0; i < code.size(); i += 4) {
    const Op op = static_cast<Op>(code[i]);
    const int64_t d = code[i + 1], a = code[i + 2], b = code[i + 3];
    bool ok = d >= 0 && d < kQLinearEltwiseMaxRegisters;
    switch (op) {
      case Op::kAdd: case Op::kSub: case Op::kMul: case Op::kDiv: case Op::kMax: case Op::kMin:
        ok = ok && ok_operand(a, false) && ok_operand(b, false);
        break;
      case Op::kRelu: case Op::kHardSwish: case Op::kSigmoid: case Op::kTanh:
        ok = ok && a >= 0 && ok_operand(a, false);
        break;
      case Op::kLeakyRelu:
        ok = ok && a >= 0 && ok_operand(a, false) && b < 0 && ok_operand(b, false);
        break;
      case Op::kClip: case Op::kHardSigmoid:
        ok = ok && a >= 0 && ok_operand(a, false) && b < 0 && ok_operand(b, true);
        break;
      default: ok = false;
    }
    if (!ok) return invalid_argument(where + "malformed instruction " + std::to_string(i / 4) + " in _code");
    set[d] = true;
    top = std::max<int>(top, static_cast<int>(d) + 1);
    p.code.push_back({code[i], d, a, b});
  }
  if (p.result < 0 || p.result >= kQLinearEltwiseMaxRegisters || !set[p.result])
    return invalid_argument(where + "_result names no register that is written");
  p.registers = top;
  // add(input 0, input 1) [then relu of it], the last result the output.
  const auto& c = p.code;
  const bool add01 = k == 2 && !c.empty() && c[0][0] == static_cast<int64_t>(Op::kAdd) &&
                     ((c[0][2] == p.input_regs[0] && c[0][3] == p.input_regs[1]) ||
                      (c[0][2] == p.input_regs[1] && c[0][3] == p.input_regs[0]));
  if (add01 && c.size() == 1 && p.result == c[0][1]) p.residual = Program::Residual::kAdd;
  if (add01 && c.size() == 2 && c[1][0] == static_cast<int64_t>(Op::kRelu) && c[1][2] == c[0][1] && p.result == c[1][1])
    p.residual = Program::Residual::kAddRelu;
  auto kernel = std::make_unique<QLinearEltwiseKernel>(std::move(p));
  kernel->make_tables();
  return std::unique_ptr<Kernel>(std::move(kernel));
}

}  // namespace

void register_quant_eltwise_kernels(KernelTable& t) { t.add("QLinearEltwise", 1, make_qlinear_eltwise, "bulkhead"); }

}  // namespace bulkhead::cpu
