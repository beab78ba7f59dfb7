// Nearest Resize of the last two axes of NCHW float32 data, as a gather: the host
// computes each output row's and column's source index (table: oh rows, then ow columns),
// so the choice of neighbour is exactly the CPU's.
#version 450
layout(local_size_x = 256) in;
layout(std430, binding = 0) readonly buffer X { uint x[]; };
layout(std430, binding = 1) readonly buffer T { uint table[]; };
layout(std430, binding = 2) writeonly buffer Y { uint y[]; };
layout(push_constant) uniform P {
  uint n;  // output elements
  uint ih, iw, oh, ow;
} p;

void main() {
  uint i = (gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x) * 256 + gl_LocalInvocationID.x;
  if (i >= p.n) return;
  uint ox = i % p.ow, t = i / p.ow;
  uint oy = t % p.oh, plane = t / p.oh;
  y[i] = x[(plane * p.ih + table[oy]) * p.iw + table[p.oh + ox]];
}
