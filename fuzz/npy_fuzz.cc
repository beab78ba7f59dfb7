// libFuzzer harness: arbitrary bytes as a .npy file (io/npy.h); a tensor that parses is
// written back and parsed again, and must round-trip (strings element by element).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "io/npy.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string bytes(reinterpret_cast<const char*>(data), size);
  auto t = bulkhead::io::parse_npy(bytes, "fuzz.npy");
  if (!t.is_ok()) return 0;
  auto again = bulkhead::io::to_npy(*t);
  if (!again.is_ok()) return 0;  // a type .npy can read but bulkhead does not write
  auto back = bulkhead::io::parse_npy(*again, "again.npy");
  if (!back.is_ok() || back->shape() != t->shape() || back->dtype() != t->dtype() || back->nbytes() != t->nbytes() ||
      (t->nbytes() && std::memcmp(back->raw(), t->raw(), t->nbytes()) != 0))
    std::abort();
  if (t->dtype() == bulkhead::DataType::kString)
    for (int64_t i = 0; i < t->numel(); ++i)
      if (back->strings()[i] != t->strings()[i]) std::abort();
  return 0;
}
