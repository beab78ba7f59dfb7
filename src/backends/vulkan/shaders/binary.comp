// y = a op b with numpy broadcasting over up to 6 dimensions, float32. Strides of a and b
// are in elements and 0 along broadcast dimensions.
#version 450
layout(local_size_x = 256) in;
layout(std430, binding = 0) readonly buffer A { float a[]; };
layout(std430, binding = 1) readonly buffer B { float b[]; };
layout(std430, binding = 2) writeonly buffer Y { float y[]; };
layout(push_constant) uniform P {
  uint n;
  uint op;
  uint rank;
  uint dims[6];     // of y
  uint a_stride[6];
  uint b_stride[6];
} p;

float f(float u, float v) {
  switch (p.op) {
    case 0: return u + v;
    case 1: return u - v;
    case 2: return u * v;
    case 3: return u / v;
    case 4: {  // pow is undefined for u < 0 in GLSL: integer exponents keep their sign rule
      if (u >= 0.0 || v != floor(v)) return pow(u, v);
      float m = pow(-u, v);
      return mod(v, 2.0) == 1.0 ? -m : m;
    }
    case 5: return max(u, v);
    case 6: return min(u, v);
    case 7: return u >= 0.0 ? u : u * v;  // PRelu
    default: return u;
  }
}

void main() {
  uint i = (gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x) * 256 + gl_LocalInvocationID.x;
  if (i >= p.n) return;
  uint ia = 0, ib = 0, rest = i;
  for (int d = int(p.rank) - 1; d >= 0; --d) {
    uint c = rest % p.dims[d];
    rest /= p.dims[d];
    ia += c * p.a_stride[d];
    ib += c * p.b_stride[d];
  }
  y[i] = f(a[ia], b[ib]);
}
