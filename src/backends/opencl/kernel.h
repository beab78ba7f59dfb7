// A kernel (BhpKernel): the Op made for one node on one device. Immutable and shared by
// every thread that computes it; each compute enqueues on the stream of the call's run.
#pragma once

#include <string>

#include "ops/op.h"

namespace bulkhead::opencl {

class Device;

class Kernel {
 public:
  Kernel(Device& device, std::string where, OpPtr op) : device_(device), where_(std::move(where)), op_(std::move(op)) {}
  Device& device() const { return device_; }
  // Enqueues the node's work on call.run's stream or, with call.run NULL (constant
  // folding), on a queue of this call's own, complete when this returns.
  Status compute(const BhpKernelCall& call) const;

 private:
  Device& device_;
  const std::string where_;
  const OpPtr op_;
};

}  // namespace bulkhead::opencl
