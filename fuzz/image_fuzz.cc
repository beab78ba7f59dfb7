// libFuzzer harness: arbitrary bytes as an encoded image for ImageDecoder (every format's
// decoder, by magic bytes). A decoded image must have the size it says.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <vector>

#include "backends/cpu/kernels/image_decode.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  int64_t h = 0, w = 0;
  std::vector<uint8_t> rgb;
  if (!bulkhead::cpu::decode_image(data, size, &h, &w, &rgb).is_ok()) return 0;
  if (h < 1 || w < 1 || rgb.size() != static_cast<size_t>(h * w * 3)) std::abort();
  return 0;
}
