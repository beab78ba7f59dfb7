// Softmax (op 0) or LogSoftmax (op 1) along the middle axis of [outer, r, inner],
// float32, numerically stable (max subtracted first). One invocation per row.
#version 450
layout(local_size_x = 256) in;
layout(std430, binding = 0) readonly buffer X { float x[]; };
layout(std430, binding = 1) writeonly buffer Y { float y[]; };
layout(push_constant) uniform P {
  uint outer;
  uint r;
  uint inner;
  uint op;
} p;

void main() {
  uint i = (gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x) * 256 + gl_LocalInvocationID.x;
  if (i >= p.outer * p.inner) return;
  uint base = (i / p.inner) * p.r * p.inner + i % p.inner;
  float m = -1.0 / 0.0;
  for (uint k = 0; k < p.r; ++k) m = max(m, x[base + k * p.inner]);
  float s = 0.0;
  for (uint k = 0; k < p.r; ++k) s += exp(x[base + k * p.inner] - m);
  if (p.op == 0) {
    float inv = 1.0 / s;
    for (uint k = 0; k < p.r; ++k) y[base + k * p.inner] = exp(x[base + k * p.inner] - m) * inv;
  } else {
    float ls = log(s);
    for (uint k = 0; k < p.r; ++k) y[base + k * p.inner] = x[base + k * p.inner] - m - ls;
  }
}
