// Normalisations, float32.
//   batch_norm  inference BatchNormalization, one work-item per element: channel
//               c = (i / spatial) % channels; then max(y, 0) with relu (a fused Relu).
//   norm_rows   rows of [rows, n] normalised to zero mean and unit population variance,
//               one work-group per row (mean and variance reduced in local memory), then
//               y = (x - mean) / sqrt(var + eps) * scale[j] + bias[j], with j = k % period
//               (LayerNormalization: scale over the normalised block) or j = row % period
//               (InstanceNormalization: one per channel), by per_row.

kernel void batch_norm(global const float* x, ulong xo, global const float* scale, ulong so, global const float* bias,
                       ulong bo, global const float* mean, ulong mo, global const float* var, ulong vo,
                       global float* y, ulong yo, int channels, int spatial, float eps, int relu) {
  const int i = get_global_id(0), c = (i / spatial) % channels;
  const float v = (x[xo + i] - mean[mo + c]) / sqrt(var[vo + c] + eps) * scale[so + c] + bias[bo + c];
  y[yo + i] = relu && v < 0.0f ? 0.0f : v;
}

// The sum of every work-item's v across the work-group.
float group_sum(local float* part, float v) {
  const int t = get_local_id(0);
  part[t] = v;
  barrier(CLK_LOCAL_MEM_FENCE);
  for (int s = OCL_GROUP / 2; s > 0; s >>= 1) {
    if (t < s) part[t] += part[t + s];
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  const float r = part[0];
  barrier(CLK_LOCAL_MEM_FENCE);
  return r;
}

kernel __attribute__((reqd_work_group_size(OCL_GROUP, 1, 1)))
void norm_rows(global const float* x, ulong xo, global const float* scale, ulong so, global const float* bias, ulong bo,
               global float* y, ulong yo, int n, int period, int per_row, int has_bias, float eps) {
  local float part[OCL_GROUP];
  const int row = get_group_id(0), t = get_local_id(0);
  x += xo + (ulong)row * n;
  y += yo + (ulong)row * n;
  float s = 0.0f;
  for (int k = t; k < n; k += OCL_GROUP) s += x[k];
  const float mean = group_sum(part, s) / (float)n;
  s = 0.0f;
  for (int k = t; k < n; k += OCL_GROUP) {
    const float d = x[k] - mean;
    s = fma(d, d, s);
  }
  const float inv = 1.0f / sqrt(group_sum(part, s) / (float)n + eps);
  for (int k = t; k < n; k += OCL_GROUP) {
    const int j = (per_row ? row : k) % period;
    y[k] = (x[k] - mean) * inv * scale[so + j] + (has_bias ? bias[bo + j] : 0.0f);
  }
}
