// SHA-256 (FIPS 180-4) of byte ranges, for the checker's "a run must not write its
// inputs, a later run must not rewrite an earlier result" hashes and the repro manifest.
// Pure functions; thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace bulkhead::check {

class Sha256 {
 public:
  Sha256();
  void update(const void* data, size_t size);
  // Lower-case hex digest; the object must not be updated afterwards.
  std::string hex();

 private:
  void block(const uint8_t* p);
  uint32_t h_[8];
  uint8_t buf_[64];
  size_t buf_len_ = 0;
  uint64_t total_ = 0;
};

std::string sha256_hex(const void* data, size_t size);

}  // namespace bulkhead::check
