// Data movement for any element type, by size: this program is built once per element
// size with ELEM (uchar, ushort, uint or ulong) and ESIZE (1, 2, 4 or 8) defined, and its
// kernels are named with the size: copy_strided_4, gather_8, ...
//   copy_strided    a box of the source into the destination (Transpose, Slice, Concat).
//   gather          y[o, i, j] = x[o, idx[i], j]; the host checked and normalised idx.
//   pad             each output coordinate maps into the (cropped) input or the constant.
//   resize_nearest  nearest Resize as a gather through per-axis tables built by the host.

#define CAT_(a, b) a##_##b
#define CAT(a, b) CAT_(a, b)
#define NAME(n) CAT(n, ESIZE)

kernel void NAME(copy_strided)(global const ELEM* x, ulong xo, global ELEM* y, ulong yo, Box b) {
  int rest = get_global_id(0), src = 0, dst = 0;
  for (int d = b.rank - 1; d >= 0; --d) {
    const int c = rest % b.dims[d];
    rest /= b.dims[d];
    src += c * b.src[d];
    dst += c * b.dst[d];
  }
  y[yo + dst] = x[xo + src];
}

kernel void NAME(gather)(global const ELEM* x, ulong xo, global const int* idx, ulong io, global ELEM* y, ulong yo,
                         int count, int dim, int inner) {
  const int e = get_global_id(0), j = e % inner, t = e / inner, i = t % count, o = t / count;
  y[yo + e] = x[xo + ((ulong)o * dim + idx[io + i]) * inner + j];
}

// The input coordinate for c on an axis of len elements (after cropping), or -1 for the constant.
int fold(int c, int len, int mode) {
  if (c >= 0 && c < len) return c;
  if (mode == 0) return -1;
  if (mode == 2) return clamp(c, 0, len - 1);
  if (mode == 3) return ((c % len) + len) % len;
  if (len == 1) return 0;
  const int period = 2 * (len - 1);
  c = ((c % period) + period) % period;
  return c >= len ? period - c : c;
}

kernel void NAME(pad)(global const ELEM* x, ulong xo, global ELEM* y, ulong yo, Pad p, ulong value) {
  const int i = get_global_id(0);
  int rest = i, src = 0;
  bool outside = false;
  for (int d = p.rank - 1; d >= 0; --d) {
    const int c = fold(rest % p.dims[d] - p.before[d], p.crop[d], p.mode);
    rest /= p.dims[d];
    outside = outside || c < 0;
    src += max(c, 0) * p.stride[d];
  }
  y[yo + i] = outside ? (ELEM)value : x[xo + src];
}

kernel void NAME(resize_nearest)(global const ELEM* x, ulong xo, global const int* table, ulong to, global ELEM* y,
                                 ulong yo, NearestMap p) {
  const int i = get_global_id(0);
  int rest = i, src = 0;
  for (int d = p.rank - 1; d >= 0; --d) {
    src += table[to + p.at[d] + rest % p.dims[d]] * p.in[d];
    rest /= p.dims[d];
  }
  y[yo + i] = x[xo + src];
}
