// Reduction over the middle axis of a tensor viewed as [outer, r, inner], float32: one
// invocation per output element. Ops: 0 sum, 1 mean, 2 max, 3 min, 4 sum of squares,
// 5 L2 norm, 6 L1 norm, 7 log-sum-exp.
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
  uint o = i / p.inner, in_ = i % p.inner;
  uint base = o * p.r * p.inner + in_;
  float acc = p.op == 2 ? -1.0 / 0.0 : (p.op == 3 ? 1.0 / 0.0 : 0.0);
  float m = -1.0 / 0.0;
  if (p.op == 7)
    for (uint k = 0; k < p.r; ++k) m = max(m, x[base + k * p.inner]);
  for (uint k = 0; k < p.r; ++k) {
    float v = x[base + k * p.inner];
    switch (p.op) {
      case 2: acc = max(acc, v); break;
      case 3: acc = min(acc, v); break;
      case 4: case 5: acc += v * v; break;
      case 6: acc += abs(v); break;
      case 7: acc += exp(v - m); break;
      default: acc += v; break;
    }
  }
  if (p.op == 1) acc /= float(p.r);
  else if (p.op == 5) acc = sqrt(acc);
  else if (p.op == 7) acc = m + log(acc);
  y[i] = acc;
}
