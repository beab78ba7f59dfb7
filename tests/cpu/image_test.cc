// ImageDecoder beyond the conformance cases (one small image of each format): hostile and
// broken streams — unknown formats, truncation at every length, images that promise more
// pixels than the limit — each a clear error, never a crash or a huge allocation; and the
// BMP and PNM variants decoded here rather than by a library.
#include <gtest/gtest.h>

#include <fstream>
#include <string>
#include <vector>

#include "backends/cpu/kernels/image_decode.h"
#include "bulkhead/bulkhead.hpp"
#include "onnx/onnx_pb.h"
#include "support/test_util.h"

namespace bulkhead::test {
namespace {

using cpu::decode_image;

std::string decode_error(const std::string& bytes) {
  int64_t h = 0, w = 0;
  std::vector<uint8_t> rgb;
  Status st = decode_image(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), &h, &w, &rgb);
  return st.is_ok() ? "" : st.message();
}

// The encoded image of a conformance case.
std::string case_image(const std::string& name) {
  std::ifstream f(shared_dir() + "/onnx-backend-data/node/test_image_decoder_decode_" + name + "/test_data_set_0/input_0.pb",
                  std::ios::binary);
  std::string pb((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  onnx::TensorProto t;
  if (!t.ParseFromString(pb)) throw std::runtime_error("cannot read the image case " + name);
  return t.raw_data();
}

TEST(ImageDecoder, UnknownFormatsAreNamed) {
  EXPECT_NE(decode_error("GIF89a....").find("not an image format ImageDecoder knows (BMP, JPEG, JPEG 2000, PNG, PNM, TIFF, WebP)"),
            std::string::npos);
  EXPECT_NE(decode_error("").find("not an image format"), std::string::npos);
}

TEST(ImageDecoder, EveryTruncationOfEveryFormatIsAnErrorOrAnImage) {
  for (const char* name : {"bmp_rgb", "jpeg_rgb", "jpeg2k_rgb", "png_rgb", "pnm_rgb", "tiff_rgb", "webp_rgb"}) {
    const std::string full = case_image(name);
    ASSERT_EQ(decode_error(full), "") << name;
    for (size_t n = 0; n < full.size(); n += std::max<size_t>(1, full.size() / 97)) {
      int64_t h = 0, w = 0;
      std::vector<uint8_t> rgb;
      Status st = decode_image(reinterpret_cast<const uint8_t*>(full.data()), n, &h, &w, &rgb);
      // Some decoders give a partial image for a cut stream (libjpeg fills the rest); any
      // image must still be whole.
      if (st.is_ok()) EXPECT_EQ(rgb.size(), static_cast<size_t>(h * w * 3)) << name << " cut at " << n;
      else EXPECT_NE(st.message().find("image"), std::string::npos) << st.message();
    }
  }
}

std::string le32(uint32_t v) { return std::string{char(v), char(v >> 8), char(v >> 16), char(v >> 24)}; }
std::string le16(uint16_t v) { return std::string{char(v), char(v >> 8)}; }

std::string bmp(int32_t w, int32_t h, uint16_t bpp, const std::string& palette, const std::string& pixels) {
  std::string info = le32(40) + le32(static_cast<uint32_t>(w)) + le32(static_cast<uint32_t>(h)) + le16(1) + le16(bpp) + le32(0) +
                     le32(static_cast<uint32_t>(pixels.size())) + le32(2835) + le32(2835) +
                     le32(static_cast<uint32_t>(palette.size() / 4)) + le32(0);
  const uint32_t at = 14 + 40 + static_cast<uint32_t>(palette.size());
  return "BM" + le32(at + static_cast<uint32_t>(pixels.size())) + le32(0) + le32(at) + info + palette + pixels;
}

TEST(ImageDecoder, BmpVariantsAndLies) {
  // 2x2, 8-bit palette, top-down (negative height); rows padded to 4 bytes.
  const std::string palette = std::string("\x00\x00\xff\x00", 4) + std::string("\xff\x00\x00\x00", 4);  // red, blue (BGR0)
  const std::string rows = std::string("\x00\x01\x00\x00", 4) + std::string("\x01\x00\x00\x00", 4);
  int64_t h = 0, w = 0;
  std::vector<uint8_t> rgb;
  const std::string ok = bmp(2, -2, 8, palette, rows);
  ASSERT_TRUE(decode_image(reinterpret_cast<const uint8_t*>(ok.data()), ok.size(), &h, &w, &rgb).is_ok());
  ASSERT_EQ(rgb.size(), 12u);
  EXPECT_EQ(rgb[0], 255);  // (0,0) red
  EXPECT_EQ(rgb[5], 255);  // (0,1) blue
  EXPECT_EQ(rgb[8], 255);  // (1,0) blue
  EXPECT_NE(decode_error(bmp(2, 2, 8, palette, std::string("\x00\x05\x00\x00\x00\x00\x00\x00", 8))).find("names palette entry 5 of 2"),
            std::string::npos);
  EXPECT_NE(decode_error(bmp(100000, 100000, 24, "", "")).find("BMP image is 100000x100000 pixels: beyond the supported"),
            std::string::npos);
  EXPECT_NE(decode_error(bmp(64, 64, 24, "", std::string(100, '\0'))).find("the pixel rows run past the end of the file"),
            std::string::npos);
  EXPECT_NE(decode_error(bmp(2, 2, 16, "", std::string(16, '\0'))).find("16 bits a pixel are not supported"), std::string::npos);
}

TEST(ImageDecoder, PnmVariantsAndLies) {
  int64_t h = 0, w = 0;
  std::vector<uint8_t> rgb;
  const std::string ascii = "P2\n# a comment\n2 1\n15\n0 15\n";
  ASSERT_TRUE(decode_image(reinterpret_cast<const uint8_t*>(ascii.data()), ascii.size(), &h, &w, &rgb).is_ok());
  ASSERT_EQ(rgb.size(), 6u);
  EXPECT_EQ(rgb[0], 0);
  EXPECT_EQ(rgb[3], 255);  // maxval 15 scaled to 255
  const std::string bits = std::string("P4\n3 1\n") + char(0xa0);  // 1 0 1: black white black
  ASSERT_TRUE(decode_image(reinterpret_cast<const uint8_t*>(bits.data()), bits.size(), &h, &w, &rgb).is_ok());
  EXPECT_EQ(rgb[0], 0);
  EXPECT_EQ(rgb[3], 255);
  EXPECT_NE(decode_error("P6\n99999999999 2\n255\n").find("bad width or height"), std::string::npos);
  EXPECT_NE(decode_error("P6\n4 4\n255\nabc").find("the samples run past the end of the file"), std::string::npos);
  EXPECT_NE(decode_error("P5\n2 2\n65535\n").find("maxval 65535 (16-bit samples) is not supported"), std::string::npos);
  EXPECT_NE(decode_error("P2\n1 1\n10\n11\n").find("a sample exceeds maxval"), std::string::npos);
}

TEST(ImageDecoder, ASessionReportsTheNodeAndRefusesABadPixelFormat) {
  Env env;
  auto bad = env.load_bytes(model_text_bytes(R"(<ir_version: 9, opset_import: ["" : 20]>
g (uint8[N] x) => (uint8[H,W,C] y) { y = ImageDecoder <pixel_format = "CMYK"> (x) })"),
                            "m");
  ASSERT_FALSE(bad.is_ok());
  EXPECT_NE(bad.status().message().find("node 'ImageDecoder_0' (ImageDecoder): pixel_format must be RGB, BGR or Grayscale, got 'CMYK'"),
            std::string::npos)
      << bad.status().to_string();
  auto s = env.load_bytes(model_text_bytes(R"(<ir_version: 9, opset_import: ["" : 20]>
g (uint8[N] x) => (uint8[H,W,C] y) { y = ImageDecoder <pixel_format = "Grayscale"> (x) })"),
                          "m");
  ASSERT_TRUE(s.is_ok()) << s.status().to_string();
  std::string junk = "\x89PNG\r\n\x1a\n garbage";
  auto r = s->run({{"x", Tensor::from_vector<uint8_t>(DataType::kUInt8, {static_cast<int64_t>(junk.size())},
                                                      std::vector<uint8_t>(junk.begin(), junk.end()))}});
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("node 'ImageDecoder_0' (ImageDecoder): cannot decode the PNG image: "), std::string::npos)
      << r.status().to_string();
}

}  // namespace
}  // namespace bulkhead::test
