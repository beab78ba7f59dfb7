#include "backends/faulty/faulty_backend.h"

#include <mutex>

#include "backends/faulty/fault.h"
#include "backends/faulty/faulty_device.h"

namespace bulkhead {
namespace {

using faulty::all_faults;

class FaultyBackend final : public Backend {
 public:
  explicit FaultyBackend(FaultyOptions options) : options_(std::move(options)) {}
  std::string name() const override { return options_.name; }
  std::vector<DeviceInfo> enumerate() const override {
    std::vector<DeviceInfo> r;
    for (size_t i = 0; i < all_faults().size(); ++i) r.push_back(describe(static_cast<int>(i)));
    return r;
  }
  Result<std::shared_ptr<Device>> open_device(int ordinal, std::shared_ptr<CopyRouter> router) override {
    if (ordinal < 0 || ordinal >= static_cast<int>(all_faults().size())) {
      std::string names;
      for (size_t i = 0; i < all_faults().size(); ++i)
        names += (names.empty() ? "" : ", ") + std::to_string(i) + " " + all_faults()[i].name;
      return not_found(options_.name + ":" + std::to_string(ordinal) + " does not exist (devices: " + names + ")");
    }
    std::shared_ptr<Backend> cpu_backend;
    {
      // The CPU backend builds its kernel table when created: only once a device is opened.
      std::lock_guard lock(mu_);
      if (!cpu_) cpu_ = make_cpu_backend();
      cpu_backend = cpu_;
    }
    BH_ASSIGN_OR_RETURN(auto cpu, cpu_backend->open_device(0, router));
    return std::shared_ptr<Device>(std::make_shared<faulty::FaultyDevice>(
        all_faults()[ordinal].fault, describe(ordinal), options_.dropped_dispatch, std::move(cpu), std::move(router)));
  }

 private:
  DeviceInfo describe(int ordinal) const {
    const auto& f = all_faults()[ordinal];
    DeviceInfo d;
    d.backend = options_.name;
    d.ordinal = ordinal;
    d.name = f.name;
    d.driver = "cpu kernels";
    d.submit_policy = "n/a (synchronous; test instrument)";
    d.detail = f.detail;
    if (f.fault == faulty::Fault::kDroppedDependency) d.detail += " (k = " + std::to_string(options_.dropped_dispatch) + ")";
    return d;
  }

  FaultyOptions options_;
  std::mutex mu_;
  std::shared_ptr<Backend> cpu_;
};

}  // namespace

std::shared_ptr<Backend> make_faulty_backend(FaultyOptions options) {
  return std::make_shared<FaultyBackend>(std::move(options));
}

}  // namespace bulkhead
