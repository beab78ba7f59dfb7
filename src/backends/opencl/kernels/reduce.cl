// Reductions and Softmax, float32.
//   reduce   one work-item per output element (Reduce in args.h): the element's kept
//            coordinates pick a base, its `count` inputs are the points of the reduced
//            dimensions. The host merges dimensions, so the common cases are one kept
//            and one reduced dimension.
//   softmax  Softmax (log_ 0) or LogSoftmax (log_ 1) along the middle axis of
//            [outer, r, inner], max subtracted first; one work-item per row.

kernel void reduce(global const float* x, ulong xo, global float* y, ulong yo, Reduce p) {
  const int i = get_global_id(0);
  int base = 0, rest = i;
  for (int d = p.kept_rank - 1; d >= 0; --d) {
    base += (rest % p.kept_dims[d]) * p.kept[d];
    rest /= p.kept_dims[d];
  }
  x += xo + base;
  float m = -INFINITY;
  if (p.op == REDUCE_LOG_SUM_EXP)
    for (int k = 0; k < p.count; ++k) {
      int at = 0, r = k;
      for (int d = p.red_rank - 1; d >= 0; --d) {
        at += (r % p.red_dims[d]) * p.red[d];
        r /= p.red_dims[d];
      }
      m = fmax(m, x[at]);
    }
  float acc = p.op == REDUCE_MAX ? -INFINITY : (p.op == REDUCE_MIN ? INFINITY : 0.0f);
  for (int k = 0; k < p.count; ++k) {
    int at = 0, r = k;
    for (int d = p.red_rank - 1; d >= 0; --d) {
      at += (r % p.red_dims[d]) * p.red[d];
      r /= p.red_dims[d];
    }
    const float v = x[at];
    switch (p.op) {
      case REDUCE_MAX: acc = isnan(v) || v > acc ? v : acc; break;
      case REDUCE_MIN: acc = isnan(v) || v < acc ? v : acc; break;
      case REDUCE_SUM_SQUARE:
      case REDUCE_L2: acc = fma(v, v, acc); break;
      case REDUCE_L1: acc += fabs(v); break;
      case REDUCE_LOG_SUM_EXP: acc += exp(v - m); break;
      default: acc += v; break;
    }
  }
  if (p.op == REDUCE_MEAN) acc /= (float)p.count;  // 0 / 0 = NaN for an empty set, as ONNX
  else if (p.op == REDUCE_L2) acc = sqrt(acc);
  else if (p.op == REDUCE_LOG_SUM_EXP) acc = isinf(m) || isnan(m) ? m : m + log(acc);
  y[yo + i] = acc;
}

kernel void softmax(global const float* x, ulong xo, global float* y, ulong yo, int r, int inner, int log_) {
  const int i = get_global_id(0);
  const int base = (i / inner) * r * inner + i % inner;
  x += xo + base;
  y += yo + base;
  float m = -INFINITY;
  for (int k = 0; k < r; ++k) m = fmax(m, x[k * inner]);
  float s = 0.0f;
  for (int k = 0; k < r; ++k) s += exp(x[k * inner] - m);
  if (log_) {
    const float ls = log(s);
    for (int k = 0; k < r; ++k) y[k * inner] = x[k * inner] - m - ls;
  } else {
    const float inv = 1.0f / s;
    for (int k = 0; k < r; ++k) y[k * inner] = exp(x[k * inner] - m) * inv;
  }
}
