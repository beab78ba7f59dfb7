// BatchNormalization for inference, float32, NC...: y = (x - mean[c]) / sqrt(var[c] + eps)
// * scale[c] + bias[c], where c = (i / spatial) % channels; then max(y, 0) when relu != 0
// (a Relu the optimiser fused, `_relu`).
#version 450
layout(local_size_x = 256) in;
layout(std430, binding = 0) readonly buffer X { float x[]; };
layout(std430, binding = 1) readonly buffer S { float scale[]; };
layout(std430, binding = 2) readonly buffer B { float bias[]; };
layout(std430, binding = 3) readonly buffer M { float mean[]; };
layout(std430, binding = 4) readonly buffer V { float var_[]; };
layout(std430, binding = 5) writeonly buffer Y { float y[]; };
layout(push_constant) uniform P {
  uint n;
  uint channels;
  uint spatial;
  float eps;
  uint relu;
} p;

void main() {
  uint i = (gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x) * 256 + gl_LocalInvocationID.x;
  if (i >= p.n) return;
  uint c = (i / p.spatial) % p.channels;
  float v = (x[i] - mean[c]) / sqrt(var_[c] + p.eps) * scale[c] + bias[c];
  y[i] = p.relu != 0u ? max(v, 0.0) : v;
}
