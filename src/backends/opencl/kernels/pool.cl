// Pooling, NCHW float32 (Pool in args.h).
//   pool         MaxPool / AveragePool over 2-D planes (1-D as H = 1), one work-item per
//                output. Window positions outside [-pad_before, in + pad_after) are
//                skipped; padded positions inside it count for the average only with
//                count_include_pad.
//   global_pool  GlobalMaxPool / GlobalAveragePool: one work-group per plane, each
//                work-item folding a strided part, then a tree in local memory.

kernel void pool(global const float* x, ulong xo, global float* y, ulong yo, Pool p) {
  const int i = get_global_id(0);
  const int pix = p.oh * p.ow, q = i % pix;
  x += xo + (i / pix) * p.h * p.w;
  const int h0 = (q / p.ow) * p.sh - p.ph, w0 = (q % p.ow) * p.sw - p.pw;
  float acc = p.kind == 0 ? -FLT_MAX : 0.0f;  // -FLT_MAX when nothing is read, as on the CPU
  int count = 0, padded = 0;
  for (int a = 0; a < p.kh; ++a) {
    const int ih = h0 + a * p.dh;
    if (ih < -p.ph || ih >= p.h + p.peh) continue;
    for (int b = 0; b < p.kw; ++b) {
      const int iw = w0 + b * p.dw;
      if (iw < -p.pw || iw >= p.w + p.pew) continue;
      ++padded;
      if (ih < 0 || ih >= p.h || iw < 0 || iw >= p.w) continue;
      const float v = x[ih * p.w + iw];
      ++count;
      acc = p.kind == 0 ? (isnan(v) || v > acc ? v : acc) : acc + v;
    }
  }
  if (p.kind == 1) {
    const int div = p.count_include_pad ? padded : count;
    acc = div > 0 ? acc / (float)div : NAN;
  }
  y[yo + i] = acc;
}

kernel __attribute__((reqd_work_group_size(OCL_GROUP, 1, 1)))
void global_pool(global const float* x, ulong xo, global float* y, ulong yo, int size, int kind) {
  local float part[OCL_GROUP];
  const int plane = get_group_id(0), t = get_local_id(0);
  x += xo + (ulong)plane * size;
  float acc = kind == 0 ? -FLT_MAX : 0.0f;
  for (int j = t; j < size; j += OCL_GROUP) acc = kind == 0 ? fmax(acc, x[j]) : acc + x[j];
  part[t] = acc;
  barrier(CLK_LOCAL_MEM_FENCE);
  for (int s = OCL_GROUP / 2; s > 0; s >>= 1) {
    if (t < s) part[t] = kind == 0 ? fmax(part[t], part[t + s]) : part[t] + part[t + s];
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  if (t == 0) y[yo + plane] = kind == 0 ? part[0] : part[0] / (float)size;
}
