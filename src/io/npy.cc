#include "io/npy.h"

#include "io/file.h"
#include "io/file_set.h"

#include <unistd.h>

#include <cerrno>
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
  if (!descr.empty() && descr[0] == '>' && descr.size() == 3 && descr[2] != '1') return bad("big-endian data is not supported");
  DataType dt = dtype_from_name(descr);
  if (dt == DataType::kUndefined || dt == DataType::kString) return bad("unsupported dtype '" + descr + "'");
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
  size_t want = 0;
  if (!checked_nbytes(dt, shape, &want)) return bad("shape (" + shape_s + ") is too large: its size overflows 64 bits");
  if (b.size() - data_off != want)
    return bad("data has " + std::to_string(b.size() - data_off) + " bytes, expected " + std::to_string(want) + " for " +
               dtype_name(dt) + shape_to_string(shape));
  return Tensor::host_copy(dt, shape, b.data() + data_off, want);
}

Result<Tensor> read_npy(const std::string& path, uint64_t max_bytes) {
  BH_ASSIGN_OR_RETURN(std::string bytes, read_regular_file(path, max_bytes, "input file"));
  return parse_npy(bytes, path);
}

Result<std::string> to_npy(const Tensor& t) {
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
  std::string shape = "(";
  for (size_t i = 0; i < t.shape().size(); ++i) shape += std::to_string(t.shape()[i]) + (t.shape().size() == 1 ? "," : (i + 1 < t.shape().size() ? ", " : ""));
  shape += ")";
  std::string h = std::string("{'descr': '") + descr + "', 'fortran_order': False, 'shape': " + shape + ", }";
  size_t total = 10 + h.size() + 1;
  h.append((64 - total % 64) % 64, ' ');
  h += '\n';
  std::string out = "\x93NUMPY";
  out += '\x01';
  out += '\x00';
  out += static_cast<char>(h.size() & 0xff);
  out += static_cast<char>((h.size() >> 8) & 0xff);
  out += h;
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
