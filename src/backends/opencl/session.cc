#include "session.h"

namespace bulkhead::opencl {

Result<std::unique_ptr<Session>> Session::open(Device& device, const BhpSessionConfig& config) {
  SubmitPolicy policy = device.backend().default_policy();
  const std::string text = config.submit_policy ? config.submit_policy : "";
  if (!text.empty()) {
    OCL_ASSIGN(policy, parse_policy(text, "session option 'submit_policy'"));
  }
  std::unique_ptr<Session> s(new Session(device, std::move(policy), config.owner ? config.owner : ""));
  // The first run's queue, made now so that opening fails rather than the first run.
  OCL_ASSIGN(auto slot, s->take_slot());
  s->idle_.push_back(std::move(slot));
  OCL_TRY(device.backend().inject("open_session"));
  return s;
}

Result<std::unique_ptr<QueueSlot>> Session::take_slot() {
  {
    std::lock_guard lock(mu_);
    if (!idle_.empty()) {
      auto slot = std::move(idle_.back());
      idle_.pop_back();
      return slot;
    }
  }
  OCL_ASSIGN(QueueHandle q, device_.make_queue());
  return std::make_unique<QueueSlot>(device_, std::move(q));
}

Result<std::unique_ptr<Run>> Session::begin_run() {
  OCL_ASSIGN(auto slot, take_slot());
  auto run = std::make_unique<Run>(*this, std::move(slot));
  OCL_TRY(device_.backend().inject("begin_run"));
  return run;
}

void Session::give_back(std::unique_ptr<QueueSlot> slot) {
  std::lock_guard lock(mu_);
  idle_.push_back(std::move(slot));
}

Run::~Run() {
  // A run that failed part-way may still have work queued: it must be done before the
  // host frees the buffers it uses, and before the queue serves another run.
  if (clFinish(slot_->queue()) == CL_SUCCESS) session_.give_back(std::move(slot_));
}

}  // namespace bulkhead::opencl
