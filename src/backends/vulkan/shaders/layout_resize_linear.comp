// Bilinear Resize of the last two axes of NCHW float32 data. Each axis maps an output
// coordinate to x * m + c in the input (every supported coordinate transformation is
// affine); like the CPU, an exact integer position uses the pixel on its left with
// weight 1, and neighbours are clamped into the input.
#version 450
layout(local_size_x = 256) in;
layout(std430, binding = 0) readonly buffer X { float x[]; };
layout(std430, binding = 1) writeonly buffer Y { float y[]; };
layout(push_constant) uniform P {
  uint n;  // output elements
  uint ih, iw, oh, ow;
  float my, cy, mx, cx;
} p;

// Source indices and weights along one axis of `len` input elements.
void taps(float pos, uint len, out uint i0, out uint i1, out float w0, out float w1) {
  float fl = floor(pos);
  int base = int(fl);
  float ratio = pos - fl;
  if (pos == fl) {
    base -= 1;
    ratio = 1.0;
  }
  i0 = uint(clamp(base, 0, int(len) - 1));
  i1 = uint(clamp(base + 1, 0, int(len) - 1));
  w0 = 1.0 - ratio;
  w1 = ratio;
}

void main() {
  uint i = (gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x) * 256 + gl_LocalInvocationID.x;
  if (i >= p.n) return;
  uint ox = i % p.ow, t = i / p.ow;
  uint oy = t % p.oh, plane = t / p.oh;
  uint y0, y1, x0, x1;
  float wy0, wy1, wx0, wx1;
  taps(float(oy) * p.my + p.cy, p.ih, y0, y1, wy0, wy1);
  taps(float(ox) * p.mx + p.cx, p.iw, x0, x1, wx0, wx1);
  uint r0 = (plane * p.ih + y0) * p.iw, r1 = (plane * p.ih + y1) * p.iw;
  float a = wx0 * x[r0 + x0] + wx1 * x[r0 + x1];
  float b = wx0 * x[r1 + x0] + wx1 * x[r1 + x1];
  y[i] = wy0 * a + wy1 * b;
}
