// The push constants of the 2-D convolution shaders (ConvPush in compute_conv.cc). 1-D
// convolutions run as H = 1.
layout(push_constant) uniform P {
  uint c, h, w;     // input channels and plane
  uint oh, ow;      // output plane
  uint kh, kw, sh, sw, ph, pw, dh, dw;  // kernel, strides, leading pads, dilations
  uint cg, mg;      // input and output channels per group
  uint n, z0;       // batch; first (image, group) pair of this dispatch (implicit GEMM)
  uint flags;       // bit 0: bias bound; bit 1: summand bound; bits 8..: post-op count
  uint codes;
  float args[12];
} p;
