// Nearest Resize of 4-D data over 32-bit words (`words` per element), as a gather: the
// host computes each axis's source index for every output coordinate (table: the four
// axes' entries one after another), so the choice of neighbour is exactly the CPU's.
#version 450
layout(local_size_x = 256) in;
layout(std430, binding = 0) readonly buffer X { uint x[]; };
layout(std430, binding = 1) readonly buffer T { uint table[]; };
layout(std430, binding = 2) writeonly buffer Y { uint y[]; };
layout(push_constant) uniform P {
  uint n;  // output elements
  uint words;
  uint in_dims[4];
  uint out_dims[4];
} p;

void main() {
  uint i = (gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x) * 256 + gl_LocalInvocationID.x;
  if (i >= p.n) return;
  uint rest = i, src = 0, stride = 1;
  uint at = p.out_dims[0] + p.out_dims[1] + p.out_dims[2] + p.out_dims[3];
  for (int d = 3; d >= 0; --d) {
    uint c = rest % p.out_dims[d];
    rest /= p.out_dims[d];
    at -= p.out_dims[d];
    src += table[at + c] * stride;
    stride *= p.in_dims[d];
  }
  for (uint w = 0; w < p.words; ++w) y[i * p.words + w] = x[src * p.words + w];
}
