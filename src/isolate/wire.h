// Wire encoding for messages between a supervisor and its worker: little-endian fixed
// width integers and length-prefixed strings, written by Writer and read back by Reader.
// Reader never reads past its input: a short or malformed payload makes every later
// read fail and ok() false, so decoders check once at the end.
// Value types; thread-compatible.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace bulkhead::isolate {

class Writer {
 public:
  void u8(uint8_t v) { raw(&v, 1); }
  void u32(uint32_t v) { raw(&v, 4); }
  void i32(int32_t v) { raw(&v, 4); }
  void u64(uint64_t v) { raw(&v, 8); }
  void i64(int64_t v) { raw(&v, 8); }
  void str(const std::string& s) {
    u64(s.size());
    out_.append(s);
  }
  void i64s(const std::vector<int64_t>& v) {
    u32(static_cast<uint32_t>(v.size()));
    for (int64_t x : v) i64(x);
  }
  void strs(const std::vector<std::string>& v) {
    u32(static_cast<uint32_t>(v.size()));
    for (auto& s : v) str(s);
  }
  const std::string& bytes() const { return out_; }
  std::string take() { return std::move(out_); }

 private:
  void raw(const void* p, size_t n) { out_.append(static_cast<const char*>(p), n); }
  std::string out_;
};

class Reader {
 public:
  explicit Reader(const std::string& in) : p_(in.data()), end_(in.data() + in.size()) {}
  uint8_t u8() { return fixed<uint8_t>(); }
  uint32_t u32() { return fixed<uint32_t>(); }
  int32_t i32() { return fixed<int32_t>(); }
  uint64_t u64() { return fixed<uint64_t>(); }
  int64_t i64() { return fixed<int64_t>(); }
  std::string str() {
    uint64_t n = u64();
    if (!ok_ || n > static_cast<uint64_t>(end_ - p_)) return fail<std::string>();
    std::string s(p_, n);
    p_ += n;
    return s;
  }
  // A count of items each at least `min_item_bytes` long: rejects counts the rest of the
  // input cannot hold, so a corrupt count never drives a huge allocation.
  uint32_t count(size_t min_item_bytes) {
    uint32_t n = u32();
    if (ok_ && static_cast<uint64_t>(n) * min_item_bytes > static_cast<uint64_t>(end_ - p_)) return fail<uint32_t>();
    return n;
  }
  std::vector<int64_t> i64s() {
    std::vector<int64_t> v(count(8));
    for (auto& x : v) x = i64();
    return v;
  }
  std::vector<std::string> strs() {
    std::vector<std::string> v(count(8));
    for (auto& s : v) s = str();
    return v;
  }
  bool ok() const { return ok_; }
  bool at_end() const { return p_ == end_; }

 private:
  template <typename T>
  T fixed() {
    if (!ok_ || static_cast<size_t>(end_ - p_) < sizeof(T)) return fail<T>();
    T v;
    std::memcpy(&v, p_, sizeof v);
    p_ += sizeof v;
    return v;
  }
  template <typename T>
  T fail() {
    ok_ = false;
    p_ = end_;
    return T{};
  }
  const char* p_;
  const char* end_;
  bool ok_ = true;
};

}  // namespace bulkhead::isolate
