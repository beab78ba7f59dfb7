// 2-D transposed convolution, NCHW, float32, one invocation per output gathering the
// inputs that scatter to it: ih = (oh + ph - kh * dh) / sh where that divides exactly.
// W is [C, M/group, KH, KW]. Bindings: x, w, bias (w when absent), y.
#version 450
layout(local_size_x = 256) in;
layout(std430, binding = 0) readonly buffer X { float x[]; };
layout(std430, binding = 1) readonly buffer W { float wt[]; };
layout(std430, binding = 2) readonly buffer Bias { float bias[]; };
layout(std430, binding = 3) writeonly buffer Y { float y[]; };
layout(push_constant) uniform P {
  uint c, h, w, oh, ow, kh, kw, sh, sw;
  int ph, pw;  // leading pads, negative when output_shape extends the output
  uint dh, dw, cg, mg, n;
  uint has_bias;
} p;

void main() {
  const uint i = (gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x) * 256 + gl_LocalInvocationID.x;
  const uint groups = p.c / p.cg, mtot = groups * p.mg, pix = p.oh * p.ow;
  if (i >= p.n * mtot * pix) return;
  const uint q = i % pix, mo = (i / pix) % mtot, img = i / (pix * mtot);
  const uint g = mo / p.mg, m = mo % p.mg;
  const int oh = int(q / p.ow) + p.ph, ow = int(q % p.ow) + p.pw;
  float acc = 0.0;
  for (uint a = 0; a < p.kh; ++a) {
    const int th = oh - int(a * p.dh);
    if (th < 0 || th % int(p.sh) != 0) continue;
    const uint ih = uint(th) / p.sh;
    if (ih >= p.h) continue;
    for (uint b = 0; b < p.kw; ++b) {
      const int tw = ow - int(b * p.dw);
      if (tw < 0 || tw % int(p.sw) != 0) continue;
      const uint iw = uint(tw) / p.sw;
      if (iw >= p.w) continue;
      for (uint ci = 0; ci < p.cg; ++ci) {
        const uint cin = g * p.cg + ci;
        acc = fma(x[((img * p.c + cin) * p.h + ih) * p.w + iw], wt[((cin * p.mg + m) * p.kh + a) * p.kw + b], acc);
      }
    }
  }
  if (p.has_bias != 0) acc += bias[mo];
  y[i] = acc;
}
