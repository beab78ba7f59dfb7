// Pad over up to 6 dimensions, 32-bit words (`words` per element). Each output coordinate
// maps into the (cropped) input: constant (mode 0) writes `value`, reflect (1), edge (2)
// and wrap (3) fold the coordinate back inside.
#version 450
layout(local_size_x = 256) in;
layout(std430, binding = 0) readonly buffer X { uint x[]; };
layout(std430, binding = 1) writeonly buffer Y { uint y[]; };
layout(push_constant) uniform P {
  uint n;       // output elements
  uint rank;
  uint words;
  uint mode;
  uint value[2];   // the constant's words
  uint base;       // first element of the cropped input
  uint dims[6];    // output
  int crop[6];     // input extent after negative pads
  int before[6];   // non-negative pads before
  uint stride[6];  // input strides, elements
} p;

// The input coordinate for `c` on an axis of `len` cropped elements, or -1 for the constant.
int fold(int c, int len) {
  if (c >= 0 && c < len) return c;
  if (p.mode == 0) return -1;
  if (p.mode == 2) return clamp(c, 0, len - 1);
  if (p.mode == 3) return ((c % len) + len) % len;
  if (len == 1) return 0;
  int period = 2 * (len - 1);
  c = ((c % period) + period) % period;
  return c >= len ? period - c : c;
}

void main() {
  uint i = (gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x) * 256 + gl_LocalInvocationID.x;
  if (i >= p.n) return;
  uint src = p.base, rest = i;
  bool constant = false;
  for (int k = int(p.rank) - 1; k >= 0; --k) {
    int c = fold(int(rest % p.dims[k]) - p.before[k], p.crop[k]);
    rest /= p.dims[k];
    constant = constant || c < 0;
    src += uint(max(c, 0)) * p.stride[k];
  }
  for (uint w = 0; w < p.words; ++w) y[i * p.words + w] = constant ? p.value[w] : x[src * p.words + w];
}
