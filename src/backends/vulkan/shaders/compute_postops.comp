// Applies fused Conv post-ops (compute_post.glsl, without "sum") in place to y[0, n):
// the ops after a broadcast summand, which the convolution epilogue cannot add.
#version 450
#extension GL_GOOGLE_include_directive : require
layout(local_size_x = 256) in;
layout(std430, binding = 0) buffer Y { float y[]; };
layout(push_constant) uniform P {
  uint n, nops;
  uint codes;
  float args[12];
} p;
#include "compute_post.glsl"

void main() {
  const uint i = (gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x) * 256 + gl_LocalInvocationID.x;
  if (i >= p.n) return;
  y[i] = post_ops(y[i], p.nops, 0.0);
}
