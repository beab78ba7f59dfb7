// NumPy .npy files (format 1.0/2.0/3.0, C order, little-endian numeric types and bool).
#pragma once

#include <string>

#include "bulkhead/status.h"
#include "bulkhead/tensor.h"
#include "io/file.h"

namespace bulkhead::io {

// Reads a .npy file into a host tensor: a regular file of at most `max_bytes`. Errors
// name the file and what is wrong with it.
Result<Tensor> read_npy(const std::string& path, uint64_t max_bytes = kDefaultMaxFileBytes);
Result<Tensor> parse_npy(const std::string& bytes, const std::string& name);
// Serialises a host tensor as .npy (format 1.0).
Result<std::string> to_npy(const Tensor& t);
// Writes `t` to `path` atomically: a temporary file renamed into place, so a failure
// never leaves a half-written file behind.
Status write_npy(const std::string& path, const Tensor& t);
// Writes `bytes` to `path` through a temporary file and rename.
Status write_file_atomic(const std::string& path, const std::string& bytes);

}  // namespace bulkhead::io
