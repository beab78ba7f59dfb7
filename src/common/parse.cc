#include "common/parse.h"

#include <cctype>

namespace bulkhead {
namespace {

// Digits only, at least one; false on overflow.
bool parse_digits(const std::string& t, size_t begin, size_t end, uint64_t* out) {
  if (begin >= end) return false;
  uint64_t v = 0;
  for (size_t i = begin; i < end; ++i) {
    if (!std::isdigit(static_cast<unsigned char>(t[i]))) return false;
    if (__builtin_mul_overflow(v, uint64_t{10}, &v) || __builtin_add_overflow(v, static_cast<uint64_t>(t[i] - '0'), &v))
      return false;
  }
  *out = v;
  return true;
}

}  // namespace

bool parse_byte_size(const std::string& text, uint64_t* out) {
  size_t digits = 0;
  while (digits < text.size() && std::isdigit(static_cast<unsigned char>(text[digits]))) ++digits;
  uint64_t v = 0;
  if (!parse_digits(text, 0, digits, &v)) return false;
  std::string unit;
  for (size_t i = digits; i < text.size(); ++i) unit += static_cast<char>(std::toupper(static_cast<unsigned char>(text[i])));
  int shift = 0;
  if (unit.empty() || unit == "B") shift = 0;
  else if (unit == "K" || unit == "KIB" || unit == "KB") shift = 10;
  else if (unit == "M" || unit == "MIB" || unit == "MB") shift = 20;
  else if (unit == "G" || unit == "GIB" || unit == "GB") shift = 30;
  else if (unit == "T" || unit == "TIB" || unit == "TB") shift = 40;
  else return false;
  if (shift && v > (UINT64_MAX >> shift)) return false;
  *out = v << shift;
  return true;
}

bool parse_int_in(const std::string& text, int64_t lo, int64_t hi, int64_t* out) {
  size_t begin = 0;
  bool negative = false;
  if (!text.empty() && (text[0] == '-' || text[0] == '+')) {
    negative = text[0] == '-';
    begin = 1;
  }
  uint64_t mag = 0;
  if (!parse_digits(text, begin, text.size(), &mag)) return false;
  if (mag > (negative ? uint64_t{1} << 63 : static_cast<uint64_t>(INT64_MAX))) return false;
  int64_t v = negative ? static_cast<int64_t>(0 - mag) : static_cast<int64_t>(mag);
  if (v < lo || v > hi) return false;
  *out = v;
  return true;
}

}  // namespace bulkhead
