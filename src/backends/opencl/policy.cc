#include "policy.h"

#include <cctype>

namespace bulkhead::opencl {
namespace {

// "123", "64K", "8M", "2G" (powers of 1024, also written KiB/MiB/GiB or lower case).
bool parse_bytes(const std::string& text, uint64_t* out) {
  size_t digits = 0;
  uint64_t v = 0;
  for (; digits < text.size() && std::isdigit(static_cast<unsigned char>(text[digits])); ++digits) {
    if (v > (UINT64_MAX - 9) / 10) return false;
    v = v * 10 + static_cast<uint64_t>(text[digits] - '0');
  }
  if (digits == 0) return false;
  std::string unit;
  for (size_t i = digits; i < text.size(); ++i)
    unit += static_cast<char>(std::toupper(static_cast<unsigned char>(text[i])));
  int shift = 0;
  if (unit == "K" || unit == "KIB")
    shift = 10;
  else if (unit == "M" || unit == "MIB")
    shift = 20;
  else if (unit == "G" || unit == "GIB")
    shift = 30;
  else if (!unit.empty() && unit != "B")
    return false;
  if (v > (UINT64_MAX >> shift)) return false;
  *out = v << shift;
  return true;
}

std::string size_text(uint64_t b) {
  if (b % (uint64_t{1} << 20) == 0) return std::to_string(b >> 20) + " MiB";
  if (b % 1024 == 0) return std::to_string(b >> 10) + " KiB";
  return std::to_string(b) + " bytes";
}

}  // namespace

std::string SubmitPolicy::to_string() const {
  switch (policy) {
    case Policy::kSingle:
      return "single";
    case Policy::kPerDispatch:
      return "per-dispatch";
    case Policy::kSplit:
      return "split";
    case Policy::kAuto:
      return "auto (" + size_text(auto_bytes) + ")";
  }
  return "?";
}

Result<SubmitPolicy> parse_policy(const std::string& text, const std::string& what) {
  SubmitPolicy p;
  p.why = what;
  const size_t colon = text.find(':');
  const std::string name = text.substr(0, colon);
  auto bad = [&] {
    return invalid_argument(what + ": unknown submission policy '" + text +
                            "' (expected single, per-dispatch, split, auto or auto:<bytes>[K|M|G])");
  };
  if (name == "single")
    p.policy = Policy::kSingle;
  else if (name == "per-dispatch")
    p.policy = Policy::kPerDispatch;
  else if (name == "split")
    p.policy = Policy::kSplit;
  else if (name == "auto")
    p.policy = Policy::kAuto;
  else
    return bad();
  if (colon != std::string::npos) {
    if (p.policy != Policy::kAuto || !parse_bytes(text.substr(colon + 1), &p.auto_bytes)) return bad();
    if (p.auto_bytes == 0) return invalid_argument(what + ": the auto threshold must be above 0 bytes");
  }
  return p;
}

}  // namespace bulkhead::opencl
