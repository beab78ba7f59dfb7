// SessionOptions::precision on the CPU: which hardware makes bfloat16 fast here, and how a
// kernel reads the precision the layout pass chose for its node (attribute `_precision`).
#include <oneapi/dnnl/dnnl.hpp>

#include <cstdlib>
#include <string>

#include "backends/cpu/cpu_kernels.h"
#include "backends/cpu/kernels/dnnl_common.h"

namespace bulkhead::cpu {

std::string bf16_units() {
  // BULKHEAD_CPU_BF16: "0" behaves as a CPU without bf16 units; "force" computes in
  // bfloat16 even without them (oneDNN then emulates it, slowly: for tests of the bf16
  // path on any machine). oneDNN's ONEDNN_MAX_CPU_ISA limits what is found, too.
  const char* env = std::getenv("BULKHEAD_CPU_BF16");
  const std::string v = env ? env : "";
  if (v == "0") return "";
  using I = dnnl::cpu_isa;
  const I isa = dnnl::get_effective_cpu_isa();
  if (isa == I::avx512_core_amx) return "AMX";
  if (isa == I::avx512_core_bf16) return "AVX512-BF16";
  if (v == "force") return "none (emulated: BULKHEAD_CPU_BF16=force)";
  return "";
}

namespace dnnl_util {

Result<bool> bf16_precision(const KernelInfo& info) {
  const std::string p = info.node.attr_string("_precision", "");
  if (p.empty()) return false;
  if (p != "bf16") return invalid_argument(info.where() + "unsupported _precision '" + p + "' (only bf16)");
  return true;
}

}  // namespace dnnl_util
}  // namespace bulkhead::cpu
