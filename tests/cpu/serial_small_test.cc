// The CPU backend's small-work policy (backends/cpu/kernels/serial_small.cc): calls of
// memory-bound operators on small inputs, and convolutions of few multiply-adds, run on
// one OpenMP thread; everything else keeps the run's count, and the count is put back.
#include <gtest/gtest.h>
#include <omp.h>

#include <vector>

#include "backends/cpu/cpu_kernels.h"
#include "backends/cpu/cpu_util.h"

namespace bulkhead::cpu {
namespace {

// A context with the given inputs and nothing else: the wrapper only reads the inputs.
class InputsOnly final : public KernelContext {
 public:
  explicit InputsOnly(std::vector<Value> in) : in_(std::move(in)) {}
  int num_inputs() const override { return static_cast<int>(in_.size()); }
  const Value* input_value(int i) const override {
    return i >= 0 && i < num_inputs() ? &in_[static_cast<size_t>(i)] : nullptr;
  }
  int num_outputs() const override { return 0; }
  bool output_wanted(int) const override { return false; }
  Result<Tensor> allocate_output(int, DataType, const Shape&) override { return internal_error("no outputs"); }
  Status set_output(int, Value) override { return internal_error("no outputs"); }
  Result<Tensor> allocate_scratch(DataType, const Shape&) override { return internal_error("no scratch"); }
  int threads() const override { return 2; }
  Result<std::vector<Value>> run_subgraph(const std::string&, std::vector<Value>) override {
    return internal_error("no subgraphs");
  }
  const std::string& where() const override { return where_; }

 private:
  std::vector<Value> in_;
  std::string where_ = "test: ";
};

// Records the OpenMP thread count it ran with.
struct Recorder final : public Kernel {
  int* seen;
  explicit Recorder(int* s) : seen(s) {}
  Status compute(KernelContext&) const override {
    *seen = omp_get_max_threads();
    return Status::ok();
  }
};

// Runs the kernel `op_type` gets through the policy with `bytes` of float input and the
// session's `threads`; returns the thread count it ran with.
int threads_seen(const std::string& op_type, int64_t bytes, int threads = 2) {
  int seen = -1;
  KernelFactory f = serial_when_small(op_type, [&seen](const KernelInfo&) -> Result<std::unique_ptr<Kernel>> {
    return std::unique_ptr<Kernel>(std::make_unique<Recorder>(&seen));
  });
  ir::Node node;
  node.op_type = op_type;
  KernelInfo info{node, {}, {}, threads, nullptr};
  auto k = f(info);
  EXPECT_TRUE(k.is_ok());
  // Two inputs of half the bytes each: the bound is on their sum.
  Tensor a = Tensor::host(DataType::kFloat32, {bytes / 8}), b = Tensor::host(DataType::kFloat32, {bytes / 8});
  InputsOnly ctx({Value(a), Value(b)});
  const int before = omp_get_max_threads();
  EXPECT_TRUE(k.value()->compute(ctx).is_ok());
  EXPECT_EQ(omp_get_max_threads(), before) << "the thread count is put back";
  return seen;
}

class SerialSmall : public ::testing::Test {
 protected:
  void SetUp() override {
    saved_ = omp_get_max_threads();
    omp_set_num_threads(2);
  }
  void TearDown() override { omp_set_num_threads(saved_); }
  int saved_ = 1;
};

TEST_F(SerialSmall, SmallMemoryBoundCallsRunOnOneThread) {
  for (const char* op : {"Add", "Relu", "Transpose", "GlobalAveragePool", "ToBlocked16", "Concat", "Softmax"}) {
    EXPECT_EQ(threads_seen(op, 64 << 10), 1) << op;
    EXPECT_EQ(threads_seen(op, kSerialInputBytes - 8), 1) << op;
    EXPECT_EQ(threads_seen(op, kSerialInputBytes), 2) << op << ": at the bound the call is shared";
    EXPECT_EQ(threads_seen(op, 16 << 20), 2) << op;
  }
}

TEST_F(SerialSmall, OtherOperatorsKeepTheRunsThreads) {
  // Compute-bound operators, and those that run subgraphs, are not wrapped at all.
  for (const char* op : {"MatMul", "Gemm", "Conv", "LSTM", "Loop", "If", "Attention", "TopK", "MaxPool", "AveragePool"})
    EXPECT_EQ(threads_seen(op, 1024), 2) << op;
}

TEST_F(SerialSmall, OneThreadSessionsAreNotWrapped) { EXPECT_EQ(threads_seen("Add", 1024, 1), 2); }

TEST_F(SerialSmall, ConvolutionsDecideByMultiplyAdds) {
  EXPECT_TRUE(serial_for_macs(kSerialConvMacs - 1));
  EXPECT_FALSE(serial_for_macs(kSerialConvMacs));
  EXPECT_FALSE(serial_for_macs(int64_t{51} << 20));  // ResNet-50's smallest convolution
}

TEST_F(SerialSmall, SerialScopeRestoresTheCount) {
  {
    SerialScope s(true);
    EXPECT_EQ(omp_get_max_threads(), 1);
    {
      SerialScope inner(true);  // nested: a no-op
      EXPECT_EQ(omp_get_max_threads(), 1);
    }
    EXPECT_EQ(omp_get_max_threads(), 1);
  }
  EXPECT_EQ(omp_get_max_threads(), 2);
  {
    SerialScope s(false);
    EXPECT_EQ(omp_get_max_threads(), 2);
  }
}

TEST(KernelTableWrap, WrapsEveryFactoryOfEveryVersionAndDomain) {
  KernelTable t;
  auto make = [](const KernelInfo&) -> Result<std::unique_ptr<Kernel>> { return unsupported("base"); };
  t.add("Add", 7, make);
  t.add("Add", 14, make);
  t.add("Fused", 1, make, "com.example");
  std::vector<std::string> seen;
  t.wrap_all([&](const std::string& op, KernelFactory f) {
    seen.push_back(op);
    return KernelFactory([f](const KernelInfo& i) -> Result<std::unique_ptr<Kernel>> {
      auto r = f(i);
      return unsupported("wrapped " + r.status().message());
    });
  });
  EXPECT_EQ(seen.size(), 3u);
  ir::Node node;
  KernelInfo info{node, {}, {}, 1, nullptr};
  for (auto [dom, op, v] : {std::tuple<const char*, const char*, int>{"", "Add", 7}, {"", "Add", 20}, {"com.example", "Fused", 1}}) {
    const KernelFactory* f = t.find(dom, op, v);
    ASSERT_NE(f, nullptr);
    EXPECT_EQ((*f)(info).status().message(), "wrapped base") << op;
  }
}

}  // namespace
}  // namespace bulkhead::cpu
