// The CPU's own convolution paths against the definition, computed here in double: a
// ConvTranspose whose kernel equals its stride (a learned upsampling: one matrix product
// and an interleave) — several kernel shapes, batch, bias or none, odd channel counts, one
// and two threads — depthwise convolutions on narrow and wide planes, and 3x3 convolutions
// on either side of the Winograd-or-direct choice.
#include <cmath>
#include <sstream>

#include "support/test_util.h"

namespace bulkhead::test {
namespace {

struct Case {
  int64_t N, C, M, H, W, kh, kw;
  bool bias;
};

// A float tensor's values as model text ("0.5,-1.25,...").
std::string list(const Tensor& t) {
  std::ostringstream os;
  os.precision(9);
  for (int64_t i = 0; i < t.numel(); ++i) os << (i ? "," : "") << t.data<float>()[i];
  return os.str();
}

std::string model(const Case& c, const Tensor& w, const Tensor& b) {
  std::ostringstream m;
  m << "<ir_version: 8, opset_import: [\"\" : 17]>\n"
    << "g (float[" << c.N << "," << c.C << "," << c.H << "," << c.W << "] x) => (float[" << c.N << "," << c.M << ","
    << c.H * c.kh << "," << c.W * c.kw << "] y)\n<float[" << c.C << "," << c.M << "," << c.kh << "," << c.kw << "] w = {"
    << list(w) << "}";
  if (c.bias) m << ", float[" << c.M << "] b = {" << list(b) << "}";
  m << ">\n{ y = ConvTranspose <strides = [" << c.kh << "," << c.kw << "]> (x, w" << (c.bias ? ", b" : "") << ") }";
  return m.str();
}

// Runs the one-input model `text` on `x` (`threads`, optimisation `level`) and returns the
// largest difference of its output from `want` (the definition, in double); -1 when it
// does not load, run or give `shape`.
double worst_difference(const std::string& text, const Tensor& x, const Shape& shape, const std::vector<double>& want,
                        int threads, int level = 2) {
  SessionOptions o;
  o.threads = threads;
  o.one_thread_when_small = false;  // the kernels' own threads, whatever the model's size
  o.optimization_level = level;
  const ProfiledRun r = run_profiled(text, o, {{"x", x}});
  if (r.outputs.empty()) return -1;
  const Tensor& y = r.outputs[0].second;
  EXPECT_EQ(y.shape(), shape);
  if (y.shape() != shape) return -1;
  double worst = 0;
  for (int64_t i = 0; i < y.numel(); ++i) worst = std::max(worst, std::fabs(y.data<float>()[i] - want[i]));
  return worst;
}

TEST(ConvTranspose, KernelEqualToStrideIsTheDefinition) {
  for (const Case& c : {Case{1, 24, 24, 12, 16, 2, 2, true}, Case{2, 5, 7, 9, 11, 2, 2, false}, Case{1, 3, 1, 6, 5, 3, 3, true},
                        Case{2, 4, 6, 7, 4, 2, 3, true}, Case{1, 17, 33, 33, 9, 4, 1, true}}) {
    Tensor x = random_tensor({c.N, c.C, c.H, c.W}, 1);
    Tensor w = random_tensor({c.C, c.M, c.kh, c.kw}, 2);
    Tensor b = random_tensor({c.M}, 3);
    const int64_t OH = c.H * c.kh, OW = c.W * c.kw;
    std::vector<double> want(static_cast<size_t>(c.N * c.M * OH * OW));
    for (int64_t n = 0; n < c.N; ++n)
      for (int64_t m = 0; m < c.M; ++m)
        for (int64_t oh = 0; oh < OH; ++oh)
          for (int64_t ow = 0; ow < OW; ++ow) {
            const int64_t h = oh / c.kh, i = oh % c.kh, q = ow / c.kw, j = ow % c.kw;
            double s = c.bias ? b.data<float>()[m] : 0.0;
            for (int64_t ch = 0; ch < c.C; ++ch)
              s += double(x.data<float>()[((n * c.C + ch) * c.H + h) * c.W + q]) *
                   w.data<float>()[((ch * c.M + m) * c.kh + i) * c.kw + j];
            want[((n * c.M + m) * OH + oh) * OW + ow] = s;
          }
    for (int threads : {1, 2}) {
      const double worst = worst_difference(model(c, w, b), x, {c.N, c.M, OH, OW}, want, threads);
      EXPECT_GE(worst, 0);
      EXPECT_LE(worst, 1e-4) << "C " << c.C << " M " << c.M << " kernel " << c.kh << "x" << c.kw << " threads " << threads;
    }
  }
}

// Depthwise convolutions against the definition, on every path (kernels/dnnl.cc): 3x3
// stride 1 pad 1 from 12 columns on the flat NCHW kernel (down to its smallest plane,
// 3x12); narrower planes on oneDNN's depthwise kernels; 3x3 and 5x5 at stride 1 or 2 on
// wide planes (128 columns and more on AVX-512, 16 elsewhere; other pads too), and 3x3 at
// stride 2 from 12 output columns, on the row kernel; a fused Relu at level 2; batch 2;
// one and two threads.
TEST(Depthwise, NarrowAndWidePlanesAreTheDefinition) {
  struct Geo {
    int64_t N, C, H, W, K, stride;
    int64_t pt, pl, pb, pr;  // pads: top, left, bottom, right
    bool relu;
  };
  for (const Geo& c : {Geo{1, 5, 7, 30, 3, 1, 1, 1, 1, 1, false}, Geo{1, 3, 5, 140, 3, 1, 1, 1, 1, 1, true},
                       Geo{1, 4, 6, 261, 3, 2, 1, 1, 1, 1, false}, Geo{1, 17, 3, 16, 3, 2, 1, 1, 1, 1, true},
                       Geo{1, 3, 3, 12, 3, 1, 1, 1, 1, 1, true}, Geo{2, 6, 28, 28, 3, 1, 1, 1, 1, 1, true},
                       Geo{1, 2, 4, 13, 3, 1, 1, 1, 1, 1, false}, Geo{1, 4, 9, 8, 3, 1, 1, 1, 1, 1, true},
                       Geo{1, 3, 6, 140, 3, 1, 0, 0, 0, 0, false}, Geo{2, 3, 7, 150, 5, 1, 2, 2, 2, 2, true},
                       Geo{1, 5, 6, 300, 5, 2, 2, 1, 0, 2, false}, Geo{1, 2, 5, 133, 5, 2, 2, 2, 2, 2, true},
                       Geo{1, 7, 9, 27, 3, 2, 1, 1, 1, 1, true}, Geo{2, 5, 56, 56, 3, 2, 1, 1, 1, 1, false},
                       Geo{1, 3, 8, 30, 3, 2, 0, 1, 1, 0, false}, Geo{1, 4, 5, 24, 3, 2, 1, 1, 0, 0, true},
                       Geo{1, 3, 7, 23, 3, 2, 1, 0, 1, 1, false}}) {
    const int64_t K = c.K;
    const int64_t OH = (c.H + c.pt + c.pb - K) / c.stride + 1, OW = (c.W + c.pl + c.pr - K) / c.stride + 1;
    Tensor x = random_tensor({c.N, c.C, c.H, c.W}, 21);
    Tensor w = random_tensor({c.C, 1, K, K}, 22);
    Tensor b = random_tensor({c.C}, 23);
    std::ostringstream m;
    m << "<ir_version: 8, opset_import: [\"\" : 17]>\n"
      << "g (float[" << c.N << "," << c.C << "," << c.H << "," << c.W << "] x) => (float[" << c.N << "," << c.C << ","
      << OH << "," << OW << "] y)\n<float[" << c.C << ",1," << K << "," << K << "] w = {" << list(w) << "}, float["
      << c.C << "] b = {" << list(b) << "}>\n"
      << "{ " << (c.relu ? "t" : "y") << " = Conv <group = " << c.C << ", pads = [" << c.pt << "," << c.pl << ","
      << c.pb << "," << c.pr << "], strides = [" << c.stride << "," << c.stride << "]> (x, w, b)"
      << (c.relu ? "\n  y = Relu(t)" : "") << " }";
    std::vector<double> want(static_cast<size_t>(c.N * c.C * OH * OW));
    for (int64_t n = 0; n < c.N; ++n)
      for (int64_t ch = 0; ch < c.C; ++ch)
        for (int64_t oh = 0; oh < OH; ++oh)
          for (int64_t ow = 0; ow < OW; ++ow) {
            double v = b.data<float>()[ch];
            for (int64_t kh = 0; kh < K; ++kh)
              for (int64_t kw = 0; kw < K; ++kw) {
                const int64_t ih = oh * c.stride - c.pt + kh, iw = ow * c.stride - c.pl + kw;
                if (ih < 0 || ih >= c.H || iw < 0 || iw >= c.W) continue;
                v += double(x.data<float>()[((n * c.C + ch) * c.H + ih) * c.W + iw]) * w.data<float>()[(ch * K + kh) * K + kw];
              }
            want[((n * c.C + ch) * OH + oh) * OW + ow] = c.relu ? std::max(v, 0.0) : v;
          }
    for (int level : {1, 2})
      for (int threads : {1, 2}) {
        const double worst = worst_difference(m.str(), x, {c.N, c.C, OH, OW}, want, threads, level);
        EXPECT_GE(worst, 0);
        EXPECT_LE(worst, 1e-4) << "N " << c.N << " C " << c.C << " H " << c.H << " W " << c.W << " K " << K
                               << " stride " << c.stride << " level " << level << " threads " << threads;
      }
  }
}

TEST(GroupedPointwise, GroupsSharedAmongThreadsAreTheDefinition) {
  // A grouped 1x1 convolution on NCHW (ShuffleNet's), each group's product on whichever
  // thread takes it: 2 and 4 and 8 groups, one and two images, bias and a fused Relu or
  // neither, one and two threads, at levels 1 and 2.
  struct G1 {
    int64_t N, C, M, G, H, W;
    bool bias, relu;
  };
  for (const G1& c : {G1{2, 24, 32, 4, 7, 9, true, true}, G1{1, 40, 40, 8, 14, 14, false, false},
                      G1{1, 12, 6, 2, 5, 3, true, false}, G1{2, 136, 136, 4, 7, 7, true, true}}) {
    const int64_t Cg = c.C / c.G, Mg = c.M / c.G, S = c.H * c.W;
    Tensor x = random_tensor({c.N, c.C, c.H, c.W}, 31);
    Tensor w = random_tensor({c.M, Cg, 1, 1}, 32);
    Tensor b = random_tensor({c.M}, 33);
    std::vector<double> want(static_cast<size_t>(c.N * c.M * S));
    for (int64_t n = 0; n < c.N; ++n)
      for (int64_t m = 0; m < c.M; ++m)
        for (int64_t i = 0; i < S; ++i) {
          double v = c.bias ? b.data<float>()[m] : 0.0;
          const int64_t g = m / Mg;
          for (int64_t k = 0; k < Cg; ++k)
            v += static_cast<double>(w.data<float>()[m * Cg + k]) * x.data<float>()[(n * c.C + g * Cg + k) * S + i];
          want[(n * c.M + m) * S + i] = c.relu && v < 0 ? 0.0 : v;
        }
    std::ostringstream t;
    t << "<ir_version: 8, opset_import: [\"\" : 17]>\n"
      << "g (float[" << c.N << "," << c.C << "," << c.H << "," << c.W << "] x) => (float[" << c.N << "," << c.M << ","
      << c.H << "," << c.W << "] y)\n<float[" << c.M << "," << Cg << ",1,1] w = {" << list(w) << "}";
    if (c.bias) t << ", float[" << c.M << "] b = {" << list(b) << "}";
    t << ">\n{ " << (c.relu ? "t" : "y") << " = Conv <group = " << c.G << "> (x, w" << (c.bias ? ", b" : "") << ")"
      << (c.relu ? "\n  y = Relu(t)" : "") << " }";
    for (int level : {1, 2})
      for (int threads : {1, 2}) {
        const double d = worst_difference(t.str(), x, {c.N, c.M, c.H, c.W}, want, threads, level);
        EXPECT_GE(d, 0) << c.C << "/" << c.G;
        EXPECT_LE(d, 1e-4) << c.C << " channels in " << c.G << " groups, level " << level << ", threads " << threads;
      }
  }
}

// 3x3 stride-1 convolutions that oneDNN can run as Winograd, against the definition: the
// kernel runs them as Winograd or directly by plane size, channels and thread count
// (winograd_pays in kernels/dnnl.cc), so each case runs at one and two threads — a 7x7
// and a 6x6 plane, a 14x14 one with 208 output channels, and others Winograd keeps at both
// counts (256 or more input channels, wider planes, an odd 9x11) — with a fused Relu.
TEST(Winograd, EitherAlgorithmAtEitherThreadCountIsTheDefinition) {
  struct W3 {
    int64_t C, M, H, W;
  };
  for (const W3& c : {W3{48, 64, 7, 7}, W3{40, 24, 6, 6}, W3{32, 208, 14, 14}, W3{32, 48, 14, 14},
                      W3{272, 32, 6, 6}, W3{16, 24, 9, 11}, W3{24, 32, 28, 28}}) {
    Tensor x = random_tensor({1, c.C, c.H, c.W}, 41);
    Tensor w = random_tensor({c.M, c.C, 3, 3}, 42);
    Tensor b = random_tensor({c.M}, 43);
    std::vector<double> want(static_cast<size_t>(c.M * c.H * c.W));
    for (int64_t m = 0; m < c.M; ++m)
      for (int64_t oh = 0; oh < c.H; ++oh)
        for (int64_t ow = 0; ow < c.W; ++ow) {
          double v = b.data<float>()[m];
          for (int64_t ch = 0; ch < c.C; ++ch)
            for (int64_t kh = 0; kh < 3; ++kh)
              for (int64_t kw = 0; kw < 3; ++kw) {
                const int64_t ih = oh - 1 + kh, iw = ow - 1 + kw;
                if (ih < 0 || ih >= c.H || iw < 0 || iw >= c.W) continue;
                v += double(x.data<float>()[(ch * c.H + ih) * c.W + iw]) * w.data<float>()[((m * c.C + ch) * 3 + kh) * 3 + kw];
              }
          want[(m * c.H + oh) * c.W + ow] = std::max(v, 0.0);
        }
    std::ostringstream t;
    t << "<ir_version: 8, opset_import: [\"\" : 17]>\n"
      << "g (float[1," << c.C << "," << c.H << "," << c.W << "] x) => (float[1," << c.M << "," << c.H << "," << c.W
      << "] y)\n<float[" << c.M << "," << c.C << ",3,3] w = {" << list(w) << "}, float[" << c.M << "] b = {" << list(b)
      << "}>\n{ t = Conv <pads = [1,1,1,1]> (x, w, b)\n  y = Relu(t) }";
    for (int threads : {1, 2}) {
      const double d = worst_difference(t.str(), x, {1, c.M, c.H, c.W}, want, threads);
      EXPECT_GE(d, 0) << c.C << "->" << c.M;
      EXPECT_LE(d, 2e-3) << c.C << "->" << c.M << " at " << c.H << "x" << c.W << ", threads " << threads;
    }
  }
}

// One session fed 30 plane sizes in turn (each twice), then the first ones again: every oneDNN kernel
// (the convolution, the pooling, the layout conversions) meets more descriptors than its
// CallPool keeps (dnnl_call.h) and drops idle ones, and its geometry cache changes shapes
// on every run; every run must still be the definition.
TEST(Conv, OneSessionOfManyPlaneSizesComputesEachOne) {
  const int64_t C = 8, M = 16;
  Tensor w = random_tensor({M, C, 3, 3}, 7);
  Tensor b = random_tensor({M}, 8);
  std::ostringstream text;
  text << "<ir_version: 8, opset_import: [\"\" : 17]>\n"
       << "g (float[1," << C << ",H,W] x) => (float[1," << M << ",P,Q] y)\n<float[" << M << "," << C << ",3,3] w = {" << list(w)
       << "}, float[" << M << "] b = {" << list(b) << "}>\n"
       << "{ c = Conv <pads = [1,1,1,1]> (x, w, b)\n  r = Relu (c)\n  y = MaxPool <kernel_shape = [2,2], strides = [2,2]> (r) }";
  for (int threads : {1, 2}) {
    SessionOptions o;
    o.threads = threads;
    o.one_thread_when_small = false;
    Env env;
    auto s = env.load_bytes(model_text_bytes(text.str()), "m.onnx", o);
    ASSERT_TRUE(s.is_ok()) << s.status().to_string();
    std::vector<std::pair<int64_t, int64_t>> sizes;
    for (int64_t i = 0; i < 30; ++i) sizes.emplace_back(4 + i, 6 + (i * 7) % 23);
    for (int64_t i = 0; i < 5; ++i) sizes.push_back(sizes[static_cast<size_t>(i)]);
    for (size_t k = 0; k < 2 * sizes.size(); ++k) {
      // Each size twice: the second run re-points the memory objects the first one made.
      const int64_t H = sizes[k / 2].first, W = sizes[k / 2].second;  // (a lambda below reads them)
      Tensor x = random_tensor({1, C, H, W}, static_cast<uint32_t>(H * 100 + W + k));
      auto r = s->run({{"x", x}});
      ASSERT_TRUE(r.is_ok()) << r.status().to_string();
      const Tensor& y = (*r)[0].second;
      const int64_t P = H / 2, Q = W / 2;
      ASSERT_EQ(y.shape(), (Shape{1, M, P, Q})) << H << "x" << W;
      auto conv = [&](int64_t m, int64_t h, int64_t q) {
        double acc = b.data<float>()[m];
        for (int64_t c = 0; c < C; ++c)
          for (int64_t i = 0; i < 3; ++i)
            for (int64_t j = 0; j < 3; ++j) {
              const int64_t ih = h + i - 1, iw = q + j - 1;
              if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
              acc += double(x.data<float>()[(c * H + ih) * W + iw]) * w.data<float>()[((m * C + c) * 3 + i) * 3 + j];
            }
        return std::max(acc, 0.0);
      };
      double worst = 0;
      for (int64_t m = 0; m < M; ++m)
        for (int64_t p = 0; p < P; ++p)
          for (int64_t q = 0; q < Q; ++q) {
            double want = 0;
            for (int64_t i = 0; i < 2; ++i)
              for (int64_t j = 0; j < 2; ++j) want = std::max(want, conv(m, 2 * p + i, 2 * q + j));
            worst = std::max(worst, std::fabs(y.data<float>()[(m * P + p) * Q + q] - want));
          }
      EXPECT_LE(worst, 1e-4) << H << "x" << W << " threads " << threads;
    }
  }
}

}  // namespace
}  // namespace bulkhead::test
