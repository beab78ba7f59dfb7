// Gather along one axis: y[o, i, j] = x[o, idx[i], j] over 32-bit words (`words` per
// element). Indices are int32 or int64 (idx_words 1 or 2: the low word carries the value,
// the high word must be its sign extension); negatives count from the end. The host has
// checked every index (kernels/layout.cc); one out of range would write zeros.
#version 450
layout(local_size_x = 256) in;
layout(std430, binding = 0) readonly buffer X { uint x[]; };
layout(std430, binding = 1) readonly buffer I { uint idx[]; };
layout(std430, binding = 2) writeonly buffer Y { uint y[]; };
layout(push_constant) uniform P {
  uint n;          // output elements
  uint words;      // 32-bit words per element
  uint idx_words;  // 32-bit words per index
  uint count;      // indices
  uint dim;        // size of the gathered axis
  uint inner;      // elements after the axis
} p;

void main() {
  uint e = (gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x) * 256 + gl_LocalInvocationID.x;
  if (e >= p.n) return;
  uint j = e % p.inner, t = e / p.inner;
  uint i = t % p.count, o = t / p.count;
  int k = int(idx[i * p.idx_words]);
  bool ok = p.idx_words == 1 || idx[i * p.idx_words + 1] == (k < 0 ? 0xffffffffu : 0u);
  if (k < 0) k += int(p.dim);
  ok = ok && k >= 0 && k < int(p.dim);
  uint src = ((o * p.dim + uint(k)) * p.inner + j) * p.words;
  for (uint w = 0; w < p.words; ++w) y[e * p.words + w] = ok ? x[src + w] : 0u;
}
