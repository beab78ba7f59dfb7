// Writes up to 30 words from the push constants into y at `offset`: small host-computed
// tables (Resize's nearest indices) reach device-local memory without a staging copy.
#version 450
layout(local_size_x = 32) in;
layout(std430, binding = 0) writeonly buffer Y { uint y[]; };
layout(push_constant) uniform P {
  uint count;
  uint offset;
  uint words[30];
} p;

void main() {
  uint i = gl_LocalInvocationID.x;
  if (i < p.count) y[p.offset + i] = p.words[i];
}
