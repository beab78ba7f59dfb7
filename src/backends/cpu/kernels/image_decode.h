// Image decoding for ImageDecoder (image.cc), apart so that its fuzz harness
// (fuzz/image_fuzz.cc) reaches it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "bulkhead/status.h"

namespace bulkhead::cpu {

// Decodes an encoded image (BMP, JPEG, JPEG 2000, PNG, PNM, TIFF, WebP, told by its magic
// bytes) into `rgb` (h * w * 3 bytes, RGB). An unknown format, corrupt data or an image
// beyond 2^20 pixels a side or 2^27 in all is an invalid_argument naming the format and
// the problem (2^27: 134 million pixels, Pillow refuses from 179 million). Thread-safe: no state is shared between calls.
Status decode_image(const uint8_t* data, size_t size, int64_t* h, int64_t* w, std::vector<uint8_t>* rgb);

}  // namespace bulkhead::cpu
