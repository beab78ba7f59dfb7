// Small calls of memory-bound operators run on one thread.
//
// A 2-thread call pays a fork and a join (~3 us here) and hands half of its tensors to a
// core whose caches do not hold them; oneDNN's reorders, pooling and depthwise kernels
// lose more than that on small tensors (a 1x544x7x7 reorder: 2.5 us on one thread, 8 us
// on two; 1x136x28x28: 30 against 53 us, on a 2-core AVX-512 EPYC). ShuffleNet, whose
// tensors are all below 1.6 MB, ran at 2 threads slower than at 1 (4.3 against 3.1 ms).
// A convolution decides from its multiply-adds: below 2 Mi (ShuffleNet's grouped 1x1 and
// depthwise layers) one thread, unless it runs on bulkhead's own NCHW depthwise kernels,
// which share channel planes without oneDNN's fork or a reorder (ConvKernel::compute);
// ResNet-50's smallest has 51 M. Other compute-bound
// operators (products, recurrences, attention) and those that run subgraphs are left as
// they are.
//
// Measured with `bulkhead run MODEL -t 2`, 7 alternating rounds, medians, policy on
// against BULKHEAD_CPU_SERIAL_BYTES=0: ShuffleNet 4.55 -> 3.56 ms; SqueezeNet, DenseNet,
// Inception v1/v2, ResNet-50 and ppocrv4_det within +-3% (the noise here).
#include <set>

#include "backends/cpu/cpu_kernels.h"
#include "backends/cpu/cpu_util.h"

namespace bulkhead::cpu {

namespace {

int64_t serial_input_bytes() {
  static const int64_t bytes = [] {
    const char* e = std::getenv("BULKHEAD_CPU_SERIAL_BYTES");
    return e ? std::atoll(e) : kSerialInputBytes;
  }();
  return bytes;
}

// Operators whose cost follows the bytes they read and write.
bool memory_bound(const std::string& op) {
  static const std::set<std::string> ops = {
      // element-wise and activations
      "Abs", "Add", "And", "BitShift", "BitwiseAnd", "BitwiseNot", "BitwiseOr", "BitwiseXor", "Cast", "CastLike",
      "Ceil", "Celu", "Clip", "Div", "Elu", "Equal", "Erf", "Exp", "Floor", "Gelu", "Greater", "GreaterOrEqual",
      "HardSigmoid", "HardSwish", "Identity", "IsInf", "IsNaN", "LeakyRelu", "Less", "LessOrEqual", "Log", "Max",
      "Mean", "Min", "Mish", "Mod", "Mul", "Neg", "Not", "Or", "PRelu", "Pow", "Reciprocal", "Relu", "Round", "Selu",
      "Shrink", "Sigmoid", "Sign", "Softplus", "Softsign", "Sqrt", "Sub", "Sum", "Swish", "Tanh", "ThresholdedRelu",
      "Where", "Xor",
      // data movement
      "Concat", "DepthToSpace", "Expand", "Flatten", "Gather", "GatherElements", "GatherND", "Pad", "Reshape", "Slice",
      "SpaceToDepth", "Split", "Squeeze", "Tile", "Transpose", "Unsqueeze", "ToBlocked16", "FromBlocked16",
      // global pooling, normalisation, softmax, quantisation (windowed pooling reads k*k
      // inputs per output and gains from a second thread: Inception v2 at 2 threads paid
      // ~2% with AveragePool and MaxPool on one)
      "GlobalAveragePool", "GlobalMaxPool", "BatchNormalization", "Softmax", "LogSoftmax",
      "QuantizeLinear", "DequantizeLinear"};
  return ops.count(op) != 0;
}

class SerialWhenSmall final : public Kernel {
 public:
  explicit SerialWhenSmall(std::unique_ptr<Kernel> k) : k_(std::move(k)) {}
  Status compute(KernelContext& ctx) const override {
    int64_t bytes = 0;
    for (int i = 0, n = ctx.num_inputs(); i < n; ++i) {
      const Tensor* t = ctx.input(i);
      if (t && t->defined()) bytes += static_cast<int64_t>(t->nbytes());
    }
    SerialScope serial(bytes < serial_input_bytes());
    return k_->compute(ctx);
  }

 private:
  std::unique_ptr<Kernel> k_;
};

}  // namespace

bool serial_for_macs(double macs) { return serial_input_bytes() > 0 && macs < static_cast<double>(kSerialConvMacs); }

KernelFactory serial_when_small(const std::string& op_type, KernelFactory factory) {
  if (!memory_bound(op_type)) return factory;
  return [f = std::move(factory)](const KernelInfo& info) -> Result<std::unique_ptr<Kernel>> {
    BH_ASSIGN_OR_RETURN(std::unique_ptr<Kernel> k, f(info));
    if (info.threads <= 1) return k;
    return std::unique_ptr<Kernel>(std::make_unique<SerialWhenSmall>(std::move(k)));
  };
}

}  // namespace bulkhead::cpu
