// Batched, tiled float32 matrix product with an optional broadcast addend, for MatMul
// and Gemm: y[b] = alpha * A[b] x B[b] + beta * C. A workgroup of 16x16 invocations
// computes a 64x64 tile of y, 4x4 outputs each, staging 16-deep slices of A and B in
// shared memory. Operands are read through element strides, so transposed operands
// and broadcast batches need no copies; workgroup z is the batch (from batch0).
#version 450
layout(local_size_x = 16, local_size_y = 16) in;
layout(std430, binding = 0) readonly buffer A { float a[]; };
layout(std430, binding = 1) readonly buffer B { float b[]; };
layout(std430, binding = 2) readonly buffer C { float c[]; };
layout(std430, binding = 3) writeonly buffer Y { float y[]; };
layout(push_constant) uniform P {
  uint m, n, k;
  uint a_rs, a_cs;  // A(row, k) = a[a_rs * row + a_cs * k]
  uint b_rs, b_cs;  // B(k, col) = b[b_rs * k + b_cs * col]
  uint c_rs, c_cs;  // C(row, col), 0 along broadcast dimensions
  uint has_c;
  float alpha, beta;
  uint batch0;
  uint rank;  // batch dimensions of y, at most 4
  uint dims[4];
  uint a_bs[4], b_bs[4];  // batch strides of A and B, 0 where broadcast
} p;

const uint TILE = 64, TK = 16;
shared float sa[TK][TILE];
shared float sb[TK][TILE];

void main() {
  const uint batch = p.batch0 + gl_WorkGroupID.z;
  uint oa = 0, ob = 0, rest = batch;
  for (int d = int(p.rank) - 1; d >= 0; --d) {
    uint i = rest % p.dims[d];
    rest /= p.dims[d];
    oa += i * p.a_bs[d];
    ob += i * p.b_bs[d];
  }
  const uint row0 = gl_WorkGroupID.y * TILE, col0 = gl_WorkGroupID.x * TILE;
  const uint tx = gl_LocalInvocationID.x, ty = gl_LocalInvocationID.y;
  const uint tid = ty * 16 + tx;
  float acc[4][4];
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 4; ++j) acc[i][j] = 0.0;

  for (uint k0 = 0; k0 < p.k; k0 += TK) {
    for (uint l = 0; l < 4; ++l) {
      const uint e = tid + l * 256;
      const uint ar = e / TK, ak = e % TK;  // A slice: 64 rows x 16
      const uint gr = row0 + ar, gk = k0 + ak;
      sa[ak][ar] = gr < p.m && gk < p.k ? a[oa + gr * p.a_rs + gk * p.a_cs] : 0.0;
      const uint bk = e / TILE, bc = e % TILE;  // B slice: 16 x 64 columns
      const uint gk2 = k0 + bk, gc = col0 + bc;
      sb[bk][bc] = gk2 < p.k && gc < p.n ? b[ob + gk2 * p.b_rs + gc * p.b_cs] : 0.0;
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

  const uint base = batch * p.m * p.n;
  for (int i = 0; i < 4; ++i) {
    const uint r = row0 + ty + 16 * i;
    if (r >= p.m) continue;
    for (int j = 0; j < 4; ++j) {
      const uint col = col0 + tx + 16 * j;
      if (col >= p.n) continue;
      float v = p.alpha * acc[i][j];
      if (p.has_c != 0) v += p.beta * c[r * p.c_rs + col * p.c_cs];
      y[base + r * p.n + col] = v;
    }
  }
}
