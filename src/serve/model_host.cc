#include "serve/model_host.h"

#include <algorithm>
#include <chrono>

namespace bulkhead::serve {

using Clock = std::chrono::steady_clock;

Result<std::shared_ptr<ModelHost>> ModelHost::load(const Env& env, const std::string& name, int64_t version,
                                                   const std::string& path, const ModelConfig& config) {
  std::shared_ptr<ModelHost> h(new ModelHost());
  h->name_ = name;
  h->version_ = version;
  h->config_ = config;
  for (int i = 0; i < config.instances; ++i) {
    auto s = env.load(path, config.session);
    if (!s.is_ok()) return s.status();
    h->sessions_.push_back(std::move(s).value());
    h->free_.push_back(config.instances - 1 - i);  // instance 0 is taken first
    h->last_pid_.push_back(h->sessions_.back().worker_pid());
  }
  return h;
}

ModelHost::~ModelHost() { drain(); }

Result<NamedTensors> ModelHost::infer(const NamedTensors& inputs, const std::vector<std::string>& outputs) {
  const auto t0 = Clock::now();
  const int64_t limit_ms = config_.request_timeout_ms;
  int instance = -1;
  {
    std::unique_lock lock(mu_);
    if (draining_) {
      ++stats_.refused;
      return Status(StatusCode::kUnavailable, "model '" + name_ + "' is being unloaded");
    }
    if (!free_.empty()) {
      instance = free_.back();
      free_.pop_back();
    } else {
      if (static_cast<int>(waiters_.size()) >= config_.queue_depth) {
        ++stats_.refused;
        return Status(StatusCode::kResourceExhausted,
                      "model '" + name_ + "' is busy: " + std::to_string(waiters_.size()) +
                          " requests already wait (queue_depth " + std::to_string(config_.queue_depth) + ")");
      }
      Waiter w;
      waiters_.push_back(&w);
      ++stats_.waiting;
      auto given = [&] { return w.instance >= 0 || draining_; };
      if (limit_ms > 0) {
        w.cv.wait_until(lock, t0 + std::chrono::milliseconds(limit_ms), given);
      } else {
        w.cv.wait(lock, given);
      }
      --stats_.waiting;
      if (w.instance < 0) {
        waiters_.erase(std::find(waiters_.begin(), waiters_.end(), &w));
        ++stats_.requests;
        ++stats_.failures;
        if (stats_.waiting == 0 && stats_.running == 0) idle_cv_.notify_all();
        if (draining_) return Status(StatusCode::kUnavailable, "model '" + name_ + "' is being unloaded");
        return Status(StatusCode::kDeadlineExceeded, "model '" + name_ + "': no instance became free within " +
                                                         std::to_string(limit_ms) + " ms (request_timeout_ms)");
      }
      instance = w.instance;
    }
    ++stats_.running;
  }
  RunOptions ro;
  ro.outputs = outputs;
  if (limit_ms > 0) {
    int64_t spent = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0).count();
    ro.timeout_ms = std::max<int64_t>(1, limit_ms - spent);
  }
  Session& s = sessions_[instance];
  auto r = s.run(inputs, ro);
  const double ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  {
    std::lock_guard lock(mu_);
    int pid = s.worker_pid();
    if (pid > 0 && last_pid_[instance] > 0 && pid != last_pid_[instance]) ++stats_.worker_restarts;
    if (pid > 0) last_pid_[instance] = pid;
    --stats_.running;
    record(ms, r.is_ok());
  }
  release(instance);
  if (!r.is_ok()) return r.status().with_context("model '" + name_ + "': ");
  return r;
}

void ModelHost::record(double ms, bool ok) {
  ++stats_.requests;
  ++(ok ? stats_.successes : stats_.failures);
  stats_.latency_sum_ms += ms;
  size_t b = 0;
  while (b < kLatencyBucketsMs.size() && ms > kLatencyBucketsMs[b]) ++b;
  ++stats_.latency_buckets[b];
}

std::vector<Status> ModelHost::check_workers() {
  std::vector<Status> failures;
  if (config_.session.isolation != "process") return failures;
  for (int i = 0; i < static_cast<int>(sessions_.size()); ++i) {
    {
      std::lock_guard lock(mu_);
      if (draining_) break;
      auto it = std::find(free_.begin(), free_.end(), i);
      if (it == free_.end()) continue;  // serving a request: that run finds out itself
      free_.erase(it);
      ++checking_;
    }
    Session& s = sessions_[i];
    const int before = s.worker_pid();
    Status st = s.ensure_worker();
    const int after = s.worker_pid();
    std::lock_guard lock(mu_);
    if (after > 0 && after != before) ++stats_.worker_restarts;
    if (after > 0) last_pid_[i] = after;
    if (!st.is_ok()) failures.push_back(st.with_context("model '" + name_ + "': "));
    --checking_;
    release_locked(i);
  }
  return failures;
}

void ModelHost::release(int instance) {
  std::lock_guard lock(mu_);
  release_locked(instance);
}

void ModelHost::release_locked(int instance) {
  if (!waiters_.empty() && !draining_) {
    Waiter* w = waiters_.front();
    waiters_.pop_front();
    w->instance = instance;
    w->cv.notify_one();
    return;
  }
  free_.push_back(instance);
  if (stats_.waiting == 0 && stats_.running == 0 && checking_ == 0) idle_cv_.notify_all();
}

void ModelHost::drain() {
  std::unique_lock lock(mu_);
  draining_ = true;
  for (Waiter* w : waiters_) w->cv.notify_one();
  idle_cv_.wait(lock, [&] { return stats_.waiting == 0 && stats_.running == 0 && checking_ == 0; });
}

bool ModelHost::ready() const {
  {
    std::lock_guard lock(mu_);
    if (draining_) return false;
  }
  for (const Session& s : sessions_)
    if (s.options().isolation == "process" && s.worker_pid() <= 0) return false;
  return true;
}

ModelHost::Stats ModelHost::stats() const {
  std::lock_guard lock(mu_);
  return stats_;
}

}  // namespace bulkhead::serve
