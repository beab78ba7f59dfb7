// A strided copy of 32-bit words: y[dst] = x[src] for every coordinate of a box of up to
// 6 dimensions, with signed source strides (negative steps) and an element of `words`
// words (2 for 64-bit types). Transpose, Slice and each input slab of Concat.
#version 450
layout(local_size_x = 256) in;
layout(std430, binding = 0) readonly buffer X { uint x[]; };
layout(std430, binding = 1) writeonly buffer Y { uint y[]; };
layout(push_constant) uniform P {
  uint n;         // elements in the box
  uint rank;
  uint words;     // 32-bit words per element
  uint src_base;  // elements
  uint dst_base;  // elements
  uint dims[6];
  int src_stride[6];  // elements
  uint dst_stride[6]; // elements
} p;

void main() {
  uint i = (gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x) * 256 + gl_LocalInvocationID.x;
  if (i >= p.n) return;
  int s = int(p.src_base);
  uint d = p.dst_base, rest = i;
  for (int k = int(p.rank) - 1; k >= 0; --k) {
    uint c = rest % p.dims[k];
    rest /= p.dims[k];
    s += int(c) * p.src_stride[k];
    d += c * p.dst_stride[k];
  }
  for (uint w = 0; w < p.words; ++w) y[d * p.words + w] = x[uint(s) * p.words + w];
}
