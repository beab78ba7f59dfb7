// Conv and ConvTranspose, float32, NCHW with one or two spatial dimensions (1-D runs as
// H = 1; kernels/conv.cl). Conv runs as an implicit GEMM when a group has enough output
// channels to fill the 64-row tiles, otherwise directly (depthwise among them); both
// apply the bias and the post-ops the graph optimiser fused into the node: `_post_ops`
// (strings) with `_post_args` (two floats per op), and for "sum" the summand as input 3.
// A summand that broadcasts runs as the convolution into scratch, a broadcast add, and
// the post-ops after the sum. ConvTranspose gathers per output.
#include <algorithm>
#include <limits>

#include "ops/families.h"

namespace bulkhead::opencl {
namespace {

constexpr int64_t kGemmMinChannels = 16;  // output channels per group for the implicit GEMM

struct ConvAttrs {
  std::string auto_pad = "NOTSET";
  Dims kernel_shape, strides, dilations, pads, output_padding, output_shape;
  int64_t group = 1;
  bool has_pads = false;
  int nsp = 0;  // spatial dimensions, 1 or 2
  std::vector<int> codes;
  std::vector<float> args;  // two per post-op
  bool has_sum = false;
};

// Spatial geometry with 1-D convolutions lifted to H = 1 (index 0).
struct Geo {
  int64_t in[2], k[2], s[2], d[2], pb[2], out[2];
};

int64_t floordiv(int64_t a, int64_t b) { return a / b - ((a % b != 0) && ((a < 0) != (b < 0))); }

Status parse_post_ops(const Node& n, ConvAttrs* a) {
  if (!n.has_attr("_post_ops")) return Status::ok();
  static constexpr struct {
    const char* name;
    int code;
  } kCodes[] = {{"relu", POST_RELU},
                {"leaky_relu", POST_LEAKY_RELU},
                {"clip", POST_CLIP},
                {"hardsigmoid", POST_HARD_SIGMOID},
                {"hardswish", POST_HARD_SWISH},
                {"sigmoid", POST_SIGMOID},
                {"linear", POST_LINEAR},
                {"sum", POST_SUM}};
  const std::vector<std::string> names = n.attr_strings("_post_ops");
  a->args = n.attr_floats("_post_args");
  if (a->args.size() != 2 * names.size() || names.size() > OCL_MAX_POST_OPS)
    return unsupported(n.where() + "the OpenCL Conv takes at most " + std::to_string(OCL_MAX_POST_OPS) +
                       " fused post-ops with two arguments each");
  for (const std::string& s : names) {
    auto it = std::find_if(std::begin(kCodes), std::end(kCodes), [&](const auto& c) { return s == c.name; });
    if (it == std::end(kCodes)) return unsupported(n.where() + "the OpenCL Conv has no fused post-op '" + s + "'");
    if (it->code == POST_SUM && a->has_sum)
      return unsupported(n.where() + "the OpenCL Conv takes at most one fused sum");
    a->has_sum = a->has_sum || it->code == POST_SUM;
    a->codes.push_back(it->code);
  }
  if (a->has_sum && !n.has_input(3)) return unsupported(n.where() + "a fused sum needs its summand as input 3");
  return Status::ok();
}

Result<ConvAttrs> parse_attrs(const Node& n, bool transpose) {
  if (!n.has_input(0) || !n.has_input(1)) return invalid_argument(n.where() + "needs inputs X and W");
  OCL_TRY(n.require_types(kFloat));
  ConvAttrs a;
  a.auto_pad = n.attr_string("auto_pad", "NOTSET");
  a.kernel_shape = n.attr_ints("kernel_shape");
  a.strides = n.attr_ints("strides");
  a.dilations = n.attr_ints("dilations");
  a.has_pads = n.has_attr("pads");
  a.pads = n.attr_ints("pads");
  a.output_padding = n.attr_ints("output_padding");
  a.output_shape = n.attr_ints("output_shape");
  a.group = n.attr_int("group", 1);
  for (const Dims* v : {&a.kernel_shape, &a.strides, &a.dilations, &a.pads, &a.output_padding, &a.output_shape})
    for (int64_t x : *v)
      if (x > std::numeric_limits<int32_t>::max() || x < -std::numeric_limits<int32_t>::max())
        return invalid_argument(n.where() + "a geometry attribute holds " + std::to_string(x) + ", beyond +-2^31");
  if (a.group < 1 || a.group > std::numeric_limits<int32_t>::max())
    return invalid_argument(n.where() + "group must be between 1 and 2^31-1, got " + std::to_string(a.group));
  const std::string& ap = a.auto_pad;
  if (ap != "NOTSET" && ap != "SAME_UPPER" && ap != "SAME_LOWER" && ap != "VALID")
    return invalid_argument(n.where() + "unknown auto_pad '" + ap + "'");
  if (transpose && n.has_attr("_post_ops"))
    return unsupported(n.where() + "the OpenCL ConvTranspose has no fused post-ops");
  if (!transpose) OCL_TRY(parse_post_ops(n, &a));
  // The spatial rank: from W's rank when known, else from the attributes.
  if (n.input(1).rank >= 0)
    a.nsp = n.input(1).rank - 2;
  else if (!a.kernel_shape.empty())
    a.nsp = static_cast<int>(a.kernel_shape.size());
  else if (!a.strides.empty())
    a.nsp = static_cast<int>(a.strides.size());
  else if (!a.pads.empty())
    a.nsp = static_cast<int>(a.pads.size() / 2);
  if (a.nsp != 1 && a.nsp != 2)
    return unsupported(n.where() + "the OpenCL kernel takes 1-D and 2-D convolutions with a known rank only");
  return a;
}

// A per-dimension attribute, its default when absent.
Status fill(const std::string& where, const Dims& v, int64_t def, size_t count, const char* name, Dims* out) {
  if (v.empty()) {
    out->assign(count, def);
    return Status::ok();
  }
  if (v.size() != count)
    return invalid_argument(where + name + " has " + std::to_string(v.size()) + " values, expected " +
                            std::to_string(count));
  *out = v;
  return Status::ok();
}

// Leading pad and output size of one spatial dimension of a Conv.
Status conv_dim(const ConvAttrs& a, const std::string& where, int64_t in, int64_t dk, int64_t s, int64_t pad_b,
                int64_t pad_e, int64_t* pb, int64_t* out) {
  int64_t pe = 0;
  *pb = 0;
  if (a.auto_pad == "SAME_UPPER" || a.auto_pad == "SAME_LOWER") {
    const int64_t o = (in + s - 1) / s, total = std::max<int64_t>(0, (o - 1) * s + dk - in);
    *pb = a.auto_pad == "SAME_UPPER" ? total / 2 : total - total / 2;
    pe = total - *pb;
  } else if (a.auto_pad == "NOTSET") {
    *pb = pad_b;
    pe = pad_e;
  }
  const int64_t span = in + *pb + pe - dk;
  if (span < 0) return invalid_argument(where + "the kernel is larger than the padded input");
  *out = span / s + 1;
  return Status::ok();
}

// Leading pad and output size of one spatial dimension of a ConvTranspose (as the CPU).
Status transpose_dim(const ConvAttrs& a, const std::string& where, int i, int64_t in, int64_t dk, int64_t s,
                     int64_t opad, int64_t pad_b, int64_t pad_e, int64_t* pb, int64_t* out) {
  const std::string& ap = a.auto_pad;
  const int64_t natural = s * (in - 1) + opad + dk;
  const bool same = ap == "SAME_UPPER" || ap == "SAME_LOWER";
  if (!a.output_shape.empty() || (same && !a.has_pads)) {
    int64_t target = in * s;
    if (!a.output_shape.empty()) {
      const size_t count = a.output_shape.size();
      if (count != static_cast<size_t>(a.nsp) && count != static_cast<size_t>(a.nsp + 2))
        return invalid_argument(where + "output_shape " + dims_text(a.output_shape) + " does not fit the input");
      target = a.output_shape[count - a.nsp + i];
    }
    const int64_t total = natural - target;
    *pb = ap == "SAME_UPPER" ? floordiv(total, 2) : total - floordiv(total, 2);
    *out = target;
  } else {
    *pb = ap == "NOTSET" || same ? pad_b : 0;
    *out = natural - *pb - (ap == "NOTSET" || same ? pad_e : 0);
  }
  if (*out < 0) return invalid_argument(where + "computed output size " + std::to_string(*out) + " is negative");
  return Status::ok();
}

Result<Geo> resolve(const ConvAttrs& a, bool transpose, const Tensor& x, const Tensor& w, const std::string& where) {
  const int nsp = a.nsp;
  if (x.rank() != nsp + 2 || w.rank() != nsp + 2)
    return invalid_argument(where + "X " + x.describe() + " and W " + w.describe() + " must have rank " +
                            std::to_string(nsp + 2));
  const Dims k(w.dims.begin() + 2, w.dims.end());
  if (!a.kernel_shape.empty() && a.kernel_shape != k)
    return invalid_argument(where + "kernel_shape " + dims_text(a.kernel_shape) + " does not match W " + w.describe());
  Dims s, d, pads, opad;
  OCL_TRY(fill(where, a.strides, 1, nsp, "strides", &s));
  OCL_TRY(fill(where, a.dilations, 1, nsp, "dilations", &d));
  OCL_TRY(fill(where, a.pads, 0, 2 * nsp, "pads", &pads));
  OCL_TRY(fill(where, a.output_padding, 0, nsp, "output_padding", &opad));
  Geo g{{1, 1}, {1, 1}, {1, 1}, {1, 1}, {0, 0}, {1, 1}};
  for (int i = 0; i < nsp; ++i) {
    if (s[i] < 1 || d[i] < 1 || k[i] < 1 || pads[i] < 0 || pads[i + nsp] < 0)
      return invalid_argument(where + "strides, dilations and kernel must be positive and pads non-negative");
    const int j = i + 2 - nsp;
    const int64_t in = x.dims[2 + i], dk = (k[i] - 1) * d[i] + 1;
    g.in[j] = in;
    g.k[j] = k[i];
    g.s[j] = s[i];
    g.d[j] = d[i];
    if (transpose)
      OCL_TRY(transpose_dim(a, where, i, in, dk, s[i], opad[i], pads[i], pads[i + nsp], &g.pb[j], &g.out[j]));
    else
      OCL_TRY(conv_dim(a, where, in, dk, s[i], pads[i], pads[i + nsp], &g.pb[j], &g.out[j]));
  }
  return g;
}

Dims output_dims(const ConvAttrs& a, int64_t n, int64_t m, const Geo& g) {
  Dims y{n, m};
  for (int j = 2 - a.nsp; j < 2; ++j) y.push_back(g.out[j]);
  return y;
}

ConvGeo make_geo(const Tensor& x, int64_t cg, int64_t mg, const Geo& g) {
  auto i = [](int64_t v) { return static_cast<int>(v); };
  return ConvGeo{i(x.dims[1]), i(g.in[0]), i(g.in[1]), i(g.out[0]), i(g.out[1]), i(g.k[0]), i(g.k[1]), i(g.s[0]),
                 i(g.s[1]),    i(g.pb[0]), i(g.pb[1]), i(g.d[0]),   i(g.d[1]),   i(cg),     i(mg),     i(x.dims[0])};
}

// Post-ops [begin, end) of `a`.
PostOps post_ops(const ConvAttrs& a, size_t begin, size_t end) {
  PostOps p{};
  p.count = static_cast<int>(end - begin);
  for (size_t i = begin; i < end; ++i) {
    p.codes[i - begin] = a.codes[i];
    p.args[2 * (i - begin)] = a.args[2 * i];
    p.args[2 * (i - begin) + 1] = a.args[2 * i + 1];
  }
  return p;
}

const Tensor* optional(const Call& call, size_t i) {
  const Tensor* t = call.input(i);
  return t && t->dtype != BH_TYPE_UNDEFINED ? t : nullptr;
}

Status check_inputs(Call& call, std::initializer_list<const Tensor*> ts) {
  for (const Tensor* t : ts)
    if (t && t->dtype != BH_TYPE_FLOAT32) return invalid_argument(call.where() + "expects float32 inputs");
  return call.check_size(ts);
}

class ConvOp final : public Op {
 public:
  explicit ConvOp(ConvAttrs a) : a_(std::move(a)) {}
  Status compute(Call& call) const override;

 private:
  // The convolution into y with the first `nops` post-ops (the summand, when given, among them).
  Status run(Call& call, const Tensor& x, const Tensor& w, const Tensor* b, const Tensor* sum, const Tensor& y,
             const Geo& g, size_t nops) const;
  Status broadcast_sum(Call& call, const Tensor& x, const Tensor& w, const Tensor* b, const Tensor& sum,
                       const Dims& ydims, const Geo& g) const;
  ConvAttrs a_;
};

Status ConvOp::run(Call& call, const Tensor& x, const Tensor& w, const Tensor* b, const Tensor* sum, const Tensor& y,
                   const Geo& g, size_t nops) const {
  const int64_t G = a_.group, cg = x.dims[1] / G, mg = w.dims[0] / G;
  const ConvGeo p = make_geo(x, cg, mg, g);
  const PostOps post = post_ops(a_, 0, nops);
  const Buf bb = b ? b->buf() : Buf{}, sb = sum ? sum->buf() : Buf{};
  const int has_b = b ? 1 : 0, has_s = sum ? 1 : 0;
  if (mg < kGemmMinChannels)
    return call.stream().dispatch("conv_direct", items(y.numel()), y.nbytes(), x.buf(), w.buf(), bb, sb, y.buf(), p,
                                  post, has_b, has_s);
  const size_t gx = (p.oh * p.ow + OCL_TILE - 1) / OCL_TILE, gy = (mg + OCL_TILE - 1) / OCL_TILE;
  return call.stream().dispatch("conv_gemm", groups(gx, gy, x.dims[0] * G, 16, 16), y.nbytes(), x.buf(), w.buf(), bb,
                                sb, y.buf(), p, post, has_b, has_s);
}

Status ConvOp::broadcast_sum(Call& call, const Tensor& x, const Tensor& w, const Tensor* b, const Tensor& sum,
                             const Dims& ydims, const Geo& g) const {
  const size_t k = std::find(a_.codes.begin(), a_.codes.end(), POST_SUM) - a_.codes.begin();
  OCL_ASSIGN(Tensor t, call.scratch(BH_TYPE_FLOAT32, numel(ydims)));
  t.dims = ydims;
  OCL_TRY(run(call, x, w, b, nullptr, t, g, k));
  const int rank = std::max(static_cast<int>(ydims.size()), sum.rank());
  Dims out(rank);
  for (int d = 0; d < rank; ++d) {
    const int64_t dy = d + ydims.size() >= static_cast<size_t>(rank) ? ydims[d + ydims.size() - rank] : 1;
    const int64_t ds = d + sum.rank() >= rank ? sum.dims[d + sum.rank() - rank] : 1;
    if (dy != ds && dy != 1 && ds != 1)
      return invalid_argument(call.where() + "the fused summand " + sum.describe() + " does not broadcast to " +
                              dims_text(ydims));
    out[d] = dy == 1 ? ds : dy;
  }
  OCL_ASSIGN(Tensor y, call.output(0, BH_TYPE_FLOAT32, out));
  OCL_TRY(call.check_size({&y}));
  OCL_TRY(dispatch_binary(call, t, sum, y, BINARY_ADD));
  if (k + 1 == a_.codes.size()) return Status::ok();
  return call.stream().dispatch("post_ops_inplace", items(y.numel()), y.nbytes(), y.buf(),
                                post_ops(a_, k + 1, a_.codes.size()));
}

Status ConvOp::compute(Call& call) const {
  const Tensor* x = call.input(0);
  const Tensor* w = call.input(1);
  const Tensor* b = optional(call, 2);
  const Tensor* sum = a_.has_sum ? optional(call, 3) : nullptr;
  if (!x || !w || (a_.has_sum && !sum))
    return invalid_argument(call.where() + "needs X, W" + (a_.has_sum ? " and the fused summand" : ""));
  OCL_TRY(check_inputs(call, {x, w, b, sum}));
  OCL_ASSIGN(Geo g, resolve(a_, false, *x, *w, call.where()));
  const int64_t G = a_.group, C = x->dims[1], M = w->dims[0];
  if (w->dims[1] * G != C || M % G != 0)
    return invalid_argument(call.where() + "W " + w->describe() + " with group " + std::to_string(G) +
                            " does not fit X " + x->describe());
  if (b && (b->rank() != 1 || b->dims[0] != M))
    return invalid_argument(call.where() + "B " + b->describe() + " must be 1-D with " + std::to_string(M) +
                            " elements");
  const Dims ydims = output_dims(a_, x->dims[0], M, g);
  if (numel(ydims) > std::numeric_limits<int32_t>::max())
    return unsupported(call.where() + "the output " + dims_text(ydims) +
                       " has too many elements for the OpenCL kernels");
  if (sum && sum->dims != ydims) return broadcast_sum(call, *x, *w, b, *sum, ydims, g);
  OCL_ASSIGN(Tensor y, call.output(0, BH_TYPE_FLOAT32, ydims));
  if (y.numel() == 0) return Status::ok();
  return run(call, *x, *w, b, sum, y, g, a_.codes.size());
}

class ConvTransposeOp final : public Op {
 public:
  explicit ConvTransposeOp(ConvAttrs a) : a_(std::move(a)) {}
  Status compute(Call& call) const override {
    const Tensor* x = call.input(0);
    const Tensor* w = call.input(1);
    const Tensor* b = optional(call, 2);
    if (!x || !w) return invalid_argument(call.where() + "needs X and W");
    OCL_TRY(check_inputs(call, {x, w, b}));
    OCL_ASSIGN(Geo g, resolve(a_, true, *x, *w, call.where()));
    const int64_t G = a_.group, C = x->dims[1], M = w->dims[1] * G;
    if (w->dims[0] != C || C % G != 0)
      return invalid_argument(call.where() + "W " + w->describe() + " with group " + std::to_string(G) +
                              " does not fit X " + x->describe());
    if (b && (b->rank() != 1 || b->dims[0] != M))
      return invalid_argument(call.where() + "B " + b->describe() + " must be 1-D with " + std::to_string(M) +
                              " elements");
    OCL_ASSIGN(Tensor y, call.output(0, BH_TYPE_FLOAT32, output_dims(a_, x->dims[0], M, g)));
    OCL_TRY(call.check_size({&y}));
    return call.stream().dispatch("conv_transpose", items(y.numel()), y.nbytes(), x->buf(), w->buf(),
                                  b ? b->buf() : Buf{}, y.buf(), make_geo(*x, C / G, M / G, g), b ? 1 : 0);
  }

 private:
  ConvAttrs a_;
};

}  // namespace

Result<OpPtr> make_conv(const Node& n) {
  OCL_ASSIGN(ConvAttrs a, parse_attrs(n, false));
  return OpPtr(std::make_unique<ConvOp>(std::move(a)));
}

Result<OpPtr> make_conv_transpose(const Node& n) {
  OCL_ASSIGN(ConvAttrs a, parse_attrs(n, true));
  return OpPtr(std::make_unique<ConvTransposeOp>(std::move(a)));
}

}  // namespace bulkhead::opencl
