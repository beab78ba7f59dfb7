#include "check/metrics.h"

#include <cmath>
#include <cstring>

#include "check/sha256.h"

namespace bulkhead::check {

double element_as_double(const Tensor& t, int64_t i) {
  const void* p = t.raw();
  switch (t.dtype()) {
    case DataType::kFloat32: return static_cast<const float*>(p)[i];
    case DataType::kFloat64: return static_cast<const double*>(p)[i];
    case DataType::kFloat16: return half_to_float(static_cast<const uint16_t*>(p)[i]);
    case DataType::kBFloat16: return bfloat16_to_float(static_cast<const uint16_t*>(p)[i]);
    case DataType::kUInt8: return static_cast<const uint8_t*>(p)[i];
    case DataType::kInt8: return static_cast<const int8_t*>(p)[i];
    case DataType::kUInt16: return static_cast<const uint16_t*>(p)[i];
    case DataType::kInt16: return static_cast<const int16_t*>(p)[i];
    case DataType::kInt32: return static_cast<const int32_t*>(p)[i];
    case DataType::kInt64: return static_cast<double>(static_cast<const int64_t*>(p)[i]);
    case DataType::kUInt32: return static_cast<const uint32_t*>(p)[i];
    case DataType::kUInt64: return static_cast<double>(static_cast<const uint64_t*>(p)[i]);
    case DataType::kBool: return static_cast<const uint8_t*>(p)[i] ? 1.0 : 0.0;
    default: return 0;
  }
}

Metrics compare(const Tensor& out, const Tensor& ref) {
  Metrics m;
  if (out.dtype() != ref.dtype() || out.shape() != ref.shape()) {
    m.shape_mismatch = true;
    m.note = "got " + out.describe() + ", expected " + ref.describe();
    return m;
  }
  m.count = ref.numel();
  if (ref.dtype() == DataType::kString) {
    for (int64_t i = 0; i < m.count; ++i)
      if (out.strings()[i] != ref.strings()[i]) m.max_abs = 1, ++m.nonfinite_mismatch;
    m.psnr = m.max_abs ? 0 : INFINITY;
    return m;
  }
  if (m.count == 0) {
    m.psnr = INFINITY;
    return m;
  }
  double sq = 0, dot = 0, nout = 0, nref = 0;
  int64_t nan = 0, inf = 0, zero = 0, rnan = 0, rinf = 0, finite_pairs = 0;
  for (int64_t i = 0; i < m.count; ++i) {
    double o = element_as_double(out, i), r = element_as_double(ref, i);
    bool on = std::isnan(o), oi = std::isinf(o), rn = std::isnan(r), ri = std::isinf(r);
    nan += on, inf += oi, zero += (o == 0), rnan += rn, rinf += ri;
    if (on || oi || rn || ri) {
      if (on != rn || oi != ri || (oi && ri && (o > 0) != (r > 0))) ++m.nonfinite_mismatch;
      continue;
    }
    double d = std::fabs(o - r);
    m.max_abs = std::max(m.max_abs, d);
    m.ref_max_abs = std::max(m.ref_max_abs, std::fabs(r));
    sq += d * d, dot += o * r, nout += o * o, nref += r * r;
    ++finite_pairs;
  }
  double n = static_cast<double>(m.count);
  m.nan_frac = nan / n, m.inf_frac = inf / n, m.zero_frac = zero / n;
  m.ref_nan_frac = rnan / n, m.ref_inf_frac = rinf / n;
  m.rmse = finite_pairs ? std::sqrt(sq / finite_pairs) : 0;
  if (nout == 0 && nref == 0) m.cosine = 1;
  else if (nout == 0 || nref == 0) m.cosine = 0;
  else m.cosine = dot / std::sqrt(nout * nref);
  if (m.rmse == 0) m.psnr = INFINITY;
  else if (m.ref_max_abs == 0) m.psnr = 0;
  else m.psnr = 20 * std::log10(m.ref_max_abs / m.rmse);
  return m;
}

std::string tensor_hash(const Tensor& t) {
  Sha256 s;
  std::string head = dtype_name(t.dtype()) + shape_to_string(t.shape());
  s.update(head.data(), head.size());
  if (t.dtype() == DataType::kString) {
    for (int64_t i = 0; i < t.numel(); ++i) {
      const std::string& x = t.strings()[i];
      uint64_t len = x.size();
      s.update(&len, sizeof len);
      s.update(x.data(), x.size());
    }
  } else if (t.raw()) {
    s.update(t.raw(), t.nbytes());
  }
  return s.hex();
}

}  // namespace bulkhead::check
