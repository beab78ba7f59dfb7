#include "io/npy.h"

#include "io/file.h"
#include "io/file_set.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

namespace bulkhead::io {
namespace {

// Finds `'key': value` in the header dict and returns the raw value text.
bool dict_value(const std::string& h, const std::string& key, std::string& out) {
  auto k = h.find("'" + key + "'");
  if (k == std::string::npos) return false;
  auto c = h.find(':', k);
  if (c == std::string::npos) return false;
  size_t p = c + 1;
  while (p < h.size() && h[p] == ' ') ++p;
  if (p >= h.size()) return false;
  size_t e;
  if (h[p] == '\'') {
    e = h.find('\'', p + 1);
    if (e == std::string::npos) return false;
    out = h.substr(p + 1, e - p - 1);
  } else if (h[p] == '(') {
    e = h.find(')', p);
    if (e == std::string::npos) return false;
    out = h.substr(p + 1, e - p - 1);
  } else {
    e = h.find_first_of(",}", p);
    if (e == std::string::npos) return false;
    out = h.substr(p, e - p);
    while (!out.empty() && out.back() == ' ') out.pop_back();
  }
  return true;
}

// numpy's object arrays ('|O'): their data is a pickle.
bool is_object_dtype(const std::string& d) {
  return d == "O" || (d.size() == 2 && d[1] == 'O' && (d[0] == '|' || d[0] == '<' || d[0] == '>' || d[0] == '='));
}

// A fixed-width string dtype: '<U{n}' / '>U{n}' (n UTF-32 code points an element; '=' and
// '|' are native, little-endian here) or '|S{n}' (n bytes), padded with NULs.
struct StringForm {
  enum Kind { kNone, kUtf32, kBytes } kind = kNone;
  bool big_endian = false;
  size_t width = 0;       // code points or bytes per element
  size_t item_bytes = 0;  // bytes per element
};

// Recognises a string descr. False, with `why`, for one that is malformed; true with
// kind kNone for every other descr.
bool string_form(const std::string& d, StringForm* f, std::string* why) {
  size_t k = !d.empty() && std::strchr("<>|=", d[0]) ? 1 : 0;
  if (k >= d.size() || (d[k] != 'U' && d[k] != 'S') || k + 1 == d.size()) return true;
  const std::string digits = d.substr(k + 1);
  if (digits.find_first_not_of("0123456789") != std::string::npos) return true;  // not a string dtype
  size_t n = 0;
  for (char c : digits)
    if (__builtin_mul_overflow(n, size_t{10}, &n) || __builtin_add_overflow(n, static_cast<size_t>(c - '0'), &n)) {
      *why = "string width in dtype '" + d + "' is too large";
      return false;
    }
  if (n == 0) {
    *why = "zero-width string dtype '" + d + "'";
    return false;
  }
  f->kind = d[k] == 'U' ? StringForm::kUtf32 : StringForm::kBytes;
  f->big_endian = f->kind == StringForm::kUtf32 && d[0] == '>';
  size_t item = 0;
  if (__builtin_mul_overflow(n, f->kind == StringForm::kUtf32 ? size_t{4} : size_t{1}, &item)) {
    *why = "string width in dtype '" + d + "' is too large";
    return false;
  }
  f->width = n;
  f->item_bytes = item;
  return true;
}

// Appends the UTF-8 form of `cp`; false for a surrogate or a value past U+10FFFF.
bool append_utf8(uint32_t cp, std::string& out) {
  if (cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
  return true;
}

// Decodes the UTF-8 sequence at s[i] into `cp` and advances `i`; false (i unchanged) for
// a byte that does not start a valid sequence: overlong forms, surrogates, values past
// U+10FFFF and truncated sequences are not valid.
bool next_utf8(const std::string& s, size_t& i, uint32_t& cp) {
  const auto b = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  unsigned char c = b(i);
  size_t n;
  if (c < 0x80) n = 1, cp = c;
  else if (c >= 0xC2 && c <= 0xDF) n = 2, cp = c & 0x1F;
  else if (c >= 0xE0 && c <= 0xEF) n = 3, cp = c & 0x0F;
  else if (c >= 0xF0 && c <= 0xF4) n = 4, cp = c & 0x07;
  else return false;
  if (i + n > s.size()) return false;
  for (size_t k = 1; k < n; ++k) {
    if ((b(i + k) & 0xC0) != 0x80) return false;
    cp = (cp << 6) | (b(i + k) & 0x3F);
  }
  if ((n == 3 && cp < 0x800) || (n == 4 && (cp < 0x10000 || cp > 0x10FFFF)) || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
  i += n;
  return true;
}

// The .npy header for `descr` and `shape`, padded so the data starts 64-byte aligned.
std::string npy_header(const std::string& descr, const Shape& s) {
  std::string shape = "(";
  for (size_t i = 0; i < s.size(); ++i) shape += std::to_string(s[i]) + (s.size() == 1 ? "," : (i + 1 < s.size() ? ", " : ""));
  shape += ")";
  std::string h = "{'descr': '" + descr + "', 'fortran_order': False, 'shape': " + shape + ", }";
  size_t total = 10 + h.size() + 1;
  h.append((64 - total % 64) % 64, ' ');
  h += '\n';
  std::string out = "\x93NUMPY";
  out += '\x01';
  out += '\x00';
  out += static_cast<char>(h.size() & 0xff);
  out += static_cast<char>((h.size() >> 8) & 0xff);
  return out + h;
}

// A string tensor as '<U{n}': n the most code points of any element (at least 1), each
// element UTF-32 little-endian, NUL-padded.
Result<std::string> strings_to_npy(const Tensor& t) {
  const int64_t n = t.numel();
  if (n > 0 && !t.strings()) return invalid_argument("string tensor holds no elements");
  const std::string* s = t.strings();
  size_t width = 1;
  for (int64_t i = 0; i < n; ++i) {
    size_t cps = 0;
    uint32_t cp = 0;
    for (size_t k = 0; k < s[i].size(); ++cps) {
      if (!next_utf8(s[i], k, cp)) {
        char hex[8];
        std::snprintf(hex, sizeof hex, "0x%02X", static_cast<unsigned char>(s[i][k]));
        return invalid_argument("string " + std::to_string(i) + " is not valid UTF-8 (byte " + hex + " at offset " +
                                std::to_string(k) + "); .npy string arrays ('<U') hold Unicode text only");
      }
    }
    if (!s[i].empty() && s[i].back() == '\0')
      return invalid_argument("string " + std::to_string(i) +
                              " ends with a NUL character, which a .npy string array ('<U') cannot hold (NumPy strips trailing NULs)");
    width = std::max(width, cps);
  }
  const std::string descr = "<U" + std::to_string(width);
  size_t body = 0;
  if (__builtin_mul_overflow(static_cast<size_t>(n), width, &body) || __builtin_mul_overflow(body, size_t{4}, &body) ||
      body > kDefaultMaxFileBytes)
    return Status(StatusCode::kResourceExhausted, "as '" + descr + "' (" + std::to_string(n) + " strings of up to " + std::to_string(width) +
                                                      " characters, fixed width) the .npy would be larger than " +
                                                      format_bytes(kDefaultMaxFileBytes) + ", the most bulkhead reads back");
  std::string out = npy_header(descr, t.shape());
  out.reserve(out.size() + body);
  for (int64_t i = 0; i < n; ++i) {
    size_t k = 0, cps = 0;
    uint32_t cp = 0;
    for (; k < s[i].size(); ++cps) {
      next_utf8(s[i], k, cp);
      const char le[4] = {static_cast<char>(cp & 0xff), static_cast<char>((cp >> 8) & 0xff), static_cast<char>((cp >> 16) & 0xff),
                          static_cast<char>(cp >> 24)};
      out.append(le, 4);
    }
    out.append(4 * (width - cps), '\0');
  }
  return out;
}

}  // namespace

Result<Tensor> parse_npy(const std::string& b, const std::string& name) {
  auto bad = [&](const std::string& why) { return invalid_argument("'" + name + "' is not a valid .npy file: " + why); };
  if (b.size() < 10 || b.compare(0, 6, "\x93NUMPY") != 0) return bad("missing the \\x93NUMPY magic");
  int major = static_cast<unsigned char>(b[6]);
  size_t hlen, hstart;
  if (major == 1) {
    hlen = static_cast<unsigned char>(b[8]) | (static_cast<unsigned char>(b[9]) << 8);
    hstart = 10;
  } else if (major == 2 || major == 3) {
    if (b.size() < 12) return bad("truncated header");
    hlen = 0;
    for (int i = 0; i < 4; ++i) hlen |= static_cast<size_t>(static_cast<unsigned char>(b[8 + i])) << (8 * i);
    hstart = 12;
  } else {
    return bad("unsupported format version " + std::to_string(major));
  }
  if (hstart + hlen > b.size()) return bad("truncated header");
  std::string h = b.substr(hstart, hlen);
  std::string descr, fortran, shape_s;
  if (!dict_value(h, "descr", descr) || !dict_value(h, "fortran_order", fortran) || !dict_value(h, "shape", shape_s))
    return bad("header lacks descr, fortran_order or shape");
  if (fortran != "False") return bad("Fortran-order arrays are not supported");
  if (is_object_dtype(descr))
    return unsupported("'" + name + "' holds a NumPy object array (dtype '" + descr +
                       "'), which bulkhead does not read: its data is a pickle, and unpickling can run code; "
                       "save it with a fixed-width dtype instead, e.g. np.save(path, np.array(x, dtype=str))");
  StringForm sf;
  DataType dt = DataType::kUndefined;
  if (std::string why; !string_form(descr, &sf, &why)) {
    return bad(why);
  } else if (sf.kind == StringForm::kNone) {
    if (!descr.empty() && descr[0] == '>' && descr.size() == 3 && descr[2] != '1') return bad("big-endian data is not supported");
    dt = dtype_from_name(descr);
    if (dt == DataType::kUndefined || dt == DataType::kString) return bad("unsupported dtype '" + descr + "'");
  }
  Shape shape;
  std::stringstream ss(shape_s);
  std::string item;
  while (std::getline(ss, item, ',')) {
    size_t a = item.find_first_not_of(' ');
    if (a == std::string::npos) continue;
    item = item.substr(a);
    while (!item.empty() && (item.back() == ' ' || item.back() == 'L')) item.pop_back();
    if (item.empty()) continue;
    char* end = nullptr;
    errno = 0;
    long long v = std::strtoll(item.c_str(), &end, 10);
    if (*end != '\0' || v < 0 || errno == ERANGE) return bad("bad shape '(" + shape_s + ")'");
    shape.push_back(v);
  }
  size_t data_off = hstart + hlen;
  const size_t have = b.size() - data_off;
  if (sf.kind != StringForm::kNone) {
    // Every count is checked, and the data length must match it exactly, before anything
    // is allocated: the tensor's size is then bounded by the file's.
    int64_t n = 0;
    size_t want = 0;
    if (!checked_numel(shape, &n) || __builtin_mul_overflow(static_cast<size_t>(n), sf.item_bytes, &want))
      return bad("shape (" + shape_s + ") of '" + descr + "' is too large: its size overflows 64 bits");
    if (have != want)
      return bad("data has " + std::to_string(have) + " bytes, expected " + std::to_string(want) + " for " + std::to_string(n) +
                 " elements of '" + descr + "' (" + std::to_string(sf.item_bytes) + " bytes each)");
    auto alloc = HostAllocator::create("user");
    BH_ASSIGN_OR_RETURN(Tensor t, Tensor::allocate(*alloc, DataType::kString, shape));
    const unsigned char* p = reinterpret_cast<const unsigned char*>(b.data() + data_off);
    for (int64_t i = 0; i < n; ++i, p += sf.item_bytes) {
      std::string& out = t.strings()[i];
      if (sf.kind == StringForm::kBytes) {
        size_t len = sf.width;
        while (len > 0 && p[len - 1] == 0) --len;
        out.assign(reinterpret_cast<const char*>(p), len);
        continue;
      }
      auto cp_at = [&](size_t k) {
        const unsigned char* q = p + 4 * k;
        return sf.big_endian ? (uint32_t{q[0]} << 24) | (uint32_t{q[1]} << 16) | (uint32_t{q[2]} << 8) | q[3]
                             : (uint32_t{q[3]} << 24) | (uint32_t{q[2]} << 16) | (uint32_t{q[1]} << 8) | q[0];
      };
      size_t len = sf.width;
      while (len > 0 && cp_at(len - 1) == 0) --len;
      for (size_t k = 0; k < len; ++k) {
        uint32_t cp = cp_at(k);
        if (!append_utf8(cp, out)) {
          char hex[16];
          std::snprintf(hex, sizeof hex, "0x%X", cp);
          return bad("element " + std::to_string(i) + " of '" + descr + "' holds " + hex + " at character " + std::to_string(k) +
                     (cp > 0x10FFFF ? ", past U+10FFFF, the last Unicode code point"
                                    : ", a UTF-16 surrogate, which is not a Unicode character"));
        }
      }
    }
    return t;
  }
  size_t want = 0;
  if (!checked_nbytes(dt, shape, &want)) return bad("shape (" + shape_s + ") is too large: its size overflows 64 bits");
  if (have != want)
    return bad("data has " + std::to_string(have) + " bytes, expected " + std::to_string(want) + " for " +
               dtype_name(dt) + shape_to_string(shape));
  return Tensor::host_copy(dt, shape, b.data() + data_off, want);
}

Result<Tensor> read_npy(const std::string& path, uint64_t max_bytes) {
  BH_ASSIGN_OR_RETURN(std::string bytes, read_regular_file(path, max_bytes, "input file"));
  return parse_npy(bytes, path);
}

Result<std::string> to_npy(const Tensor& t) {
  if (t.dtype() == DataType::kString) return strings_to_npy(t);
  static const struct { DataType t; const char* d; } kDescr[] = {
      {DataType::kFloat32, "<f4"}, {DataType::kFloat64, "<f8"}, {DataType::kFloat16, "<f2"}, {DataType::kInt8, "|i1"},
      {DataType::kUInt8, "|u1"},   {DataType::kInt16, "<i2"},   {DataType::kUInt16, "<u2"},  {DataType::kInt32, "<i4"},
      {DataType::kUInt32, "<u4"},  {DataType::kInt64, "<i8"},   {DataType::kUInt64, "<u8"},  {DataType::kBool, "|b1"},
  };
  const char* descr = nullptr;
  for (auto& e : kDescr)
    if (e.t == t.dtype()) descr = e.d;
  if (!descr) return unsupported("cannot write " + dtype_name(t.dtype()) + " tensors as .npy");
  if (t.numel() > 0 && !t.raw()) return invalid_argument("tensor is not in host memory");
  std::string out = npy_header(descr, t.shape());
  out.append(static_cast<const char*>(t.raw()) ? static_cast<const char*>(t.raw()) : "", t.nbytes());
  return out;
}

Status write_file_atomic(const std::string& path, const std::string& bytes) {
  return write_files_all_or_nothing({{path, bytes}});
}

Status write_npy(const std::string& path, const Tensor& t) {
  BH_ASSIGN_OR_RETURN(std::string bytes, to_npy(t));
  return write_file_atomic(path, bytes);
}

}  // namespace bulkhead::io
