// The attributes of an ONNX Conv / ConvTranspose node as written in the model, shared by
// every backend's convolution kernels (each resolves them against its input shapes).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ir/graph.h"

namespace bulkhead {

struct ConvAttrs {
  std::string auto_pad = "NOTSET";
  std::vector<int64_t> kernel_shape, strides, dilations, pads, output_padding, output_shape;
  int64_t group = 1;
  bool has_pads = false;
};

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
