// 2-D convolution, NCHW, float32, one invocation per output: for depthwise and other
// convolutions with few output channels per group, where the implicit GEMM's 64-row
// tiles would sit mostly idle. Bindings and epilogue as in compute_conv_gemm.comp.
#version 450
#extension GL_GOOGLE_include_directive : require
layout(local_size_x = 256) in;
layout(std430, binding = 0) readonly buffer X { float x[]; };
layout(std430, binding = 1) readonly buffer W { float wt[]; };
layout(std430, binding = 2) readonly buffer Bias { float bias[]; };
layout(std430, binding = 3) readonly buffer S { float sum[]; };
layout(std430, binding = 4) writeonly buffer Y { float y[]; };
#include "compute_conv_push.glsl"
#include "compute_post.glsl"

void main() {
  const uint i = (gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x) * 256 + gl_LocalInvocationID.x;
  const uint groups = p.c / p.cg, mtot = groups * p.mg, pix = p.oh * p.ow;
  if (i >= p.n * mtot * pix) return;
  const uint q = i % pix, mo = (i / pix) % mtot, img = i / (pix * mtot);
  const uint g = mo / p.mg;
  const int oh0 = int((q / p.ow) * p.sh) - int(p.ph), ow0 = int((q % p.ow) * p.sw) - int(p.pw);
  float acc = 0.0;
  for (uint ci = 0; ci < p.cg; ++ci) {
    const uint xc = ((img * p.c + g * p.cg + ci) * p.h) * p.w;
    const uint wc = (mo * p.cg + ci) * p.kh * p.kw;
    for (uint a = 0; a < p.kh; ++a) {
      const int ih = oh0 + int(a * p.dh);
      if (ih < 0 || ih >= int(p.h)) continue;
      for (uint b = 0; b < p.kw; ++b) {
        const int iw = ow0 + int(b * p.dw);
        if (iw < 0 || iw >= int(p.w)) continue;
        acc = fma(x[xc + uint(ih) * p.w + uint(iw)], wt[wc + a * p.kw + b], acc);
      }
    }
  }
  if ((p.flags & 1u) != 0) acc += bias[mo];
  y[i] = post_ops(acc, p.flags >> 8, (p.flags & 2u) != 0 ? sum[i] : 0.0);
}
