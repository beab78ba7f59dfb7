// Linear Resize of the last two axes of float32 data (bilinear; 1-D when one axis keeps
// its size). The host builds, per output row and per output column, the two input
// indices and their weights exactly as the CPU does (in double): table holds
// [oh][2] row indices, then [ow][2] column indices; weights [oh][2] then [ow][2].

kernel void resize_linear(global const float* x, ulong xo, global const int* table, ulong to,
                          global const float* weight, ulong wo, global float* y, ulong yo, int ih, int iw, int oh,
                          int ow) {
  const int i = get_global_id(0), ox = i % ow, t = i / ow, oy = t % oh, plane = t / oh;
  table += to;
  weight += wo;
  global const float* src = x + xo + (ulong)plane * ih * iw;
  global const float* r0 = src + table[2 * oy] * iw;
  global const float* r1 = src + table[2 * oy + 1] * iw;
  const int x0 = table[2 * oh + 2 * ox], x1 = table[2 * oh + 2 * ox + 1];
  const float wx0 = weight[2 * oh + 2 * ox], wx1 = weight[2 * oh + 2 * ox + 1];
  const float a = wx0 * r0[x0] + wx1 * r0[x1], b = wx0 * r1[x0] + wx1 * r1[x1];
  y[yo + i] = weight[2 * oy] * a + weight[2 * oy + 1] * b;
}
