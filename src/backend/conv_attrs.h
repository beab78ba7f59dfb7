// The attributes of an ONNX Conv / ConvTranspose node as written in the model, shared by
// every backend's convolution kernels (each resolves them against its input shapes).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "bulkhead/status.h"
#include "ir/graph.h"

namespace bulkhead {

struct ConvAttrs {
  std::string auto_pad = "NOTSET";
  std::vector<int64_t> kernel_shape, strides, dilations, pads, output_padding, output_shape;
  int64_t group = 1;
  bool has_pads = false;
};

// Kernel sizes, strides, dilations, pads and groups past this are refused: below it every
// output-size computation of a convolution or pooling fits in int64 (dimensions are below
// 2^40), and no real model comes near it.
constexpr int64_t kMaxGeometry = (int64_t{1} << 31) - 1;

// invalid_argument naming `name` when a value of `v` is beyond +-kMaxGeometry.
inline Status check_geometry(const char* name, const std::vector<int64_t>& v, const std::string& where) {
  for (int64_t x : v)
    if (x > kMaxGeometry || x < -kMaxGeometry)
      return invalid_argument(where + "attribute '" + name + "' holds " + std::to_string(x) + ", beyond the supported +-" +
                              std::to_string(kMaxGeometry));
  return Status::ok();
}

inline Status check_conv_attrs(const ConvAttrs& a, const std::string& where) {
  for (auto [name, v] : {std::pair<const char*, const std::vector<int64_t>*>{"kernel_shape", &a.kernel_shape},
                         {"strides", &a.strides}, {"dilations", &a.dilations}, {"pads", &a.pads},
                         {"output_padding", &a.output_padding}, {"output_shape", &a.output_shape}})
    BH_RETURN_IF_ERROR(check_geometry(name, *v, where));
  if (a.group < 1 || a.group > kMaxGeometry)
    return invalid_argument(where + "group must be between 1 and " + std::to_string(kMaxGeometry) + ", got " + std::to_string(a.group));
  return Status::ok();
}

// A 2-D ConvTranspose whose kernel equals its stride, with no dilation, padding, output
// padding or groups: each input pixel writes its own kernel-sized patch of the output
// (a learned upsampling, as in segmentation heads), so the CPU computes it as one matrix
// product and an interleave. `w`: the weight's shape [C, M, kh, kw].
inline bool transpose_is_pixel_product(const ConvAttrs& a, const std::vector<int64_t>& w) {
  if (w.size() != 4 || a.group != 1 || !a.output_shape.empty()) return false;
  if (a.auto_pad != "NOTSET" && a.auto_pad != "VALID") return false;
  if (!a.kernel_shape.empty() && a.kernel_shape != std::vector<int64_t>{w[2], w[3]}) return false;
  if (a.strides != std::vector<int64_t>{w[2], w[3]}) return false;
  for (int64_t d : a.dilations)
    if (d != 1) return false;
  for (int64_t p : a.pads)
    if (p != 0) return false;
  for (int64_t p : a.output_padding)
    if (p != 0) return false;
  return true;
}

inline ConvAttrs parse_conv_attrs(const ir::Node& n) {
  ConvAttrs a;
  a.auto_pad = n.attr_string("auto_pad", "NOTSET");
  a.kernel_shape = n.attr_ints("kernel_shape");
  a.strides = n.attr_ints("strides");
  a.dilations = n.attr_ints("dilations");
  a.has_pads = n.has_attr("pads");
  a.pads = n.attr_ints("pads");
  a.output_padding = n.attr_ints("output_padding");
  a.output_shape = n.attr_ints("output_shape");
  a.group = n.attr_int("group", 1);
  return a;
}

}  // namespace bulkhead
