// 2-D convolution as an implicit GEMM, NCHW, float32: per (image, group), y[m][q] =
// sum_k W[m][k] * X_col[k][q] with k = (input channel, kh, kw) and q the output pixel,
// the im2col matrix gathered on the fly. Tiles as in compute_matmul.comp (64x64 per
// workgroup, 4x4 per invocation); the epilogue adds the bias, the fused post-ops and the
// summand. Bindings: x, w, bias (w when absent), summand (x when absent), y.
#version 450
#extension GL_GOOGLE_include_directive : require
layout(local_size_x = 16, local_size_y = 16) in;
layout(std430, binding = 0) readonly buffer X { float x[]; };
layout(std430, binding = 1) readonly buffer W { float wt[]; };
layout(std430, binding = 2) readonly buffer Bias { float bias[]; };
layout(std430, binding = 3) readonly buffer S { float sum[]; };
layout(std430, binding = 4) writeonly buffer Y { float y[]; };
#include "compute_conv_push.glsl"
#include "compute_post.glsl"

const uint TILE = 64, TK = 16;
shared float sa[TK][TILE];
shared float sb[TK][TILE];

void main() {
  const uint groups = p.c / p.cg;
  const uint z = p.z0 + gl_WorkGroupID.z;
  const uint img = z / groups, g = z % groups;
  const uint khw = p.kh * p.kw, kt = p.cg * khw, pix = p.oh * p.ow;
  const uint x0 = (img * p.c + g * p.cg) * p.h * p.w;
  const uint w0 = g * p.mg * kt;
  const uint row0 = gl_WorkGroupID.y * TILE, col0 = gl_WorkGroupID.x * TILE;
  const uint tx = gl_LocalInvocationID.x, ty = gl_LocalInvocationID.y;
  const uint tid = ty * 16 + tx;
  float acc[4][4];
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 4; ++j) acc[i][j] = 0.0;

  // Each invocation loads the same output pixel q of the im2col slice at every step,
  // for reduction indices k = k0 + tid / 64 + 4 l, kept as (channel, kh, kw) digits that
  // advance by TK with carries: no integer division in the loop (CPU drivers such as
  // lavapipe scalarise it).
  const uint q = col0 + tid % TILE;
  const bool q_ok = q < pix;
  const int ih0 = int((q / p.ow) * p.sh) - int(p.ph), iw0 = int((q % p.ow) * p.sw) - int(p.pw);
  const uint step_c = TK / khw, step_a = (TK / p.kw) % p.kh, step_b = TK % p.kw;
  uint kc[4], ka[4], kb[4];
  for (uint l = 0; l < 4; ++l) {
    const uint k = tid / TILE + 4 * l;
    kc[l] = k / khw;
    ka[l] = (k % khw) / p.kw;
    kb[l] = k % p.kw;
  }

  for (uint k0 = 0; k0 < kt; k0 += TK) {
    for (uint l = 0; l < 4; ++l) {
      const uint e = tid + l * 256;
      const uint ar = e / TK, ak = e % TK;
      const uint gr = row0 + ar, gk = k0 + ak;
      sa[ak][ar] = gr < p.mg && gk < kt ? wt[w0 + gr * kt + gk] : 0.0;
      float v = 0.0;
      if (q_ok && kc[l] < p.cg) {
        const int ih = ih0 + int(ka[l] * p.dh), iw = iw0 + int(kb[l] * p.dw);
        if (ih >= 0 && ih < int(p.h) && iw >= 0 && iw < int(p.w)) v = x[x0 + (kc[l] * p.h + uint(ih)) * p.w + uint(iw)];
      }
      sb[tid / TILE + 4 * l][tid % TILE] = v;
      kb[l] += step_b;
      if (kb[l] >= p.kw) {
        kb[l] -= p.kw;
        ++ka[l];
      }
      ka[l] += step_a;
      if (ka[l] >= p.kh) {
        ka[l] -= p.kh;
        ++kc[l];
      }
      kc[l] += step_c;
    }
    barrier();
    for (uint kk = 0; kk < TK; ++kk) {
      float av[4], bv[4];
      for (int i = 0; i < 4; ++i) av[i] = sa[kk][ty + 16 * i];
      for (int j = 0; j < 4; ++j) bv[j] = sb[kk][tx + 16 * j];
      for (int i = 0; i < 4; ++i)
        for (int j = 0; j < 4; ++j) acc[i][j] = fma(av[i], bv[j], acc[i][j]);
    }
    barrier();
  }

  const uint nops = p.flags >> 8;
  for (int i = 0; i < 4; ++i) {
    const uint m = row0 + ty + 16 * i;
    if (m >= p.mg) continue;
    const uint mo = g * p.mg + m;
    const float b = (p.flags & 1u) != 0 ? bias[mo] : 0.0;
    const uint y0 = (img * groups * p.mg + mo) * pix;
    for (int j = 0; j < 4; ++j) {
      const uint q = col0 + tx + 16 * j;
      if (q >= pix) continue;
      const float s = (p.flags & 2u) != 0 ? sum[y0 + q] : 0.0;
      y[y0 + q] = post_ops(acc[i][j] + b, nops, s);
    }
  }
}
