// Normalisation of rows of a tensor viewed as [groups, n]: y = (x - mean) / sqrt(var + eps)
// * scale[c] + bias[c], with population variance. One invocation per row.
//   LayerNormalization: a row is everything from `axis` on; scale/bias index = k (0..n-1).
//   InstanceNormalization: a row is one (batch, channel) plane; scale/bias index = row % channels.
#version 450
layout(local_size_x = 256) in;
layout(std430, binding = 0) readonly buffer X { float x[]; };
layout(std430, binding = 1) readonly buffer S { float scale[]; };
layout(std430, binding = 2) readonly buffer B { float bias[]; };
layout(std430, binding = 3) writeonly buffer Y { float y[]; };
layout(push_constant) uniform P {
  uint rows;
  uint n;
  uint per_element;  // 1: scale/bias indexed by k (layer norm); 0: by row % channels
  uint channels;
  uint has_bias;
  float eps;
} p;

void main() {
  uint row = (gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x) * 256 + gl_LocalInvocationID.x;
  if (row >= p.rows) return;
  uint base = row * p.n;
  float mean = 0.0;
  for (uint k = 0; k < p.n; ++k) mean += x[base + k];
  mean /= float(p.n);
  float var = 0.0;
  for (uint k = 0; k < p.n; ++k) {
    float d = x[base + k] - mean;
    var += d * d;
  }
  float inv = 1.0 / sqrt(var / float(p.n) + p.eps);
  uint c = row % p.channels;
  for (uint k = 0; k < p.n; ++k) {
    uint j = p.per_element == 1 ? k : c;
    float b = p.has_bias == 1 ? bias[j] : 0.0;
    y[base + k] = (x[base + k] - mean) * inv * scale[j] + b;
  }
}
