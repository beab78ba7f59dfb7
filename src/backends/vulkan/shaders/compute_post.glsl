// Fused Conv post-ops (exec/optimize.h) for the compute_*.comp shaders, included after
// a push block `p` with `uint nops`-style fields: p.codes holds 4 bits per op, first op
// in the low bits; p.args two floats per op. Codes: 0 relu, 1 leaky_relu, 2 clip,
// 3 hardsigmoid, 4 hardswish, 5 sigmoid, 6 linear, 7 sum (adds `s`).
float post_ops(float v, uint nops, float s) {
  for (uint i = 0; i < nops; ++i) {
    const float a = p.args[2 * i], b = p.args[2 * i + 1];
    switch ((p.codes >> (4 * i)) & 15u) {
      case 0: v = max(v, 0.0); break;
      case 1: v = v < 0.0 ? a * v : v; break;
      case 2: v = min(max(v, a), b); break;
      case 3: v = max(0.0, min(1.0, a * v + b)); break;
      case 4: v = v * min(max(v + 3.0, 0.0), 6.0) / 6.0; break;
      case 5: v = 1.0 / (1.0 + exp(-v)); break;
      case 6: v = a * v + b; break;
      case 7: v += s; break;
    }
  }
  return v;
}
