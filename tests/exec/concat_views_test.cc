// Concats written in place (exec::ConcatGroup): the producers of a Concat's inputs write
// straight into their part of its output, and the Concat copies nothing — only where that
// is safe, and with the same results as copying everywhere.
#include <cstring>

#include "backend/backend.h"
#include "exec/executor.h"
#include "ir/onnx_import.h"
#include "support/test_util.h"

namespace bulkhead::test {
namespace {

struct Compiled {
  ir::Model model;
  std::shared_ptr<CopyRouter> router = std::make_shared<CopyRouter>();
  exec::CompileOptions opts;
  std::unique_ptr<exec::CompiledGraph> cg;
};

std::unique_ptr<Compiled> compile_text(const std::string& text) {
  auto c = std::make_unique<Compiled>();
  std::string bytes = model_text_bytes(text);
  auto m = ir::load_model_from_bytes(bytes.data(), bytes.size(), "concat.onnx", ir::DataFolder{});
  EXPECT_TRUE(m.is_ok()) << m.status().to_string();
  if (!m.is_ok()) return nullptr;
  c->model = std::move(m).value();
  auto dev = make_cpu_backend()->open_device(0, c->router);
  EXPECT_TRUE(dev.is_ok());
  c->opts.placements.push_back({*dev, (*dev)->create_session_allocator("test")});
  c->opts.router = c->router.get();
  auto cg = exec::compile(*c->model.graph, c->opts);
  EXPECT_TRUE(cg.is_ok()) << cg.status().to_string();
  if (!cg.is_ok()) return nullptr;
  c->cg = std::move(cg).value();
  return c;
}

// Steps with an output written into a Concat's output.
int viewed_outputs(const exec::CompiledGraph& cg) {
  int n = 0;
  for (const auto& st : cg.steps)
    for (const auto& v : st.out_view) n += v.group >= 0 ? 1 : 0;
  return n;
}

std::vector<Tensor> run(const Compiled& c, const std::vector<Tensor>& inputs, int runs = 3) {
  std::vector<Tensor> last;
  for (int r = 0; r < runs; ++r) {
    std::vector<Value> in;
    for (const auto& t : inputs) in.emplace_back(t);
    exec::RunContext rc;
    rc.opts = &c.opts;
    rc.router = c.router.get();
    auto outs = exec::run(*c.cg, std::move(in), rc);
    EXPECT_TRUE(outs.is_ok()) << outs.status().to_string();
    if (!outs.is_ok()) return {};
    std::vector<Tensor> now;
    for (auto& v : *outs) now.push_back(v.tensor);
    for (size_t i = 0; r > 0 && i < now.size(); ++i) {
      EXPECT_TRUE(bitwise_equal(now[i], last[i])) << "run " << r << " output " << i;
    }
    last = now;
  }
  return last;
}

Tensor ramp(const Shape& s, float start) {
  Tensor t = Tensor::host(DataType::kFloat32, s);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = start + static_cast<float>(i) * 0.25f - 2.f;
  return t;
}

// y = Concat(Relu(x), Neg(x), Abs(x)) on axis 1, computed here.
Tensor expected_relu_neg_abs(const Tensor& x) {
  const int64_t C = x.dim(1), inner = x.numel() / (x.dim(0) * C);
  Tensor y = Tensor::host(DataType::kFloat32, {x.dim(0), 3 * C, x.dim(2), x.dim(3)});
  for (int64_t n = 0; n < x.dim(0); ++n)
    for (int64_t k = 0; k < 3; ++k)
      for (int64_t i = 0; i < C * inner; ++i) {
        float v = x.data<float>()[n * C * inner + i];
        y.data<float>()[(n * 3 + k) * C * inner + i] = k == 0 ? std::max(v, 0.f) : k == 1 ? -v : std::fabs(v);
      }
  return y;
}

const char* kThreeBranches = R"(<ir_version: 8, opset_import: ["" : 17]>
g (float[N,2,3,5] x) => (float[N,6,3,5] y) {
  a = Relu(x)
  b = Neg(x)
  c = Abs(x)
  y = Concat <axis = 1> (a, b, c)
})";

std::string with_batch(std::string text, int n) {
  for (size_t p; (p = text.find("[N,")) != std::string::npos;) text.replace(p, 3, "[" + std::to_string(n) + ",");
  return text;
}

TEST(ConcatViews, BranchesWriteIntoTheirPartOfTheOutput) {
  auto c = compile_text(with_batch(kThreeBranches, 1));
  ASSERT_TRUE(c);
  EXPECT_EQ(c->cg->concat_groups.size(), 1u);
  EXPECT_EQ(viewed_outputs(*c->cg), 3);
  Tensor x = ramp({1, 2, 3, 5}, 0.f);
  auto y = run(*c, {x});
  ASSERT_EQ(y.size(), 1u);
  EXPECT_TRUE(bitwise_equal(y[0], expected_relu_neg_abs(x)));
}

TEST(ConcatViews, NotWhereTheBatchSplitsEachInput) {
  auto c = compile_text(with_batch(kThreeBranches, 2));  // each input is two runs of the output
  ASSERT_TRUE(c);
  EXPECT_TRUE(c->cg->concat_groups.empty());
  Tensor x = ramp({2, 2, 3, 5}, 1.f);
  auto y = run(*c, {x});
  ASSERT_EQ(y.size(), 1u);
  EXPECT_TRUE(bitwise_equal(y[0], expected_relu_neg_abs(x)));
}

TEST(ConcatViews, NotWhereAnInputIsReadElsewhereOrIsAGraphOutput) {
  // `a` is read by the Mul too, `b` is a graph output: only `c` may be written in place,
  // and a group needs every input.
  auto c = compile_text(R"(<ir_version: 8, opset_import: ["" : 17]>
g (float[1,2,3,5] x) => (float[1,6,3,5] y, float[1,2,3,5] b, float[1,2,3,5] m) {
  a = Relu(x)
  b = Neg(x)
  c = Abs(x)
  y = Concat <axis = 1> (a, b, c)
  m = Mul(a, x)
})");
  ASSERT_TRUE(c);
  EXPECT_TRUE(c->cg->concat_groups.empty());
  Tensor x = ramp({1, 2, 3, 5}, 0.5f);
  auto y = run(*c, {x});
  ASSERT_EQ(y.size(), 3u);
  EXPECT_TRUE(bitwise_equal(y[0], expected_relu_neg_abs(x)));
}

TEST(ConcatViews, NotForGraphInputsRepeatsOrUnknownShapes) {
  for (const char* text : {
           // a graph input among the parts
           R"(<ir_version: 8, opset_import: ["" : 17]>
g (float[1,2,3,5] x) => (float[1,4,3,5] y) { a = Relu(x)
 y = Concat <axis = 1> (a, x) })",
           // the same value twice
           R"(<ir_version: 8, opset_import: ["" : 17]>
g (float[1,2,3,5] x) => (float[1,4,3,5] y) { a = Relu(x)
 y = Concat <axis = 1> (a, a) })",
           // a shape known only at run time
           R"(<ir_version: 8, opset_import: ["" : 17]>
g (float[1,2,3,W] x) => (float[1,4,3,W] y) { a = Relu(x)
 b = Neg(x)
 y = Concat <axis = 1> (a, b) })",
       }) {
    auto c = compile_text(text);
    ASSERT_TRUE(c);
    EXPECT_TRUE(c->cg->concat_groups.empty()) << text;
    Tensor x = ramp({1, 2, 3, 5}, 0.f);
    auto y = run(*c, {x});
    ASSERT_EQ(y.size(), 1u);
    EXPECT_EQ(y[0].shape(), (Shape{1, 4, 3, 5}));
  }
}

TEST(ConcatViews, AnyAxisWithOnlyOnesBeforeIt) {
  // [1,1,3,5] inputs on axis 2: rows of the output, each a contiguous run.
  auto c = compile_text(R"(<ir_version: 8, opset_import: ["" : 17]>
g (float[1,1,3,5] x) => (float[1,1,9,5] y) {
  a = Relu(x)
  b = Neg(x)
  c = Abs(x)
  y = Concat <axis = -2> (a, b, c)
})");
  ASSERT_TRUE(c);
  EXPECT_EQ(c->cg->concat_groups.size(), 1u);
  Tensor x = ramp({1, 1, 3, 5}, 0.f);
  auto y = run(*c, {x});
  ASSERT_EQ(y.size(), 1u);
  Tensor want = expected_relu_neg_abs(x);  // the same bytes: one channel, rows stacked
  ASSERT_EQ(y[0].nbytes(), want.nbytes());
  EXPECT_EQ(std::memcmp(y[0].raw(), want.raw(), want.nbytes()), 0);
}

TEST(ConcatViews, AProducerThatAliasesItsInputIsCopiedAsBefore) {
  // Reshape hands back a view of its input rather than writing its output: the Concat
  // then copies, and the result is the same.
  auto c = compile_text(R"(<ir_version: 8, opset_import: ["" : 17]>
g (float[1,2,3,5] x) => (float[1,4,3,5] y) <int64[4] s = {1, 2, 3, 5}> {
  a = Relu(x)
  n = Neg(x)
  b = Reshape(n, s)
  y = Concat <axis = 1> (a, b)
})");
  ASSERT_TRUE(c);
  Tensor x = ramp({1, 2, 3, 5}, 0.f);
  auto y = run(*c, {x});
  ASSERT_EQ(y.size(), 1u);
  const float* p = y[0].data<float>();
  for (int64_t i = 0; i < 30; ++i) {
    float v = x.data<float>()[i];
    EXPECT_EQ(p[i], std::max(v, 0.f));
    EXPECT_EQ(p[30 + i], -v);
  }
}

TEST(ConcatViews, AdjacentInputsGivenByTheCallerAreStillTheCallers) {
  // Two inputs that are neighbouring views of one buffer: the Concat kernel hands back
  // that run of the buffer, and the session gives the caller a copy of its own.
  Env env;
  auto s = env.load_bytes(model_text_bytes(R"(<ir_version: 8, opset_import: ["" : 17]>
g (float[1,2,4] p, float[1,3,4] q) => (float[1,5,4] y) { y = Concat <axis = 1> (p, q) })"),
                          "adjacent.onnx");
  ASSERT_TRUE(s.is_ok()) << s.status().to_string();
  Tensor whole = ramp({1, 5, 4}, 0.f);
  Tensor p(DataType::kFloat32, {1, 2, 4}, whole.buffer(), 0);
  Tensor q(DataType::kFloat32, {1, 3, 4}, whole.buffer(), 8 * sizeof(float));
  auto r = s->run({{"p", p}, {"q", q}});
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  const Tensor& y = (*r)[0].second;
  EXPECT_TRUE(bitwise_equal(y, whole));
  EXPECT_NE(y.buffer(), whole.buffer());
}

}  // namespace
}  // namespace bulkhead::test
