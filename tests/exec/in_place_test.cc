// Outputs written over a dead input (KernelContext::reuse_input_as_output): granted only
// where the step is the input's last reader and nothing else holds its memory.
#include <atomic>

#include "backend/backend.h"
#include "exec/executor.h"
#include "ir/onnx_import.h"
#include "support/test_util.h"

namespace bulkhead::test {
namespace {

std::atomic<int> g_granted{0}, g_refused{0};

// A host device with one operator, test.Twice: y = 2x, written over x when allowed.
class TwiceDevice final : public Device {
 public:
  TwiceDevice() {
    info_.backend = "twice";
    table_.add(
        "Twice", 1,
        [](const KernelInfo&) -> Result<std::unique_ptr<Kernel>> {
          return std::unique_ptr<Kernel>(new LambdaKernel([](KernelContext& ctx) -> Status {
            const Tensor* x = ctx.input(0);
            BH_ASSIGN_OR_RETURN(Tensor y, ctx.reuse_input_as_output(0, 0, x->dtype(), x->shape()));
            (y.defined() ? g_granted : g_refused)++;
            if (!y.defined()) {
              BH_ASSIGN_OR_RETURN(y, ctx.allocate_output(0, x->dtype(), x->shape()));
            }
            for (int64_t i = 0; i < x->numel(); ++i) y.data<float>()[i] = 2.f * x->data<float>()[i];
            return Status::ok();
          }));
        },
        "test");
  }
  const DeviceInfo& info() const override { return info_; }
  const Domain& compute_domain() const override { return domain_; }
  std::shared_ptr<Allocator> create_session_allocator(const std::string& owner) override {
    return HostAllocator::create("twice:" + owner);
  }
  const KernelTable& kernels() const override { return table_; }

 private:
  DeviceInfo info_;
  Domain domain_ = Domain::host();
  KernelTable table_;
};

struct Outcome {
  std::vector<Tensor> outputs;
  int granted = 0, refused = 0;
};

Outcome run_text(const std::string& body, const std::string& outputs, const std::string& inits = "") {
  std::string text = std::string(R"(<ir_version: 8, opset_import: ["" : 17, "test" : 1]>
g (float[2,3] x) => ()") + outputs + ")" + (inits.empty() ? "" : " <" + inits + ">") + " {\n" + body + "\n}";
  std::string bytes = model_text_bytes(text);
  auto m = ir::load_model_from_bytes(bytes.data(), bytes.size(), "in_place.onnx", ir::DataFolder{});
  EXPECT_TRUE(m.is_ok()) << m.status().to_string();
  if (!m.is_ok()) return {};
  auto router = std::make_shared<CopyRouter>();
  exec::CompileOptions opts;
  auto twice = std::make_shared<TwiceDevice>();
  opts.placements.push_back({twice, twice->create_session_allocator("t")});
  auto cpu = make_cpu_backend()->open_device(0, router);
  EXPECT_TRUE(cpu.is_ok());
  opts.placements.push_back({*cpu, (*cpu)->create_session_allocator("t")});
  opts.router = router.get();
  auto cg = exec::compile(*m->graph, opts);
  EXPECT_TRUE(cg.is_ok()) << cg.status().to_string();
  if (!cg.is_ok()) return {};
  Tensor x = Tensor::host(DataType::kFloat32, {2, 3});
  for (int i = 0; i < 6; ++i) x.data<float>()[i] = static_cast<float>(i) - 2.5f;
  g_granted = g_refused = 0;
  exec::RunContext rc;
  rc.opts = &opts;
  rc.router = router.get();
  auto outs = exec::run(**cg, {Value(x)}, rc);
  EXPECT_TRUE(outs.is_ok()) << outs.status().to_string();
  Outcome o;
  if (outs.is_ok())
    for (auto& v : *outs) o.outputs.push_back(v.tensor);
  o.granted = g_granted;
  o.refused = g_refused;
  // The input the caller gave is never written.
  for (int i = 0; i < 6; ++i) EXPECT_EQ(x.data<float>()[i], static_cast<float>(i) - 2.5f);
  return o;
}

float relu(float v) { return v > 0 ? v : 0; }
float xv(int i) { return static_cast<float>(i) - 2.5f; }

TEST(InPlace, ADeadIntermediateBecomesTheOutput) {
  Outcome o = run_text("a = Relu(x)\n y = test.Twice(a)", "float[2,3] y");
  EXPECT_EQ(o.granted, 1);
  ASSERT_EQ(o.outputs.size(), 1u);
  for (int i = 0; i < 6; ++i) EXPECT_EQ(o.outputs[0].data<float>()[i], 2 * relu(xv(i)));
}

TEST(InPlace, NotWhenTheInputIsReadLater) {
  Outcome o = run_text("a = Relu(x)\n y = test.Twice(a)\n z = Neg(a)", "float[2,3] y, float[2,3] z");
  EXPECT_EQ(o.granted, 0);
  ASSERT_EQ(o.outputs.size(), 2u);
  for (int i = 0; i < 6; ++i) EXPECT_EQ(o.outputs[1].data<float>()[i], -relu(xv(i)));
}

TEST(InPlace, NotForAGraphInputOrAGraphOutput) {
  Outcome a = run_text("y = test.Twice(x)", "float[2,3] y");
  EXPECT_EQ(a.granted, 0);
  Outcome b = run_text("a = Relu(x)\n y = test.Twice(a)", "float[2,3] y, float[2,3] a");
  EXPECT_EQ(b.granted, 0);
  ASSERT_EQ(b.outputs.size(), 2u);
  for (int i = 0; i < 6; ++i) EXPECT_EQ(b.outputs[1].data<float>()[i], relu(xv(i)));
}

TEST(InPlace, NotWhenAnAliasOfTheMemoryLivesOn) {
  // r is a Reshape of a (the same memory); Twice is a's last reader but not r's.
  Outcome o = run_text("a = Relu(x)\n r = Reshape(a, s)\n y = test.Twice(a)\n z = Neg(r)", "float[2,3] y, float[3,2] z",
                       "int64[2] s = {3, 2}");
  EXPECT_EQ(o.granted, 0);
  EXPECT_EQ(o.refused, 1);
  ASSERT_EQ(o.outputs.size(), 2u);
  for (int i = 0; i < 6; ++i) EXPECT_EQ(o.outputs[1].data<float>()[i], -relu(xv(i)));
}

}  // namespace
}  // namespace bulkhead::test
