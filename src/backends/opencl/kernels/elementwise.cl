// Element-wise float32 kernels: unary activations and broadcasting binary ops (codes in
// args.h). One work-item per output element.

float unary_f(float v, int op, float a, float b) {
  switch (op) {
    case UNARY_RELU: return v < 0.0f ? 0.0f : v;
    case UNARY_LEAKY_RELU: return v < 0.0f ? a * v : v;
    case UNARY_SIGMOID: return 1.0f / (1.0f + exp(-v));
    case UNARY_TANH: return tanh(v);
    case UNARY_EXP: return exp(v);
    case UNARY_LOG: return log(v);
    case UNARY_SQRT: return sqrt(v);
    case UNARY_ABS: return fabs(v);
    case UNARY_NEG: return -v;
    case UNARY_CLIP: v = v < a ? a : v; return v > b ? b : v;  // min > max gives max; NaN passes, as on the CPU
    case UNARY_HARD_SIGMOID: return fmax(0.0f, fmin(1.0f, a * v + b));
    case UNARY_HARD_SWISH: return v * fmax(0.0f, fmin(1.0f, v * (1.0f / 6.0f) + 0.5f));
    case UNARY_ELU: return v < 0.0f ? a * expm1(v) : v;
    case UNARY_SELU: return v <= 0.0f ? b * (a * exp(v) - a) : b * v;  // a = alpha, b = gamma
    case UNARY_ERF: return erf(v);
    case UNARY_GELU: return 0.5f * v * (1.0f + erf(v * 0.70710678118654752f));
    case UNARY_GELU_TANH: return 0.5f * v * (1.0f + tanh(0.79788456080286536f * (v + 0.044715f * v * v * v)));
    case UNARY_SOFTPLUS: return v > 0.0f ? v + log1p(exp(-v)) : log1p(exp(v));
    case UNARY_RECIPROCAL: return 1.0f / v;
    case UNARY_FLOOR: return floor(v);
    case UNARY_CEIL: return ceil(v);
  }
  return v;
}

kernel void unary(global const float* x, ulong xo, global float* y, ulong yo, int op, float a, float b) {
  const size_t i = get_global_id(0);
  y[yo + i] = unary_f(x[xo + i], op, a, b);
}

float binary_f(float u, float v, int op) {
  switch (op) {
    case BINARY_ADD: return u + v;
    case BINARY_SUB: return u - v;
    case BINARY_MUL: return u * v;
    case BINARY_DIV: return u / v;
    case BINARY_POW: return v == 2.0f ? u * u : pow(u, v);  // C99 rules: a negative base keeps its sign for odd integral v
    case BINARY_MAX: return isnan(u) || u >= v ? u : v;  // NaN propagates, as on the CPU
    case BINARY_MIN: return isnan(u) || u <= v ? u : v;
    case BINARY_PRELU: return u < 0.0f ? u * v : u;
  }
  return u;
}

kernel void binary(global const float* a, ulong ao, global const float* b, ulong bo, global float* y, ulong yo,
                   int op, Broadcast p) {
  const int i = get_global_id(0);
  int ia = 0, ib = 0, rest = i;
  for (int d = p.rank - 1; d >= 0; --d) {
    const int c = rest % p.dims[d];
    rest /= p.dims[d];
    ia += c * p.a[d];
    ib += c * p.b[d];
  }
  y[yo + i] = binary_f(a[ao + ia], b[bo + ib], op);
}
