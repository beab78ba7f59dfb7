// NumPy .npy files (format 1.0/2.0/3.0, C order): little-endian numeric types and bool,
// and strings as fixed-width UTF-32 (<U, >U; read and written) or bytes (|S; read). Object
// arrays (|O) are refused: their data is a pickle.
#pragma once

#include <string>

#include "bulkhead/status.h"
#include "bulkhead/tensor.h"
#include "io/file.h"

namespace bulkhead::io {

// Reads a .npy file into a host tensor: a regular file of at most `max_bytes`. Errors
// name the file and what is wrong with it. String arrays become string tensors: '<U'/'>U'
// code points as UTF-8 (surrogates and values past U+10FFFF are an error), '|S' bytes as
// they are, each element without its trailing NULs.
Result<Tensor> read_npy(const std::string& path, uint64_t max_bytes = kDefaultMaxFileBytes);
Result<Tensor> parse_npy(const std::string& bytes, const std::string& name);
// Serialises a host tensor as .npy (format 1.0). A string tensor is written as '<U{n}', n
// the most code points of any element (at least 1); an element that is not valid UTF-8,
// or that ends with a NUL (which '<U' cannot keep), is an error.
Result<std::string> to_npy(const Tensor& t);
// Writes `t` to `path` atomically: a temporary file renamed into place, so a failure
// never leaves a half-written file behind.
Status write_npy(const std::string& path, const Tensor& t);
// Writes `bytes` to `path` through a temporary file and rename.
Status write_file_atomic(const std::string& path, const std::string& bytes);

}  // namespace bulkhead::io
