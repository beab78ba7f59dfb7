// MaxPool / AveragePool over NC planes of 1-D or 2-D float32 tensors (1-D as H = 1), one
// invocation per output. Window positions outside [-pad_begin, in + pad_end) are skipped;
// padded positions inside it count for the average only with count_include_pad.
#version 450
layout(local_size_x = 256) in;
layout(std430, binding = 0) readonly buffer X { float x[]; };
layout(std430, binding = 1) writeonly buffer Y { float y[]; };
layout(push_constant) uniform P {
  uint h, w, oh, ow, kh, kw, sh, sw, ph, pw, peh, pew, dh, dw;
  uint kind;  // 0 max, 1 average
  uint count_include_pad;
  uint total;
} p;

void main() {
  const uint i = (gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x) * 256 + gl_LocalInvocationID.x;
  if (i >= p.total) return;
  const uint pix = p.oh * p.ow, q = i % pix, x0 = (i / pix) * p.h * p.w;
  const int h0 = int((q / p.ow) * p.sh) - int(p.ph), w0 = int((q % p.ow) * p.sw) - int(p.pw);
  float acc = p.kind == 0 ? uintBitsToFloat(0xff7fffffu) : 0.0;  // -FLT_MAX when nothing is read
  uint count = 0, padded = 0;
  for (uint a = 0; a < p.kh; ++a) {
    const int ih = h0 + int(a * p.dh);
    if (ih < -int(p.ph) || ih >= int(p.h + p.peh)) continue;
    for (uint b = 0; b < p.kw; ++b) {
      const int iw = w0 + int(b * p.dw);
      if (iw < -int(p.pw) || iw >= int(p.w + p.pew)) continue;
      ++padded;
      if (ih < 0 || ih >= int(p.h) || iw < 0 || iw >= int(p.w)) continue;
      const float v = x[x0 + uint(ih) * p.w + uint(iw)];
      ++count;
      acc = p.kind == 0 ? max(acc, v) : acc + v;
    }
  }
  if (p.kind == 1) {
    const uint div = p.count_include_pad != 0 ? padded : count;
    acc = div > 0 ? acc / float(div) : uintBitsToFloat(0x7fc00000u);
  }
  y[i] = acc;
}
