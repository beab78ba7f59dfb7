// String operators: StringNormalizer, StringConcat.
#include <algorithm>
#include <cctype>
#include <unordered_set>

#include "backends/cpu/cpu_kernels.h"
#include "backends/cpu/cpu_util.h"

namespace bulkhead::cpu {
namespace {

std::string lowered(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}
std::string uppered(std::string s) {
  for (char& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

Result<std::unique_ptr<Kernel>> make_string_normalizer(const KernelInfo& info) {
  const ir::Node& n = info.node;
  std::string action = n.attr_string("case_change_action", "NONE");
  if (action != "NONE" && action != "LOWER" && action != "UPPER")
    return invalid_argument(info.where() + "case_change_action must be NONE, LOWER or UPPER, got '" + action + "'");
  bool case_sensitive = n.attr_int("is_case_sensitive", 0) != 0;
  std::unordered_set<std::string> stop;
  for (const auto& w : n.attr_strings("stopwords")) stop.insert(case_sensitive ? w : lowered(w));
  return make_kernel([action, case_sensitive, stop](KernelContext& ctx) -> Status {
    const Tensor* x = ctx.input(0);
    if (!x || x->dtype() != DataType::kString) return invalid_argument(ctx.where() + "input must be a string tensor");
    const Shape& s = x->shape();
    if (!(s.size() == 1 || (s.size() == 2 && s[0] == 1)))
      return invalid_argument(ctx.where() + "input must have shape [C] or [1,C], got " + shape_to_string(s));
    std::vector<std::string> kept;
    for (int64_t i = 0; i < x->numel(); ++i) {
      const std::string& v = x->strings()[i];
      if (stop.count(case_sensitive ? v : lowered(v))) continue;
      kept.push_back(action == "LOWER" ? lowered(v) : action == "UPPER" ? uppered(v) : v);
    }
    // An input whose every string is a stop word gives one empty string.
    if (kept.empty()) kept.emplace_back();
    Shape out = s.size() == 1 ? Shape{static_cast<int64_t>(kept.size())} : Shape{1, static_cast<int64_t>(kept.size())};
    BH_ASSIGN_OR_RETURN(Tensor y, ctx.allocate_output(0, DataType::kString, out));
    std::copy(kept.begin(), kept.end(), y.strings());
    return Status::ok();
  });
}

// StringConcat (opset 20): X + Y element-wise, with NumPy broadcasting.
Status string_concat(KernelContext& ctx) {
  const Tensor *a = ctx.input(0), *b = ctx.input(1);
  if (!a || !b || a->dtype() != DataType::kString || b->dtype() != DataType::kString)
    return invalid_argument(ctx.where() + "both inputs must be string tensors");
  BH_ASSIGN_OR_RETURN(Shape out, broadcast_shapes(a->shape(), b->shape(), ctx.where()));
  BH_ASSIGN_OR_RETURN(Tensor y, ctx.allocate_output(0, DataType::kString, out));
  const auto sa = broadcast_strides(a->shape(), out), sb = broadcast_strides(b->shape(), out);
  const int r = static_cast<int>(out.size());
  std::vector<int64_t> idx(r, 0);
  for (int64_t o = 0; o < y.numel(); ++o) {
    int64_t ia = 0, ib = 0;
    for (int d = 0; d < r; ++d) ia += idx[d] * sa[d], ib += idx[d] * sb[d];
    y.strings()[o] = a->strings()[ia] + b->strings()[ib];
    for (int d = r - 1; d >= 0 && ++idx[d] == out[d]; --d) idx[d] = 0;
  }
  return Status::ok();
}

}  // namespace

void register_string_kernels(KernelTable& t) {
  t.add("StringNormalizer", 10, make_string_normalizer);
  t.add("StringConcat", 20, [](const KernelInfo&) -> Result<std::unique_ptr<Kernel>> { return make_kernel(string_concat); });
}

}  // namespace bulkhead::cpu
