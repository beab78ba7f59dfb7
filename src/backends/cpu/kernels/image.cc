// ImageDecoder (opset 20): an encoded image (uint8 bytes) to [H, W, 3] RGB or BGR, or
// [H, W, 1] grayscale, as the ONNX reference (Pillow) decodes it.
//
// JPEG, PNG, TIFF, WebP and JPEG 2000 are decoded by Debian's libjpeg-turbo, libpng,
// libtiff, libwebp and OpenJPEG; BMP and PNM (formats of a header and raw rows) here, every
// offset and size checked against the bytes there are. The format is told by its magic
// bytes, never by a name. Images larger than 2^27 pixels or 2^20 on a side are refused
// before anything is allocated (a small file can promise a huge image). Libraries report
// errors through per-decode handlers (no process-wide error state is changed); grayscale is
// Pillow's ITU-R 601 luma, (19595 R + 38470 G + 7471 B + 2^15) >> 16.
#include <cstddef>
#include <cstdio>  // jpeglib.h needs size_t and FILE first
#include <jpeglib.h>
#include <openjpeg.h>
#include <png.h>
#include <tiffio.h>
#include <webp/decode.h>

#include <algorithm>
#include <csetjmp>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "backends/cpu/cpu_kernels.h"
#include "backends/cpu/cpu_util.h"
#include "backends/cpu/kernels/image_decode.h"

namespace bulkhead::cpu {
namespace {

constexpr int64_t kMaxSide = int64_t{1} << 20;
constexpr int64_t kMaxPixels = int64_t{1} << 27;

struct Rgb {
  int64_t w = 0, h = 0;
  std::vector<uint8_t> px;  // h * w * 3, RGB
};

Status check_size(const char* format, int64_t w, int64_t h) {
  if (w < 1 || h < 1 || w > kMaxSide || h > kMaxSide || w * h > kMaxPixels)
    return invalid_argument(std::string("the ") + format + " image is " + std::to_string(w) + "x" + std::to_string(h) +
                            " pixels: beyond the supported 2^20 a side and 2^27 in all");
  return Status::ok();
}

Status corrupt(const char* format, const std::string& why) {
  return invalid_argument(std::string("cannot decode the ") + format + " image: " + why);
}

// ---------------------------------------------------------------------------------------
// JPEG (libjpeg-turbo): errors longjmp back here instead of exiting the process. No object
// with a destructor is created between setjmp and the calls that may jump.

struct JpegError {
  jpeg_error_mgr mgr;
  jmp_buf jump;
  char message[JMSG_LENGTH_MAX];
};

void jpeg_fail(j_common_ptr c) {
  auto* e = reinterpret_cast<JpegError*>(c->err);
  (*c->err->format_message)(c, e->message);
  longjmp(e->jump, 1);
}
void jpeg_quiet(j_common_ptr, int) {}

// Returns an empty string on success, else the library's message.
std::string jpeg_decode(const uint8_t* p, size_t n, Rgb* out, bool* too_big) {
  jpeg_decompress_struct cinfo;
  JpegError err;
  cinfo.err = jpeg_std_error(&err.mgr);
  err.mgr.error_exit = jpeg_fail;
  err.mgr.emit_message = jpeg_quiet;
  err.message[0] = '\0';
  if (setjmp(err.jump)) {
    jpeg_destroy_decompress(&cinfo);
    return err.message[0] ? err.message : "corrupt data";
  }
  jpeg_create_decompress(&cinfo);
  jpeg_mem_src(&cinfo, p, static_cast<unsigned long>(n));
  jpeg_read_header(&cinfo, TRUE);
  cinfo.out_color_space = JCS_RGB;
  if (!check_size("JPEG", cinfo.image_width, cinfo.image_height).is_ok()) {
    *too_big = true;
    out->w = cinfo.image_width;
    out->h = cinfo.image_height;
    jpeg_destroy_decompress(&cinfo);
    return "";
  }
  jpeg_start_decompress(&cinfo);
  out->w = cinfo.output_width;
  out->h = cinfo.output_height;
  out->px.resize(static_cast<size_t>(out->w * out->h * 3));
  while (cinfo.output_scanline < cinfo.output_height) {
    JSAMPROW row = out->px.data() + static_cast<size_t>(cinfo.output_scanline) * static_cast<size_t>(out->w) * 3;
    jpeg_read_scanlines(&cinfo, &row, 1);
  }
  jpeg_finish_decompress(&cinfo);
  jpeg_destroy_decompress(&cinfo);
  return "";
}

// ---------------------------------------------------------------------------------------
// PNG (libpng, the classic interface with its transforms: palette and low bit depths
// expanded, 16 bits to 8, gray to RGB, alpha dropped — Pillow's convert("RGB") — and no
// gamma correction, as Pillow applies none).

struct PngSource {
  const uint8_t* p;
  size_t n, pos;
  char message[256];
  std::vector<png_bytep> rows;  // here, not a local: it must survive a longjmp
};

void png_read_mem(png_structp png, png_bytep dst, png_size_t len) {
  auto* s = static_cast<PngSource*>(png_get_io_ptr(png));
  if (len > s->n - s->pos) png_error(png, "truncated data");
  std::memcpy(dst, s->p + s->pos, len);
  s->pos += len;
}
void png_fail(png_structp png, png_const_charp msg) {
  auto* s = static_cast<PngSource*>(png_get_error_ptr(png));
  std::snprintf(s->message, sizeof s->message, "%s", msg);
  png_longjmp(png, 1);
}
void png_quiet(png_structp, png_const_charp) {}

std::string png_decode(const uint8_t* p, size_t n, Rgb* out, bool* too_big) {
  PngSource src{p, n, 0, {0}, {}};
  png_structp png = png_create_read_struct(PNG_LIBPNG_VER_STRING, &src, png_fail, png_quiet);
  if (!png) return "out of memory";
  png_infop info = png_create_info_struct(png);
  if (!info) {
    png_destroy_read_struct(&png, nullptr, nullptr);
    return "out of memory";
  }
  if (setjmp(png_jmpbuf(png))) {
    png_destroy_read_struct(&png, &info, nullptr);
    return src.message[0] ? src.message : "corrupt data";
  }
  png_set_read_fn(png, &src, png_read_mem);
  png_read_info(png, info);
  const png_uint_32 w = png_get_image_width(png, info), h = png_get_image_height(png, info);
  if (!check_size("PNG", w, h).is_ok()) {
    *too_big = true;
    out->w = w;
    out->h = h;
    png_destroy_read_struct(&png, &info, nullptr);
    return "";
  }
  png_set_expand(png);
  png_set_strip_16(png);
  png_set_gray_to_rgb(png);
  png_set_strip_alpha(png);
  png_set_interlace_handling(png);
  png_read_update_info(png, info);
  if (png_get_rowbytes(png, info) != static_cast<size_t>(w) * 3) png_error(png, "unexpected row layout after conversion to RGB");
  out->w = w;
  out->h = h;
  out->px.resize(static_cast<size_t>(w) * h * 3);
  src.rows.resize(h);
  for (png_uint_32 y = 0; y < h; ++y) src.rows[y] = out->px.data() + static_cast<size_t>(y) * w * 3;
  png_read_image(png, src.rows.data());
  png_read_end(png, nullptr);
  png_destroy_read_struct(&png, &info, nullptr);
  return "";
}

// ---------------------------------------------------------------------------------------
// TIFF (libtiff, read from memory through client procedures, errors to a per-handle
// handler).

struct TiffSource {
  const uint8_t* p;
  toff_t n, pos;
  std::string message;
};

tsize_t tiff_read(thandle_t h, tdata_t buf, tsize_t size) {
  auto* s = static_cast<TiffSource*>(h);
  if (size < 0) return -1;
  const toff_t left = s->pos < s->n ? s->n - s->pos : 0;
  const toff_t k = std::min<toff_t>(left, static_cast<toff_t>(size));
  std::memcpy(buf, s->p + s->pos, k);
  s->pos += k;
  return static_cast<tsize_t>(k);
}
tsize_t tiff_write(thandle_t, tdata_t, tsize_t) { return -1; }
toff_t tiff_seek(thandle_t h, toff_t off, int whence) {
  auto* s = static_cast<TiffSource*>(h);
  toff_t base = whence == SEEK_SET ? 0 : whence == SEEK_CUR ? s->pos : s->n;
  if (off > (~toff_t{0}) - base) return static_cast<toff_t>(-1);
  s->pos = base + off;
  return s->pos;
}
int tiff_close(thandle_t) { return 0; }
toff_t tiff_size(thandle_t h) { return static_cast<TiffSource*>(h)->n; }
int tiff_map(thandle_t, tdata_t*, toff_t*) { return 0; }
void tiff_unmap(thandle_t, tdata_t, toff_t) {}
int tiff_error(TIFF*, void* user, const char* module, const char* fmt, va_list ap) {
  char buf[512];
  std::vsnprintf(buf, sizeof buf, fmt, ap);
  auto* s = static_cast<TiffSource*>(user);
  if (s->message.empty()) s->message = buf;
  return 1;
}
int tiff_warning(TIFF*, void*, const char*, const char*, va_list) { return 1; }

std::string tiff_decode(const uint8_t* p, size_t n, Rgb* out, bool* too_big) {
  TiffSource src{p, n, 0, {}};
  TIFFOpenOptions* opts = TIFFOpenOptionsAlloc();
  if (!opts) return "out of memory";
  TIFFOpenOptionsSetErrorHandlerExtR(opts, tiff_error, &src);
  TIFFOpenOptionsSetWarningHandlerExtR(opts, tiff_warning, &src);
  TIFF* tif = TIFFClientOpenExt("memory", "rm", &src, tiff_read, tiff_write, tiff_seek, tiff_close, tiff_size, tiff_map,
                                tiff_unmap, opts);
  TIFFOpenOptionsFree(opts);
  if (!tif) return src.message.empty() ? "not a readable TIFF" : src.message;
  uint32_t w = 0, h = 0;
  TIFFGetField(tif, TIFFTAG_IMAGEWIDTH, &w);
  TIFFGetField(tif, TIFFTAG_IMAGELENGTH, &h);
  if (!check_size("TIFF", w, h).is_ok()) {
    *too_big = true;
    out->w = w;
    out->h = h;
    TIFFClose(tif);
    return "";
  }
  std::vector<uint32_t> raster(static_cast<size_t>(w) * h);
  const int ok = TIFFReadRGBAImageOriented(tif, w, h, raster.data(), ORIENTATION_TOPLEFT, 0);
  TIFFClose(tif);
  if (!ok) return src.message.empty() ? "cannot read the pixels" : src.message;
  out->w = w;
  out->h = h;
  out->px.resize(static_cast<size_t>(w) * h * 3);
  for (size_t i = 0; i < raster.size(); ++i) {
    out->px[3 * i] = static_cast<uint8_t>(TIFFGetR(raster[i]));
    out->px[3 * i + 1] = static_cast<uint8_t>(TIFFGetG(raster[i]));
    out->px[3 * i + 2] = static_cast<uint8_t>(TIFFGetB(raster[i]));
  }
  return "";
}

// ---------------------------------------------------------------------------------------
// WebP (libwebp).

std::string webp_decode(const uint8_t* p, size_t n, Rgb* out, bool* too_big) {
  int w = 0, h = 0;
  if (!WebPGetInfo(p, n, &w, &h)) return "not a valid WebP bitstream";
  out->w = w;
  out->h = h;
  if (!check_size("WebP", w, h).is_ok()) {
    *too_big = true;
    return "";
  }
  out->px.resize(static_cast<size_t>(w) * h * 3);
  if (!WebPDecodeRGBInto(p, n, out->px.data(), out->px.size(), w * 3)) return "corrupt data";
  return "";
}

// ---------------------------------------------------------------------------------------
// JPEG 2000 (OpenJPEG), a JP2 file or a raw codestream.

struct J2kSource {
  const uint8_t* p;
  OPJ_SIZE_T n, pos;
  std::string message;
};

OPJ_SIZE_T j2k_read(void* buf, OPJ_SIZE_T size, void* user) {
  auto* s = static_cast<J2kSource*>(user);
  if (s->pos >= s->n) return static_cast<OPJ_SIZE_T>(-1);
  const OPJ_SIZE_T k = std::min(size, s->n - s->pos);
  std::memcpy(buf, s->p + s->pos, k);
  s->pos += k;
  return k;
}
OPJ_OFF_T j2k_skip(OPJ_OFF_T off, void* user) {
  auto* s = static_cast<J2kSource*>(user);
  if (off < 0 && static_cast<OPJ_SIZE_T>(-off) > s->pos) return -1;
  if (off > 0 && static_cast<OPJ_SIZE_T>(off) > s->n - s->pos) off = static_cast<OPJ_OFF_T>(s->n - s->pos);
  s->pos = static_cast<OPJ_SIZE_T>(static_cast<OPJ_OFF_T>(s->pos) + off);
  return off;
}
OPJ_BOOL j2k_seek(OPJ_OFF_T off, void* user) {
  auto* s = static_cast<J2kSource*>(user);
  if (off < 0 || static_cast<OPJ_SIZE_T>(off) > s->n) return OPJ_FALSE;
  s->pos = static_cast<OPJ_SIZE_T>(off);
  return OPJ_TRUE;
}
void j2k_error(const char* msg, void* user) {
  auto* s = static_cast<J2kSource*>(user);
  if (s->message.empty()) {
    s->message = msg;
    while (!s->message.empty() && s->message.back() == '\n') s->message.pop_back();
  }
}
void j2k_quiet(const char*, void*) {}

std::string j2k_decode(const uint8_t* p, size_t n, bool jp2, Rgb* out, bool* too_big) {
  J2kSource src{p, n, 0, {}};
  opj_codec_t* codec = opj_create_decompress(jp2 ? OPJ_CODEC_JP2 : OPJ_CODEC_J2K);
  if (!codec) return "out of memory";
  opj_set_error_handler(codec, j2k_error, &src);
  opj_set_warning_handler(codec, j2k_quiet, &src);
  opj_set_info_handler(codec, j2k_quiet, &src);
  opj_dparameters_t params;
  opj_set_default_decoder_parameters(&params);
  opj_stream_t* stream = opj_stream_create(64 * 1024, OPJ_TRUE);
  opj_image_t* image = nullptr;
  std::string err;
  auto done = [&] {
    if (image) opj_image_destroy(image);
    if (stream) opj_stream_destroy(stream);
    opj_destroy_codec(codec);
  };
  if (!stream || !opj_setup_decoder(codec, &params)) {
    done();
    return "cannot set up the decoder";
  }
  opj_stream_set_user_data(stream, &src, nullptr);
  opj_stream_set_user_data_length(stream, n);
  opj_stream_set_read_function(stream, j2k_read);
  opj_stream_set_skip_function(stream, j2k_skip);
  opj_stream_set_seek_function(stream, j2k_seek);
  if (!opj_read_header(stream, codec, &image) || !image) {
    done();
    return src.message.empty() ? "cannot read the header" : src.message;
  }
  const int64_t w = static_cast<int64_t>(image->x1) - image->x0, h = static_cast<int64_t>(image->y1) - image->y0;
  out->w = w;
  out->h = h;
  if (!check_size("JPEG 2000", w, h).is_ok()) {
    *too_big = true;
    done();
    return "";
  }
  if (!opj_decode(codec, stream, image) || !opj_end_decompress(codec, stream)) {
    done();
    return src.message.empty() ? "corrupt data" : src.message;
  }
  const OPJ_UINT32 nc = image->numcomps;
  if (nc != 1 && nc != 3 && nc != 4) {
    done();
    return "images of " + std::to_string(nc) + " components are not supported (1, 3 or 4)";
  }
  for (OPJ_UINT32 c = 0; c < nc; ++c) {
    const opj_image_comp_t& k = image->comps[c];
    if (!k.data || k.w != static_cast<OPJ_UINT32>(w) || k.h != static_cast<OPJ_UINT32>(h) || k.prec < 1 || k.prec > 16) {
      done();
      return "subsampled components or precisions beyond 16 bits are not supported";
    }
  }
  out->px.resize(static_cast<size_t>(w * h * 3));
  for (int c = 0; c < 3; ++c) {
    const opj_image_comp_t& k = image->comps[nc == 1 ? 0 : c];
    const int shift = static_cast<int>(k.prec) - 8;
    const int offset = k.sgnd ? 1 << (k.prec - 1) : 0;
    for (int64_t i = 0; i < w * h; ++i) {
      int v = k.data[i] + offset;
      v = shift > 0 ? v >> shift : v << -shift;
      out->px[static_cast<size_t>(3 * i + c)] = static_cast<uint8_t>(std::clamp(v, 0, 255));
    }
  }
  done();
  return "";
}

// ---------------------------------------------------------------------------------------
// BMP: BITMAPCOREHEADER (12), BITMAPINFOHEADER (40) and its V4/V5 extensions; uncompressed
// (BI_RGB) rows of 1, 4, 8 (palette), 24 or 32 bits (the fourth byte ignored, as Pillow
// does), bottom-up or top-down.

uint32_t le32(const uint8_t* p) { return p[0] | (p[1] << 8) | (p[2] << 16) | (static_cast<uint32_t>(p[3]) << 24); }
uint16_t le16(const uint8_t* p) { return static_cast<uint16_t>(p[0] | (p[1] << 8)); }

Status bmp_decode(const uint8_t* p, size_t n, Rgb* out) {
  if (n < 26) return corrupt("BMP", "the file is shorter than its headers");
  const uint32_t data_at = le32(p + 10), hsize = le32(p + 14);
  if (hsize != 12 && hsize != 40 && hsize != 52 && hsize != 56 && hsize != 108 && hsize != 124)
    return corrupt("BMP", "unknown header size " + std::to_string(hsize));
  if (14 + static_cast<size_t>(hsize) > n) return corrupt("BMP", "the file is shorter than its headers");
  int64_t w, h;
  uint32_t bpp, compression = 0, colors = 0;
  if (hsize == 12) {
    w = le16(p + 18);
    h = static_cast<int16_t>(le16(p + 20));
    bpp = le16(p + 24);
  } else {
    w = static_cast<int32_t>(le32(p + 18));
    h = static_cast<int32_t>(le32(p + 22));
    bpp = le16(p + 28);
    compression = le32(p + 30);
    colors = le32(p + 46);
  }
  const bool top_down = h < 0;
  if (top_down) h = -h;
  BH_RETURN_IF_ERROR(check_size("BMP", w, h));
  if (compression != 0) return invalid_argument("cannot decode the BMP image: compression " + std::to_string(compression) + " is not supported (uncompressed only)");
  if (bpp != 1 && bpp != 4 && bpp != 8 && bpp != 24 && bpp != 32)
    return invalid_argument("cannot decode the BMP image: " + std::to_string(bpp) + " bits a pixel are not supported (1, 4, 8, 24, 32)");
  std::vector<uint8_t> palette;  // RGB triples
  if (bpp <= 8) {
    const uint32_t most = 1u << bpp;
    if (colors == 0 || colors > most) colors = most;
    const size_t entry = hsize == 12 ? 3 : 4, at = 14 + hsize;
    if (at + colors * entry > n) return corrupt("BMP", "the palette runs past the end of the file");
    for (uint32_t i = 0; i < colors; ++i) {
      const uint8_t* e = p + at + i * entry;
      palette.insert(palette.end(), {e[2], e[1], e[0]});
    }
  }
  const size_t stride = ((static_cast<size_t>(w) * bpp + 31) / 32) * 4;
  if (data_at > n || stride * static_cast<size_t>(h) > n - data_at) return corrupt("BMP", "the pixel rows run past the end of the file");
  out->w = w;
  out->h = h;
  out->px.resize(static_cast<size_t>(w * h * 3));
  for (int64_t y = 0; y < h; ++y) {
    const uint8_t* row = p + data_at + stride * static_cast<size_t>(top_down ? y : h - 1 - y);
    uint8_t* o = out->px.data() + static_cast<size_t>(y * w * 3);
    for (int64_t x = 0; x < w; ++x, o += 3) {
      if (bpp >= 24) {
        const uint8_t* q = row + x * (bpp / 8);
        o[0] = q[2];
        o[1] = q[1];
        o[2] = q[0];
        continue;
      }
      const size_t bit = static_cast<size_t>(x) * bpp;
      const uint32_t idx = (row[bit / 8] >> (8 - bpp - bit % 8)) & ((1u << bpp) - 1);
      if (idx >= colors) return corrupt("BMP", "a pixel names palette entry " + std::to_string(idx) + " of " + std::to_string(colors));
      std::memcpy(o, palette.data() + 3 * idx, 3);
    }
  }
  return Status::ok();
}

// ---------------------------------------------------------------------------------------
// PNM: P1-P6 (bitmap, graymap, pixmap; ASCII or binary), maxval up to 255 (scaled to
// 0-255, rounding, where smaller).

Status pnm_decode(const uint8_t* p, size_t n, Rgb* out) {
  size_t pos = 2;
  const char kind = static_cast<char>(p[1]);
  auto skip_space = [&] {
    while (pos < n) {
      if (p[pos] == '#') {
        while (pos < n && p[pos] != '\n') ++pos;
      } else if (p[pos] == ' ' || p[pos] == '\t' || p[pos] == '\n' || p[pos] == '\r' || p[pos] == '\v' || p[pos] == '\f') {
        ++pos;
      } else {
        break;
      }
    }
  };
  auto number = [&](int64_t limit, int64_t* v) -> bool {
    skip_space();
    if (pos >= n || p[pos] < '0' || p[pos] > '9') return false;
    int64_t x = 0;
    while (pos < n && p[pos] >= '0' && p[pos] <= '9') {
      x = x * 10 + (p[pos++] - '0');
      if (x > limit) return false;
    }
    *v = x;
    return true;
  };
  int64_t w = 0, h = 0, maxval = 1;
  if (!number(kMaxSide, &w) || !number(kMaxSide, &h)) return corrupt("PNM", "bad width or height");
  const bool bitmap = kind == '1' || kind == '4';
  if (!bitmap && (!number(65535, &maxval) || maxval < 1)) return corrupt("PNM", "bad maxval");
  if (maxval > 255) return invalid_argument("cannot decode the PNM image: maxval " + std::to_string(maxval) + " (16-bit samples) is not supported");
  BH_RETURN_IF_ERROR(check_size("PNM", w, h));
  const bool ascii = kind <= '3';
  const int channels = kind == '3' || kind == '6' ? 3 : 1;
  if (!ascii) ++pos;  // the single whitespace after the header
  out->w = w;
  out->h = h;
  out->px.resize(static_cast<size_t>(w * h * 3));
  auto put = [&](int64_t i, int c, int64_t v) -> bool {
    if (v > maxval) return false;
    const uint8_t s = bitmap ? (v ? 0 : 255) : static_cast<uint8_t>((v * 255 + maxval / 2) / maxval);
    if (channels == 3) out->px[static_cast<size_t>(3 * i + c)] = s;
    else std::fill_n(out->px.begin() + 3 * i, 3, s);
    return true;
  };
  if (ascii) {
    for (int64_t i = 0; i < w * h; ++i)
      for (int c = 0; c < channels; ++c) {
        int64_t v = 0;
        if (bitmap) {  // P1 digits need no separators
          skip_space();
          if (pos >= n || (p[pos] != '0' && p[pos] != '1')) return corrupt("PNM", "the samples end early");
          v = p[pos++] - '0';
        } else if (!number(65535, &v)) {
          return corrupt("PNM", "the samples end early");
        }
        if (!put(i, c, v)) return corrupt("PNM", "a sample exceeds maxval");
      }
    return Status::ok();
  }
  if (bitmap) {
    const size_t stride = static_cast<size_t>((w + 7) / 8);
    if (pos > n || stride * static_cast<size_t>(h) > n - pos) return corrupt("PNM", "the rows run past the end of the file");
    for (int64_t y = 0; y < h; ++y)
      for (int64_t x = 0; x < w; ++x) put(y * w + x, 0, (p[pos + y * stride + x / 8] >> (7 - x % 8)) & 1);
    return Status::ok();
  }
  const size_t need = static_cast<size_t>(w * h * channels);
  if (pos > n || need > n - pos) return corrupt("PNM", "the samples run past the end of the file");
  for (int64_t i = 0; i < w * h; ++i)
    for (int c = 0; c < channels; ++c)
      if (!put(i, c, p[pos + i * channels + c])) return corrupt("PNM", "a sample exceeds maxval");
  return Status::ok();
}

// ---------------------------------------------------------------------------------------

Status decode_any(const uint8_t* p, size_t n, Rgb* out) {
  auto starts = [&](const char* magic, size_t len, size_t at = 0) { return n >= at + len && std::memcmp(p + at, magic, len) == 0; };
  std::string err;
  bool too_big = false;
  const char* format = nullptr;
  if (starts("\xff\xd8\xff", 3)) {
    format = "JPEG";
    err = jpeg_decode(p, n, out, &too_big);
  } else if (starts("\x89PNG\r\n\x1a\n", 8)) {
    format = "PNG";
    err = png_decode(p, n, out, &too_big);
  } else if (starts("II*\0", 4) || starts("MM\0*", 4)) {
    format = "TIFF";
    err = tiff_decode(p, n, out, &too_big);
  } else if (starts("RIFF", 4) && starts("WEBP", 4, 8)) {
    format = "WebP";
    err = webp_decode(p, n, out, &too_big);
  } else if (starts("\0\0\0\x0cjP  \r\n\x87\n", 12) || starts("\xff\x4f\xff\x51", 4)) {
    format = "JPEG 2000";
    err = j2k_decode(p, n, p[0] == 0, out, &too_big);
  } else if (starts("BM", 2)) {
    return bmp_decode(p, n, out);
  } else if (n >= 2 && p[0] == 'P' && p[1] >= '1' && p[1] <= '6') {
    return pnm_decode(p, n, out);
  } else {
    return invalid_argument("the encoded stream is not an image format ImageDecoder knows (BMP, JPEG, JPEG 2000, PNG, PNM, TIFF, WebP)");
  }
  if (too_big) return check_size(format, out->w, out->h);
  if (!err.empty()) return corrupt(format, err);
  return Status::ok();
}

}  // namespace

Status decode_image(const uint8_t* data, size_t size, int64_t* h, int64_t* w, std::vector<uint8_t>* rgb) {
  Rgb img;
  BH_RETURN_IF_ERROR(decode_any(data, size, &img));
  *h = img.h;
  *w = img.w;
  *rgb = std::move(img.px);
  return Status::ok();
}

namespace {

enum class PixelFormat { kRgb, kBgr, kGray };

Status image_decoder_compute(KernelContext& ctx, PixelFormat pf) {
  const Tensor* x = ctx.input(0);
  if (!x || x->dtype() != DataType::kUInt8 || x->rank() != 1)
    return invalid_argument(ctx.where() + "encoded_stream must be a 1-D uint8 tensor" + (x ? ", got " + x->describe() : std::string()));
  Rgb img;
  Status st = decode_image(x->data<uint8_t>(), static_cast<size_t>(x->numel()), &img.h, &img.w, &img.px);
  if (!st.is_ok()) return Status(st.code(), ctx.where() + st.message());
  const int64_t c = pf == PixelFormat::kGray ? 1 : 3;
  BH_ASSIGN_OR_RETURN(Tensor y, ctx.allocate_output(0, DataType::kUInt8, {img.h, img.w, c}));
  uint8_t* o = y.data<uint8_t>();
  const uint8_t* s = img.px.data();
  for (int64_t i = 0; i < img.w * img.h; ++i, s += 3) {
    if (pf == PixelFormat::kGray) {
      o[i] = static_cast<uint8_t>((s[0] * 19595u + s[1] * 38470u + s[2] * 7471u + 0x8000u) >> 16);
    } else if (pf == PixelFormat::kBgr) {
      o[3 * i] = s[2];
      o[3 * i + 1] = s[1];
      o[3 * i + 2] = s[0];
    } else {
      std::memcpy(o + 3 * i, s, 3);
    }
  }
  return Status::ok();
}

}  // namespace

void register_image_kernels(KernelTable& t) {
  t.add("ImageDecoder", 20, [](const KernelInfo& info) -> Result<std::unique_ptr<Kernel>> {
    const std::string f = info.node.attr_string("pixel_format", "RGB");
    PixelFormat pf;
    if (f == "RGB") pf = PixelFormat::kRgb;
    else if (f == "BGR") pf = PixelFormat::kBgr;
    else if (f == "Grayscale") pf = PixelFormat::kGray;
    else return invalid_argument(info.where() + "pixel_format must be RGB, BGR or Grayscale, got '" + f + "'");
    return make_kernel([pf](KernelContext& ctx) { return image_decoder_compute(ctx, pf); });
  });
}

}  // namespace bulkhead::cpu
