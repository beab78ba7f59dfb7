// Batched, tiled float32 matrix product for MatMul and Gemm (Gemm in args.h):
// y[batch] = alpha * A[batch] x B[batch] + beta * C. A 16x16 work-group computes a 64x64
// tile of y, 4x4 outputs per work-item, staging 16-deep slices of A and B in local memory.
// Operands are read through element strides, so transposed operands and broadcast
// batches need no copies; work-group z is the batch.

#define TILE OCL_TILE
#define TK OCL_TILE_K

kernel __attribute__((reqd_work_group_size(16, 16, 1)))
void matmul(global const float* a, ulong ao, global const float* b, ulong bo, global const float* c, ulong co,
            global float* y, ulong yo, Gemm p) {
  local float sa[TK][TILE];
  local float sb[TK][TILE];
  const int batch = get_group_id(2);
  int rest = batch;
  for (int d = p.rank - 1; d >= 0; --d) {
    const int i = rest % p.dims[d];
    rest /= p.dims[d];
    ao += i * p.a_bs[d];
    bo += i * p.b_bs[d];
  }
  a += ao;
  b += bo;
  const int row0 = get_group_id(1) * TILE, col0 = get_group_id(0) * TILE;
  const int tx = get_local_id(0), ty = get_local_id(1), tid = ty * 16 + tx;
  float acc[4][4];
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 4; ++j) acc[i][j] = 0.0f;
  for (int k0 = 0; k0 < p.k; k0 += TK) {
    for (int l = 0; l < 4; ++l) {
      const int e = tid + l * 256;
      const int ar = e / TK, ak = e % TK;  // A slice: 64 rows x 16
      const int gr = row0 + ar, gk = k0 + ak;
      sa[ak][ar] = gr < p.m && gk < p.k ? a[gr * p.a_rs + gk * p.a_cs] : 0.0f;
      const int bk = e / TILE, bc = e % TILE;  // B slice: 16 x 64 columns
      const int gk2 = k0 + bk, gc = col0 + bc;
      sb[bk][bc] = gk2 < p.k && gc < p.n ? b[gk2 * p.b_rs + gc * p.b_cs] : 0.0f;
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
  y += yo + (ulong)batch * p.m * p.n;
  for (int i = 0; i < 4; ++i) {
    const int r = row0 + ty + 16 * i;
    if (r >= p.m) continue;
    for (int j = 0; j < 4; ++j) {
      const int col = col0 + tx + 16 * j;
      if (col >= p.n) continue;
      float v = p.alpha * acc[i][j];
      if (p.has_c) v += p.beta * c[co + r * p.c_rs + col * p.c_cs];
      y[r * p.n + col] = v;
    }
  }
}
