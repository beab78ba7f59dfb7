// Strict parsers for numbers that come from users (option strings, CLI flags, environment
// variables): the whole text must be the number, with no sign where none is allowed, and
// values that overflow are refused rather than wrapped.
#pragma once

#include <cstdint>
#include <string>

namespace bulkhead {

// "123", "64K", "8M", "2G", "1T" (powers of 1024; the unit may also be written KiB, MiB,
// GiB, TiB, or lower case). False for anything else, a sign, or a value over 2^64-1.
bool parse_byte_size(const std::string& text, uint64_t* out);

// A decimal integer in [lo, hi], optionally signed. False for anything else.
bool parse_int_in(const std::string& text, int64_t lo, int64_t hi, int64_t* out);

}  // namespace bulkhead
