// y = f(x), element by element, float32. The op code and its parameters are push constants.
#version 450
layout(local_size_x = 256) in;
layout(std430, binding = 0) readonly buffer X { float x[]; };
layout(std430, binding = 1) writeonly buffer Y { float y[]; };
layout(push_constant) uniform P {
  uint n;
  uint op;
  float alpha;
  float beta;
} p;

// erf with |error| < 1.2e-7 (Numerical Recipes' erfc Chebyshev fit).
float erf_(float v) {
  float z = abs(v);
  float t = 1.0 / (1.0 + 0.5 * z);
  float r = t * exp(-z * z - 1.26551223 + t * (1.00002368 + t * (0.37409196 + t * (0.09678418 +
            t * (-0.18628806 + t * (0.27886807 + t * (-1.13520398 + t * (1.48851587 +
            t * (-0.82215223 + t * 0.17087277)))))))));
  return v >= 0.0 ? 1.0 - r : r - 1.0;
}

// log(1 + x) without losing a small x to the rounding of 1 + x (Kahan's trick).
float log1p_(float x) {
  float u = 1.0 + x;
  return u == 1.0 ? x : log(u) * x / (u - 1.0);
}

// exp(x) - 1 without cancellation for small x (Kahan's trick).
float expm1_(float x) {
  float u = exp(x);
  if (u == 1.0) return x;
  float um1 = u - 1.0;
  return um1 == -1.0 ? -1.0 : um1 * x / log(u);
}

// tanh accurate near 0 (GLSL's may cancel there): e / (e + 2) with e = expm1(2|v|).
float tanh_(float v) {
  float a = abs(v);
  if (a > 10.0) return sign(v);
  float e = expm1_(2.0 * a);
  return sign(v) * e / (e + 2.0);
}

float f(float v) {
  switch (p.op) {
    case 0: return max(v, 0.0);                                   // Relu
    case 1: return v >= 0.0 ? 1.0 / (1.0 + exp(-v)) : exp(v) / (1.0 + exp(v));  // Sigmoid
    case 2: return tanh_(v);                                      // Tanh
    case 3: return exp(v);                                        // Exp
    case 4: return log(v);                                        // Log
    case 5: return -v;                                            // Neg
    case 6: return abs(v);                                        // Abs
    case 7: return sqrt(v);                                       // Sqrt
    case 8: return 1.0 / v;                                       // Reciprocal
    case 9: return floor(v);                                      // Floor
    case 10: return ceil(v);                                      // Ceil
    case 11: return erf_(v);                                      // Erf
    case 12: return clamp(p.alpha * v + p.beta, 0.0, 1.0);        // HardSigmoid
    case 13: return v * clamp(v / 6.0 + 0.5, 0.0, 1.0);           // HardSwish
    case 14: return v >= 0.0 ? v : p.alpha * v;                   // LeakyRelu
    case 15: return min(max(v, p.alpha), p.beta);                 // Clip
    case 16: return v >= 0.0 ? v : p.alpha * (exp(v) - 1.0);      // Elu
    case 17: return v > 20.0 ? v : log1p_(exp(v));                // Softplus
    case 18: return sin(v);                                       // Sin
    case 19: return cos(v);                                       // Cos
    case 20: return 0.5 * v * (1.0 + erf_(v * 0.70710678118));    // Gelu (exact)
    case 21: return v * (v >= 0.0 ? 1.0 / (1.0 + exp(-v)) : exp(v) / (1.0 + exp(v)));  // Swish / SiLU
    case 22: {                                                    // Mish
      // tanh(softplus(v)) = n / (n + 2) with n = e^v (e^v + 2): no log(1 + tiny) loss.
      if (v > 20.0) return v;
      float e = exp(v);
      float n = e * (e + 2.0);
      return v * n / (n + 2.0);
    }
    case 23: return sign(v);                                      // Sign
    case 24: return roundEven(v);                                 // Round
    default: return v;
  }
}

void main() {
  uint i = (gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x) * 256 + gl_LocalInvocationID.x;
  if (i < p.n) y[i] = f(x[i]);
}
