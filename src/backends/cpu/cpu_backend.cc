// The CPU backend: one device ("cpu:0") computing in the host domain. Its kernel table
// is built once when the backend is created and shared read-only by its devices.
#include <omp.h>

#include <fstream>
#include <thread>

#include "backend/backend.h"
#include "backends/cpu/core_budget.h"
#include "backends/cpu/cpu_kernels.h"
#include "backends/cpu/omp_placement.h"
#include "memory/idle_releaser.h"
#include "memory/planned_allocator.h"
#include "oneapi/dnnl/dnnl.hpp"

namespace bulkhead {

namespace cpu {
CoreBudget& process_core_budget() {
  static CoreBudget budget(static_cast<int>(std::max(1u, std::thread::hardware_concurrency())));
  return budget;
}
}  // namespace cpu

namespace {

std::string cpu_model_name() {
  std::ifstream f("/proc/cpuinfo");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("model name", 0) == 0) {
      auto p = line.find(':');
      if (p != std::string::npos) return line.substr(p + 2);
    }
  return "cpu";
}

class CpuDevice final : public Device {
 public:
  CpuDevice(std::shared_ptr<const KernelTable> kernels, DeviceInfo info)
      : kernels_(std::move(kernels)), info_(std::move(info)) {}
  const DeviceInfo& info() const override { return info_; }
  const Domain& compute_domain() const override { return domain_; }
  std::shared_ptr<Allocator> create_session_allocator(const std::string& owner) override {
    return std::make_shared<PlannedHostAllocator>("cpu:" + owner);
  }
  Result<std::shared_ptr<Allocator>> open_session(const SessionConfig& config) override {
    auto a = std::make_shared<PlannedHostAllocator>("cpu:" + config.owner);
    a->set_release_when_idle(config.release_idle_after_ms, releaser_);
    return std::shared_ptr<Allocator>(std::move(a));
  }
  const KernelTable& kernels() const override { return *kernels_; }
  std::shared_ptr<void> enter_run(int threads) const override {
    // oneDNN and the element-wise loops use OpenMP, whose thread count is a per-thread
    // setting of the calling thread: set it for this run and put it back afterwards. The
    // count is what the process-wide core budget grants (core_budget.h).
    cpu::CoreBudget& budget = cpu::process_core_budget();
    int granted = budget.acquire(std::max(1, threads));
    int previous = omp_get_max_threads();
    omp_set_num_threads(granted);
    // A woken worker must not land on this thread's CPU (omp_placement.h).
    cpu::place_openmp_workers(granted);
    return std::shared_ptr<void>(nullptr, [previous, granted, &budget](void*) {
      omp_set_num_threads(previous);
      budget.release(granted);
    });
  }

 private:
  std::shared_ptr<const KernelTable> kernels_;
  DeviceInfo info_;
  Domain domain_ = Domain::host();
  // Wakes this device's idle sessions to give their run memory back (its thread starts
  // with the first session that asks for it).
  std::shared_ptr<IdleReleaser> releaser_ = std::make_shared<IdleReleaser>();
};

class CpuBackend final : public Backend {
 public:
  CpuBackend() {
    auto t = std::make_shared<KernelTable>();
    cpu::register_elementwise_kernels(*t);
    cpu::register_tensor_kernels(*t);
    cpu::register_dnnl_kernels(*t);
    cpu::register_reduction_kernels(*t);
    cpu::register_control_flow_kernels(*t);
    cpu::register_recurrent_kernels(*t);
    cpu::register_misc_kernels(*t);
    cpu::register_quantize_kernels(*t);
    cpu::register_signal_kernels(*t);
    cpu::register_image_kernels(*t);
    cpu::register_ml_kernels(*t);
    cpu::register_sequence_attention_kernels(*t);
    cpu::register_roi_training_kernels(*t);
    cpu::register_string_kernels(*t);
    t->wrap_all(cpu::serial_when_small);
    kernels_ = std::move(t);
  }
  std::string name() const override { return "cpu"; }
  std::vector<DeviceInfo> enumerate() const override { return {describe()}; }
  Result<std::shared_ptr<Device>> open_device(int ordinal, std::shared_ptr<CopyRouter>) override {
    if (ordinal != 0) return not_found("cpu:" + std::to_string(ordinal) + " does not exist (the CPU backend has one device, cpu:0)");
    return std::shared_ptr<Device>(std::make_shared<CpuDevice>(kernels_, describe()));
  }

 private:
  DeviceInfo describe() const {
    DeviceInfo d;
    d.backend = "cpu";
    d.ordinal = 0;
    d.name = cpu_model_name() + " (" + std::to_string(std::thread::hardware_concurrency()) + " threads)";
    const dnnl_version_t* v = dnnl_version();
    d.driver = "oneDNN " + std::to_string(v->major) + "." + std::to_string(v->minor) + "." + std::to_string(v->patch);
    d.submit_policy = "n/a (synchronous)";
    d.detail = std::to_string(kernels_->op_names().size()) + " operators";
    d.bf16_units = cpu::bf16_units();
    return d;
  }
  std::shared_ptr<const KernelTable> kernels_;
};

}  // namespace

std::shared_ptr<Backend> make_cpu_backend() { return std::make_shared<CpuBackend>(); }

}  // namespace bulkhead
