// Conv and ConvTranspose on Vulkan, float32, NCHW with one or two spatial dimensions
// (1-D runs as H = 1). Conv runs as an implicit GEMM (shaders/compute_conv_gemm.comp)
// when a group has enough output channels to fill its 64-row tiles, otherwise directly
// (compute_conv_direct.comp, depthwise among them); both apply the bias and the post-ops
// the graph optimiser fused into the node (exec/optimize.h). ConvTranspose gathers per
// output (compute_conv_transpose.comp).
#include <algorithm>
#include <limits>
#include <map>

#include "backend/conv_attrs.h"
#include "backends/vulkan/kernels/kernels.h"
#include "backends/vulkan/pipelines.h"
#include "ir/graph.h"

namespace bulkhead::vulkan {
namespace {

constexpr int kMaxPostOps = 6;
constexpr uint32_t kTile = 64;
constexpr uint32_t kMaxGroups = 65535;
constexpr int64_t kGemmMinChannels = 16;  // output channels per group for the implicit GEMM
constexpr uint32_t kSumCode = 7;

struct ConvPush {
  uint32_t c, h, w, oh, ow, kh, kw, sh, sw, ph, pw, dh, dw, cg, mg, n, z0;
  uint32_t flags;  // bit 0 bias, bit 1 summand, bits 8.. post-op count
  uint32_t codes;  // 4 bits per post-op
  float args[2 * kMaxPostOps];
};
static_assert(sizeof(ConvPush) <= kPushBytes);

struct PostOps {
  std::vector<uint32_t> codes;
  std::vector<float> args;  // two per op
};

// The node's attributes (backend/conv_attrs.h) and what this kernel derives from them.
struct VkConvAttrs : ConvAttrs {
  int nsp = 0;  // spatial dimensions, 1 or 2
  PostOps post;
  bool has_sum = false;
};

// Spatial geometry with 1-D convolutions lifted to H = 1 (index 0).
struct Geo {
  int64_t in[2], k[2], s[2], d[2], pb[2], out[2];
};

std::string vec_str(const std::vector<int64_t>& v) { return shape_to_string(v); }

int64_t floordiv(int64_t a, int64_t b) { return a / b - ((a % b != 0) && ((a < 0) != (b < 0))); }

// Reads the fused post-ops; unsupported (the node falls back) for lists the shader lacks.
Status parse_post_ops(const KernelInfo& info, VkConvAttrs* a) {
  const ir::Node& n = info.node;
  if (!n.has_attr("_post_ops")) return Status::ok();
  static const std::map<std::string, uint32_t> kCodes = {{"relu", 0},      {"leaky_relu", 1}, {"clip", 2},
                                                         {"hardsigmoid", 3}, {"hardswish", 4}, {"sigmoid", 5},
                                                         {"linear", 6},    {"sum", kSumCode}};
  std::vector<std::string> names = n.attr_strings("_post_ops");
  a->post.args = n.attr_floats("_post_args");
  if (a->post.args.size() != 2 * names.size() || names.size() > kMaxPostOps)
    return unsupported(info.where() + "the Vulkan Conv takes at most " + std::to_string(kMaxPostOps) +
                       " fused post-ops with two arguments each");
  for (const std::string& s : names) {
    auto it = kCodes.find(s);
    if (it == kCodes.end()) return unsupported(info.where() + "the Vulkan Conv has no fused post-op '" + s + "'");
    if (it->second == kSumCode && a->has_sum)
      return unsupported(info.where() + "the Vulkan Conv takes at most one fused sum");
    a->has_sum = a->has_sum || it->second == kSumCode;
    a->post.codes.push_back(it->second);
  }
  if (a->has_sum && (n.inputs.size() < 4 || n.inputs[3].empty()))
    return unsupported(info.where() + "a fused sum needs its summand as input 3");
  return Status::ok();
}

// Spatial rank from the constant weight or the attributes; 0 when unknown.
int spatial_rank(const KernelInfo& info, const VkConvAttrs& a) {
  if (info.input_is_constant(1)) return info.constant_inputs[1].rank() - 2;
  if (!a.kernel_shape.empty()) return static_cast<int>(a.kernel_shape.size());
  if (!a.strides.empty()) return static_cast<int>(a.strides.size());
  if (!a.pads.empty()) return static_cast<int>(a.pads.size() / 2);
  return 0;
}

Result<VkConvAttrs> parse_attrs(const KernelInfo& info, bool transpose) {
  const ir::Node& n = info.node;
  if (n.inputs.size() < 2 || n.inputs[0].empty() || n.inputs[1].empty())
    return invalid_argument(info.where() + "needs inputs X and W");
  BH_RETURN_IF_ERROR(require_types(info, {DataType::kFloat32}));
  VkConvAttrs a;
  static_cast<ConvAttrs&>(a) = parse_conv_attrs(n);
  BH_RETURN_IF_ERROR(check_conv_attrs(a, info.where()));
  if (transpose && n.has_attr("_post_ops"))
    return unsupported(info.where() + "the Vulkan ConvTranspose has no fused post-ops");
  if (!transpose) BH_RETURN_IF_ERROR(parse_post_ops(info, &a));
  a.nsp = spatial_rank(info, a);
  if (a.nsp != 1 && a.nsp != 2)
    return unsupported(info.where() + "the Vulkan kernel takes 1-D and 2-D convolutions with a known rank only");
  return a;
}

// A per-dimension attribute, its default when absent.
Status fill(const std::string& where, const std::vector<int64_t>& v, int64_t def, size_t n, const char* name,
            std::vector<int64_t>* out) {
  if (v.empty()) {
    out->assign(n, def);
    return Status::ok();
  }
  if (v.size() != n)
    return invalid_argument(where + name + " has " + std::to_string(v.size()) + " values, expected " + std::to_string(n));
  *out = v;
  return Status::ok();
}

// Pads and output size of one spatial dimension of a Conv.
Status conv_dim(const VkConvAttrs& a, const std::string& where, int64_t in, int64_t dk, int64_t s, int64_t pad_b,
                int64_t pad_e, int64_t* pb, int64_t* out) {
  const std::string& ap = a.auto_pad;
  int64_t pe = 0;
  *pb = 0;
  if (ap == "SAME_UPPER" || ap == "SAME_LOWER") {
    const int64_t o = (in + s - 1) / s;
    const int64_t total = std::max<int64_t>(0, (o - 1) * s + dk - in);
    *pb = ap == "SAME_UPPER" ? total / 2 : total - total / 2;
    pe = total - *pb;
  } else if (ap == "NOTSET") {
    *pb = pad_b;
    pe = pad_e;
  }
  const int64_t span = in + *pb + pe - dk;
  if (span < 0) return invalid_argument(where + "the kernel is larger than the padded input");
  *out = span / s + 1;
  return Status::ok();
}

// Pads and output size of one spatial dimension of a ConvTranspose (as the CPU kernel).
Status transpose_dim(const VkConvAttrs& a, const std::string& where, int i, int64_t in, int64_t dk, int64_t s,
                     int64_t opad, int64_t pad_b, int64_t pad_e, int64_t* pb, int64_t* out) {
  const std::string& ap = a.auto_pad;
  const int64_t natural = s * (in - 1) + opad + dk;
  const bool same = ap == "SAME_UPPER" || ap == "SAME_LOWER";
  if (!a.output_shape.empty() || (same && !a.has_pads)) {
    int64_t target = in * s;
    if (!a.output_shape.empty()) {
      const size_t n = a.output_shape.size();
      if (n != static_cast<size_t>(a.nsp) && n != static_cast<size_t>(a.nsp + 2))
        return invalid_argument(where + "output_shape " + vec_str(a.output_shape) + " does not fit the input");
      target = a.output_shape[n - a.nsp + i];
    }
    const int64_t total = natural - target;
    *pb = ap == "SAME_UPPER" ? floordiv(total, 2) : total - floordiv(total, 2);
    *out = target;
  } else {
    *pb = ap == "NOTSET" || same ? pad_b : 0;
    const int64_t pe = ap == "NOTSET" || same ? pad_e : 0;
    *out = natural - *pb - pe;
  }
  if (*out < 0) return invalid_argument(where + "computed output size " + std::to_string(*out) + " is negative");
  return Status::ok();
}

Result<Geo> resolve(const VkConvAttrs& a, bool transpose, const Tensor& x, const Tensor& w, const std::string& where) {
  const int nsp = a.nsp;
  if (x.rank() != nsp + 2 || w.rank() != nsp + 2)
    return invalid_argument(where + "X " + x.describe() + " and W " + w.describe() + " must have rank " +
                            std::to_string(nsp + 2));
  std::vector<int64_t> k(w.shape().begin() + 2, w.shape().end()), s, d, pads, opad;
  if (!a.kernel_shape.empty() && a.kernel_shape != k)
    return invalid_argument(where + "kernel_shape " + vec_str(a.kernel_shape) + " does not match W " + w.describe());
  BH_RETURN_IF_ERROR(fill(where, a.strides, 1, nsp, "strides", &s));
  BH_RETURN_IF_ERROR(fill(where, a.dilations, 1, nsp, "dilations", &d));
  BH_RETURN_IF_ERROR(fill(where, a.pads, 0, 2 * nsp, "pads", &pads));
  BH_RETURN_IF_ERROR(fill(where, a.output_padding, 0, nsp, "output_padding", &opad));
  const std::string& ap = a.auto_pad;
  if (ap != "NOTSET" && ap != "SAME_UPPER" && ap != "SAME_LOWER" && ap != "VALID")
    return invalid_argument(where + "unknown auto_pad '" + ap + "'");
  Geo g{{1, 1}, {1, 1}, {1, 1}, {1, 1}, {0, 0}, {1, 1}};
  for (int i = 0; i < nsp; ++i) {
    if (s[i] < 1 || d[i] < 1 || k[i] < 1 || pads[i] < 0 || pads[i + nsp] < 0)
      return invalid_argument(where + "strides, dilations and kernel must be positive and pads non-negative");
    const int j = i + 2 - nsp;
    const int64_t in = x.dim(2 + i), dk = (k[i] - 1) * d[i] + 1;
    g.in[j] = in;
    g.k[j] = k[i];
    g.s[j] = s[i];
    g.d[j] = d[i];
    if (transpose)
      BH_RETURN_IF_ERROR(transpose_dim(a, where, i, in, dk, s[i], opad[i], pads[i], pads[i + nsp], &g.pb[j], &g.out[j]));
    else
      BH_RETURN_IF_ERROR(conv_dim(a, where, in, dk, s[i], pads[i], pads[i + nsp], &g.pb[j], &g.out[j]));
  }
  return g;
}

Shape output_shape(const VkConvAttrs& a, int64_t n, int64_t m, const Geo& g) {
  Shape y{n, m};
  for (int j = 2 - a.nsp; j < 2; ++j) y.push_back(g.out[j]);
  return y;
}

ConvPush make_push(const Tensor& x, int64_t cg, int64_t mg, const Geo& g) {
  ConvPush p{};
  auto u = [](int64_t v) { return static_cast<uint32_t>(v); };
  p.c = u(x.dim(1));
  p.h = u(g.in[0]);
  p.w = u(g.in[1]);
  p.oh = u(g.out[0]);
  p.ow = u(g.out[1]);
  p.kh = u(g.k[0]);
  p.kw = u(g.k[1]);
  p.sh = u(g.s[0]);
  p.sw = u(g.s[1]);
  p.ph = u(g.pb[0]);
  p.pw = u(g.pb[1]);
  p.dh = u(g.d[0]);
  p.dw = u(g.d[1]);
  p.cg = u(cg);
  p.mg = u(mg);
  p.n = u(x.dim(0));
  return p;
}

// Puts ops [begin, end) of `post` into the push constants.
void set_post_ops(const PostOps& post, size_t begin, size_t end, uint32_t* codes, float* args, uint32_t* count) {
  *codes = 0;
  for (size_t i = begin; i < end; ++i) {
    *codes |= post.codes[i] << (4 * (i - begin));
    args[2 * (i - begin)] = post.args[2 * i];
    args[2 * (i - begin) + 1] = post.args[2 * i + 1];
  }
  *count = static_cast<uint32_t>(end - begin);
}

Status check_sizes(KernelContext& ctx, std::initializer_list<const Tensor*> ts) {
  for (const Tensor* t : ts)
    if (t && static_cast<uint64_t>(t->numel()) > std::numeric_limits<uint32_t>::max())
      return unsupported(ctx.where() + "tensor " + t->describe() + " is too large for the Vulkan kernel");
  return Status::ok();
}

class ConvKernel final : public Kernel {
 public:
  explicit ConvKernel(VkConvAttrs a) : a_(std::move(a)) {}
  Status compute(KernelContext& ctx) const override;

 private:
  Status run_conv(RunState& rs, const Tensor& x, const Tensor& w, const Tensor* b, const Tensor* sum, const Tensor& y,
                  const Geo& g, size_t nops) const;
  Status broadcast_sum(KernelContext& ctx, RunState& rs, const Tensor& x, const Tensor& w, const Tensor* b,
                       const Tensor& sum, const Shape& yshape, const Geo& g) const;
  VkConvAttrs a_;
};

// The convolution with the first `nops` post-ops (the summand, when given, among them).
Status ConvKernel::run_conv(RunState& rs, const Tensor& x, const Tensor& w, const Tensor* b, const Tensor* sum,
                            const Tensor& y, const Geo& g, size_t nops) const {
  const int64_t G = a_.group, cg = x.dim(1) / G, mg = w.dim(0) / G;
  ConvPush push = make_push(x, cg, mg, g);
  uint32_t count = 0;
  set_post_ops(a_.post, 0, nops, &push.codes, push.args, &count);
  push.flags = (b ? 1u : 0u) | (sum ? 2u : 0u) | (count << 8);
  std::vector<RunState::Bind> binds = {{&x, false}, {&w, false}, {b ? b : &w, false}, {sum ? sum : &x, false}, {&y, true}};
  if (mg < kGemmMinChannels) {
    Groups gr = groups_for(static_cast<uint64_t>(y.numel()));
    return rs.dispatch("compute_conv_direct", binds, &push, sizeof push, gr.x, gr.y);
  }
  const uint32_t gx = (push.oh * push.ow + kTile - 1) / kTile, gy = (push.mg + kTile - 1) / kTile;
  const uint64_t pairs = static_cast<uint64_t>(x.dim(0)) * static_cast<uint64_t>(G);
  for (uint64_t z0 = 0; z0 < pairs; z0 += kMaxGroups) {
    push.z0 = static_cast<uint32_t>(z0);
    const uint32_t gz = static_cast<uint32_t>(std::min<uint64_t>(kMaxGroups, pairs - z0));
    BH_RETURN_IF_ERROR(rs.dispatch("compute_conv_gemm", binds, &push, sizeof push, gx, gy, gz));
  }
  return Status::ok();
}

struct BinaryPush {  // shaders/binary.comp
  uint32_t n, op, rank;
  uint32_t dims[6], a_stride[6], b_stride[6];
};
struct PostPush {  // shaders/compute_postops.comp
  uint32_t n, nops, codes;
  float args[2 * kMaxPostOps];
};

// Strides of `s` broadcast to `out` (right-aligned), 0 along broadcast dimensions.
void broadcast_strides(const Shape& s, const Shape& out, uint32_t* st) {
  const int rank = static_cast<int>(out.size()), off = rank - static_cast<int>(s.size());
  int64_t stride = 1;
  for (int d = rank - 1; d >= 0; --d) {
    const int64_t dim = d - off >= 0 ? s[d - off] : 1;
    st[d] = dim == 1 ? 0 : static_cast<uint32_t>(stride);
    stride *= dim;
  }
}

// A summand that broadcasts: the convolution and the ops before the sum into scratch,
// the broadcast add into the output (shaders/binary.comp), then the ops after it.
Status ConvKernel::broadcast_sum(KernelContext& ctx, RunState& rs, const Tensor& x, const Tensor& w, const Tensor* b,
                                 const Tensor& sum, const Shape& yshape, const Geo& g) const {
  const size_t k = std::find(a_.post.codes.begin(), a_.post.codes.end(), kSumCode) - a_.post.codes.begin();
  const size_t rank = std::max(yshape.size(), sum.shape().size());
  if (rank > 6) return unsupported(ctx.where() + "the summand's rank is above the Vulkan kernel's 6");
  Shape out(rank);
  for (size_t d = 0; d < rank; ++d) {
    const int64_t dy = d + yshape.size() >= rank ? yshape[d + yshape.size() - rank] : 1;
    const int64_t ds = d + sum.shape().size() >= rank ? sum.shape()[d + sum.shape().size() - rank] : 1;
    if (dy != ds && dy != 1 && ds != 1)
      return invalid_argument(ctx.where() + "the fused summand " + sum.describe() + " does not broadcast to " +
                              shape_to_string(yshape));
    out[d] = dy == 1 ? ds : dy;
  }
  BH_ASSIGN_OR_RETURN(Tensor t, ctx.allocate_scratch(DataType::kFloat32, yshape));
  BH_RETURN_IF_ERROR(run_conv(rs, x, w, b, nullptr, t, g, k));
  BH_ASSIGN_OR_RETURN(Tensor y, ctx.allocate_output(0, DataType::kFloat32, out));
  BH_RETURN_IF_ERROR(check_sizes(ctx, {&y}));
  BinaryPush add{};
  add.n = static_cast<uint32_t>(y.numel());
  add.rank = static_cast<uint32_t>(rank);
  for (size_t d = 0; d < rank; ++d) add.dims[d] = static_cast<uint32_t>(out[d]);
  broadcast_strides(yshape, out, add.a_stride);
  broadcast_strides(sum.shape(), out, add.b_stride);
  Groups gr = groups_for(add.n);
  BH_RETURN_IF_ERROR(rs.dispatch("binary", {{&t, false}, {&sum, false}, {&y, true}}, &add, sizeof add, gr.x, gr.y));
  if (k + 1 == a_.post.codes.size()) return Status::ok();
  PostPush post{};
  post.n = add.n;
  set_post_ops(a_.post, k + 1, a_.post.codes.size(), &post.codes, post.args, &post.nops);
  return rs.dispatch("compute_postops", {{&y, true}}, &post, sizeof post, gr.x, gr.y);
}

Status ConvKernel::compute(KernelContext& ctx) const {
  BH_ASSIGN_OR_RETURN(RunState * rs, run_state(ctx));
  const Tensor* x = ctx.input(0);
  const Tensor* w = ctx.input(1);
  const Tensor* b = ctx.input(2);
  if (b && !b->defined()) b = nullptr;
  const Tensor* sum = a_.has_sum ? ctx.input(3) : nullptr;
  if (!x || !w || (a_.has_sum && (!sum || !sum->defined())))
    return invalid_argument(ctx.where() + "needs X, W" + (a_.has_sum ? " and the fused summand" : ""));
  for (const Tensor* t : {x, w, b, sum})
    if (t && t->dtype() != DataType::kFloat32) return invalid_argument(ctx.where() + "expects float32 inputs");
  BH_ASSIGN_OR_RETURN(Geo g, resolve(a_, false, *x, *w, ctx.where()));
  const int64_t G = a_.group, C = x->dim(1), M = w->dim(0);
  if (w->dim(1) * G != C || M % G != 0)
    return invalid_argument(ctx.where() + "W " + w->describe() + " with group " + std::to_string(G) +
                            " does not fit X " + x->describe());
  if (b && (b->rank() != 1 || b->dim(0) != M))
    return invalid_argument(ctx.where() + "B " + b->describe() + " must be 1-D with " + std::to_string(M) + " elements");
  const Shape yshape = output_shape(a_, x->dim(0), M, g);
  BH_RETURN_IF_ERROR(check_sizes(ctx, {x, w, sum}));
  if (sum && sum->shape() != yshape) return broadcast_sum(ctx, *rs, *x, *w, b, *sum, yshape, g);
  BH_ASSIGN_OR_RETURN(Tensor y, ctx.allocate_output(0, DataType::kFloat32, yshape));
  if (y.numel() == 0) return Status::ok();
  BH_RETURN_IF_ERROR(check_sizes(ctx, {&y}));
  return run_conv(*rs, *x, *w, b, sum, y, g, a_.post.codes.size());
}

struct TransposePush {  // shaders/compute_conv_transpose.comp
  uint32_t c, h, w, oh, ow, kh, kw, sh, sw;
  int32_t ph, pw;  // negative where output_shape asks for more than the natural size
  uint32_t dh, dw, cg, mg, n;
  uint32_t has_bias;
};

class ConvTransposeKernel final : public Kernel {
 public:
  explicit ConvTransposeKernel(VkConvAttrs a) : a_(std::move(a)) {}
  Status compute(KernelContext& ctx) const override {
    BH_ASSIGN_OR_RETURN(RunState * rs, run_state(ctx));
    const Tensor* x = ctx.input(0);
    const Tensor* w = ctx.input(1);
    const Tensor* b = ctx.input(2);
    if (b && !b->defined()) b = nullptr;
    if (!x || !w) return invalid_argument(ctx.where() + "needs X and W");
    for (const Tensor* t : {x, w, b})
      if (t && t->dtype() != DataType::kFloat32) return invalid_argument(ctx.where() + "expects float32 inputs");
    BH_ASSIGN_OR_RETURN(Geo g, resolve(a_, true, *x, *w, ctx.where()));
    const int64_t G = a_.group, C = x->dim(1), M = w->dim(1) * G;
    if (w->dim(0) != C || C % G != 0)
      return invalid_argument(ctx.where() + "W " + w->describe() + " with group " + std::to_string(G) +
                              " does not fit X " + x->describe());
    if (b && (b->rank() != 1 || b->dim(0) != M))
      return invalid_argument(ctx.where() + "B " + b->describe() + " must be 1-D with " + std::to_string(M) + " elements");
    BH_ASSIGN_OR_RETURN(Tensor y, ctx.allocate_output(0, DataType::kFloat32, output_shape(a_, x->dim(0), M, g)));
    if (y.numel() == 0) return Status::ok();
    BH_RETURN_IF_ERROR(check_sizes(ctx, {x, w, &y}));
    ConvPush c = make_push(*x, C / G, M / G, g);
    TransposePush push{c.c,  c.h,  c.w,  c.oh, c.ow, c.kh, c.kw, c.sh, c.sw, static_cast<int32_t>(g.pb[0]),
                       static_cast<int32_t>(g.pb[1]), c.dh, c.dw, c.cg, c.mg, c.n, b ? 1u : 0u};
    Groups gr = groups_for(static_cast<uint64_t>(y.numel()));
    return rs->dispatch("compute_conv_transpose", {{x, false}, {w, false}, {b ? b : w, false}, {&y, true}}, &push,
                        sizeof push, gr.x, gr.y);
  }

 private:
  VkConvAttrs a_;
};

}  // namespace

void add_conv_kernels(KernelTable& t) {
  t.add("Conv", 1, [](const KernelInfo& info) -> Result<std::unique_ptr<Kernel>> {
    BH_ASSIGN_OR_RETURN(VkConvAttrs a, parse_attrs(info, false));
    return std::unique_ptr<Kernel>(std::make_unique<ConvKernel>(std::move(a)));
  });
  t.add("ConvTranspose", 1, [](const KernelInfo& info) -> Result<std::unique_ptr<Kernel>> {
    BH_ASSIGN_OR_RETURN(VkConvAttrs a, parse_attrs(info, true));
    return std::unique_ptr<Kernel>(std::make_unique<ConvTransposeKernel>(std::move(a)));
  });
}

}  // namespace bulkhead::vulkan
