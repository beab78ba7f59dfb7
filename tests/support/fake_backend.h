// A test backend whose memory is its own domain (device-local, not CPU-readable through
// Buffer::data) and whose transfers log who served them, so tests can prove a copy was
// routed by the owners of its ends.
#pragma once

#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

#include "backend/backend.h"

namespace bulkhead::test {

struct TransferLog {
  std::mutex mu;
  std::vector<std::string> events;
  void add(std::string e) {
    std::lock_guard l(mu);
    events.push_back(std::move(e));
  }
  std::string last() {
    std::lock_guard l(mu);
    return events.empty() ? "" : events.back();
  }
};

class FakeDevice;

class FakeAllocator final : public Allocator {
 public:
  FakeAllocator(std::shared_ptr<FakeDevice> dev, Domain d) : device_(std::move(dev)), domain_(std::move(d)) {}
  const Domain& domain() const override { return domain_; }
  std::string name() const override { return domain_.backend + "-allocator"; }
  Result<std::shared_ptr<Buffer>> allocate(size_t size, size_t alignment) override {
    void* p = std::aligned_alloc(64, (std::max<size_t>(size, 1) + 63) / 64 * 64);
    // Device-local: the CPU pointer is hidden in the handle.
    return std::make_shared<Buffer>(shared_from_this(), domain_, nullptr, size, p);
  }
  void release(void*, void* handle, size_t) override { std::free(handle); }

 private:
  std::shared_ptr<FakeDevice> device_;  // buffers keep their device alive (I4)
  Domain domain_;
};

class FakeDevice final : public Device, public std::enable_shared_from_this<FakeDevice> {
 public:
  FakeDevice(std::string backend, std::shared_ptr<CopyRouter> router, std::shared_ptr<TransferLog> log)
      : router_(std::move(router)), log_(std::move(log)) {
    info_.backend = backend;
    info_.name = backend + " test device";
    domain_.id = Domain::new_id();
    domain_.backend = backend;
    domain_.device = 0;
    domain_.kind = MemoryKind::kDeviceLocal;
    auto log2 = log_;
    std::string b = backend;
    router_->add(Domain::host(), domain_, [log2, b](const Tensor& s, const Tensor& d) {
      std::memcpy(d.buffer()->handle(), s.raw(), s.nbytes());
      log2->add(b + ":h2d");
      return Status::ok();
    }, b);
    router_->add(domain_, Domain::host(), [log2, b](const Tensor& s, const Tensor& d) {
      std::memcpy(d.raw(), s.buffer()->handle(), s.nbytes());
      log2->add(b + ":d2h");
      return Status::ok();
    }, b);
  }
  ~FakeDevice() override {
    router_->remove_domain(domain_.id);
    log_->add(info_.backend + ":teardown");
  }
  const DeviceInfo& info() const override { return info_; }
  const Domain& compute_domain() const override { return domain_; }
  std::shared_ptr<Allocator> create_session_allocator(const std::string&) override {
    return std::make_shared<FakeAllocator>(shared_from_this(), domain_);
  }
  const KernelTable& kernels() const override { return kernels_; }

 private:
  std::shared_ptr<CopyRouter> router_;
  std::shared_ptr<TransferLog> log_;
  DeviceInfo info_;
  Domain domain_;
  KernelTable kernels_;
};

class FakeBackend final : public Backend {
 public:
  FakeBackend(std::string name, std::shared_ptr<TransferLog> log) : name_(std::move(name)), log_(std::move(log)) {}
  std::string name() const override { return name_; }
  std::vector<DeviceInfo> enumerate() const override {
    DeviceInfo d;
    d.backend = name_;
    d.name = name_ + " test device";
    return {d};
  }
  Result<std::shared_ptr<Device>> open_device(int ordinal, std::shared_ptr<CopyRouter> router) override {
    if (ordinal != 0) return not_found(name_ + ":" + std::to_string(ordinal) + " does not exist");
    log_->add(name_ + ":open");
    return std::shared_ptr<Device>(std::make_shared<FakeDevice>(name_, std::move(router), log_));
  }

 private:
  std::string name_;
  std::shared_ptr<TransferLog> log_;
};

}  // namespace bulkhead::test
