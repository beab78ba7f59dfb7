// GlobalMaxPool / GlobalAveragePool, float32: one workgroup per NC plane, each
// invocation folding a strided part of the plane, then a tree in shared memory.
#version 450
layout(local_size_x = 256) in;
layout(std430, binding = 0) readonly buffer X { float x[]; };
layout(std430, binding = 1) writeonly buffer Y { float y[]; };
layout(push_constant) uniform P {
  uint planes, size;
  uint kind;  // 0 max, 1 average
} p;

shared float part[256];

void main() {
  const uint plane = gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x;
  if (plane >= p.planes) return;  // uniform across the workgroup
  const uint t = gl_LocalInvocationID.x, x0 = plane * p.size;
  float acc = p.kind == 0 ? uintBitsToFloat(0xff7fffffu) : 0.0;
  for (uint j = t; j < p.size; j += 256) acc = p.kind == 0 ? max(acc, x[x0 + j]) : acc + x[x0 + j];
  part[t] = acc;
  barrier();
  for (uint s = 128; s > 0; s >>= 1) {
    if (t < s) part[t] = p.kind == 0 ? max(part[t], part[t + s]) : part[t] + part[t + s];
    barrier();
  }
  if (t == 0) y[plane] = p.kind == 0 ? part[0] : part[0] / float(p.size);
}
