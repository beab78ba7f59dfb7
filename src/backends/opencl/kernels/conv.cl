// Convolutions, NCHW float32, 2-D (1-D as H = 1), geometry in ConvGeo (args.h).
//   conv_gemm       implicit GEMM per (image, group): y[m][q] = sum_k W[m][k] X_col[k][q],
//                   k = (input channel, kh, kw), q the output pixel, the im2col matrix
//                   gathered on the fly; 64x64 tiles per 16x16 work-group, 4x4 per item.
//   conv_direct     one work-item per output, for few output channels per group
//                   (depthwise among them), where the GEMM tiles would sit idle.
//   conv_transpose  one work-item per output gathering the inputs that scatter to it.
//   post_ops        the fused post-ops applied in place (after a broadcast summand).
// Both convolutions end in the epilogue: bias (has_bias), then the post-ops, where
// POST_SUM adds the summand s (same shape as y; has_sum).

float post_ops(float v, const PostOps* p, float s) {
  for (int i = 0; i < p->count; ++i) {
    const float a = p->args[2 * i], b = p->args[2 * i + 1];
    switch (p->codes[i]) {
      case POST_RELU: v = v < 0.0f ? 0.0f : v; break;
      case POST_LEAKY_RELU: v = v < 0.0f ? a * v : v; break;
      case POST_CLIP:
        v = v < a ? a : v;
        v = v > b ? b : v;
        break;
      case POST_HARD_SIGMOID: v = fmax(0.0f, fmin(1.0f, a * v + b)); break;
      case POST_HARD_SWISH: v = v * fmax(0.0f, fmin(1.0f, v * (1.0f / 6.0f) + 0.5f)); break;
      case POST_SIGMOID: v = 1.0f / (1.0f + exp(-v)); break;
      case POST_LINEAR: v = a * v + b; break;
      case POST_SUM: v += s; break;
    }
  }
  return v;
}

#define TILE OCL_TILE
#define TK OCL_TILE_K

kernel __attribute__((reqd_work_group_size(16, 16, 1)))
void conv_gemm(global const float* x, ulong xo, global const float* wt, ulong wo, global const float* bias, ulong bo,
               global const float* sum, ulong so, global float* y, ulong yo, ConvGeo p, PostOps post, int has_bias,
               int has_sum) {
  local float sa[TK][TILE];
  local float sb[TK][TILE];
  const int groups = p.c / p.cg;
  const int z = get_group_id(2), img = z / groups, g = z % groups;
  const int khw = p.kh * p.kw, kt = p.cg * khw, pix = p.oh * p.ow;
  x += xo + (img * p.c + g * p.cg) * p.h * p.w;
  wt += wo + g * p.mg * kt;
  const int row0 = get_group_id(1) * TILE, col0 = get_group_id(0) * TILE;
  const int tx = get_local_id(0), ty = get_local_id(1), tid = ty * 16 + tx;
  float acc[4][4];
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 4; ++j) acc[i][j] = 0.0f;

  // Each work-item loads the same output pixel q of the im2col slice at every step, for
  // reduction indices k = k0 + tid / 64 + 4 l, kept as (channel, kh, kw) digits that
  // advance by TK with carries: no integer division in the loop.
  const int q = col0 + tid % TILE;
  const bool q_ok = q < pix;
  const int ih0 = (q / p.ow) * p.sh - p.ph, iw0 = (q % p.ow) * p.sw - p.pw;
  const int step_c = TK / khw, step_a = (TK / p.kw) % p.kh, step_b = TK % p.kw;
  int kc[4], ka[4], kb[4];
  for (int l = 0; l < 4; ++l) {
    const int k = tid / TILE + 4 * l;
    kc[l] = k / khw;
    ka[l] = (k % khw) / p.kw;
    kb[l] = k % p.kw;
  }
  for (int k0 = 0; k0 < kt; k0 += TK) {
    for (int l = 0; l < 4; ++l) {
      const int e = tid + l * 256, ar = e / TK, ak = e % TK;
      const int gr = row0 + ar, gk = k0 + ak;
      sa[ak][ar] = gr < p.mg && gk < kt ? wt[gr * kt + gk] : 0.0f;
      float v = 0.0f;
      if (q_ok && kc[l] < p.cg) {
        const int ih = ih0 + ka[l] * p.dh, iw = iw0 + kb[l] * p.dw;
        if (ih >= 0 && ih < p.h && iw >= 0 && iw < p.w) v = x[(kc[l] * p.h + ih) * p.w + iw];
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
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int kk = 0; kk < TK; ++kk) {
      float av[4], bv[4];
      for (int i = 0; i < 4; ++i) av[i] = sa[kk][ty + 16 * i];
      for (int j = 0; j < 4; ++j) bv[j] = sb[kk][tx + 16 * j];
      for (int i = 0; i < 4; ++i)
        for (int j = 0; j < 4; ++j) acc[i][j] = fma(av[i], bv[j], acc[i][j]);
    }
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  for (int i = 0; i < 4; ++i) {
    const int m = row0 + ty + 16 * i;
    if (m >= p.mg) continue;
    const int mo = g * p.mg + m;
    const float b = has_bias ? bias[bo + mo] : 0.0f;
    const int y0 = (img * groups * p.mg + mo) * pix;
    for (int j = 0; j < 4; ++j) {
      const int qq = col0 + tx + 16 * j;
      if (qq >= pix) continue;
      y[yo + y0 + qq] = post_ops(acc[i][j] + b, &post, has_sum ? sum[so + y0 + qq] : 0.0f);
    }
  }
}

kernel void conv_direct(global const float* x, ulong xo, global const float* wt, ulong wo, global const float* bias,
                        ulong bo, global const float* sum, ulong so, global float* y, ulong yo, ConvGeo p,
                        PostOps post, int has_bias, int has_sum) {
  const int i = get_global_id(0);
  const int groups = p.c / p.cg, mtot = groups * p.mg, pix = p.oh * p.ow;
  const int q = i % pix, mo = (i / pix) % mtot, img = i / (pix * mtot), g = mo / p.mg;
  const int h0 = (q / p.ow) * p.sh - p.ph, w0 = (q % p.ow) * p.sw - p.pw;
  float acc = 0.0f;
  for (int ci = 0; ci < p.cg; ++ci) {
    global const float* xc = x + xo + (img * p.c + g * p.cg + ci) * p.h * p.w;
    global const float* wc = wt + wo + (mo * p.cg + ci) * p.kh * p.kw;
    for (int a = 0; a < p.kh; ++a) {
      const int ih = h0 + a * p.dh;
      if (ih < 0 || ih >= p.h) continue;
      for (int b = 0; b < p.kw; ++b) {
        const int iw = w0 + b * p.dw;
        if (iw >= 0 && iw < p.w) acc = fma(xc[ih * p.w + iw], wc[a * p.kw + b], acc);
      }
    }
  }
  if (has_bias) acc += bias[bo + mo];
  y[yo + i] = post_ops(acc, &post, has_sum ? sum[so + i] : 0.0f);
}

// W is [C, M / group, KH, KW]; an input pixel ih contributes to output oh = ih * sh - ph + a * dh.
kernel void conv_transpose(global const float* x, ulong xo, global const float* wt, ulong wo,
                           global const float* bias, ulong bo, global float* y, ulong yo, ConvGeo p, int has_bias) {
  const int i = get_global_id(0);
  const int groups = p.c / p.cg, mtot = groups * p.mg, pix = p.oh * p.ow;
  const int q = i % pix, mo = (i / pix) % mtot, img = i / (pix * mtot), g = mo / p.mg, m = mo % p.mg;
  const int oh = q / p.ow + p.ph, ow = q % p.ow + p.pw;
  float acc = 0.0f;
  for (int a = 0; a < p.kh; ++a) {
    const int th = oh - a * p.dh;
    if (th < 0 || th % p.sh != 0 || th / p.sh >= p.h) continue;
    for (int b = 0; b < p.kw; ++b) {
      const int tw = ow - b * p.dw;
      if (tw < 0 || tw % p.sw != 0 || tw / p.sw >= p.w) continue;
      const int pos = (th / p.sh) * p.w + tw / p.sw;
      for (int ci = 0; ci < p.cg; ++ci) {
        const int cin = g * p.cg + ci;
        acc = fma(x[xo + (img * p.c + cin) * p.h * p.w + pos], wt[wo + ((cin * p.mg + m) * p.kh + a) * p.kw + b], acc);
      }
    }
  }
  y[yo + i] = has_bias ? acc + bias[bo + mo] : acc;
}

kernel void post_ops_inplace(global float* y, ulong yo, PostOps post) {
  const size_t i = get_global_id(0);
  y[yo + i] = post_ops(y[yo + i], &post, 0.0f);
}
