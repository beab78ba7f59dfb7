#include "serve/model_host.h"

#include <algorithm>
#include <chrono>
#include <cstring>

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
  if (config.max_batch_size > 1) {
    // Requests are concatenated, and results split, along the first dimension: every input
    // and output must have it free.
    auto unbatchable = [&](const char* kind, const IoInfo& io) -> Status {
      if (io.has_shape && !io.shape.empty() && io.shape[0] < 0) return Status::ok();
      if (!io.has_shape && std::string(kind) == "output") return Status::ok();  // checked at each run
      return invalid_argument("model '" + name + "': config.json: max_batch_size: " + kind + " '" + io.name +
                              "' has no free first dimension to batch along (" +
                              (io.has_shape ? "shape " + shape_to_string(io.shape) : std::string("unknown shape")) + ")");
    };
    for (const IoInfo& io : h->sessions_[0].inputs()) BH_RETURN_IF_ERROR(unbatchable("input", io));
    for (const IoInfo& io : h->sessions_[0].outputs()) BH_RETURN_IF_ERROR(unbatchable("output", io));
  }
  return h;
}

namespace {

// The rows of a request (the first dimension, the same in every input), for batching.
Result<int64_t> batch_rows(const NamedTensors& inputs, const std::string& model, int max_rows) {
  int64_t rows = -1;
  for (const auto& [name, t] : inputs) {
    if (t.rank() < 1) return invalid_argument("model '" + model + "': input '" + name + "' has no batch dimension");
    if (rows >= 0 && t.dim(0) != rows)
      return invalid_argument("model '" + model + "': input '" + name + "' has " + std::to_string(t.dim(0)) +
                              " rows, the other inputs " + std::to_string(rows) + " (the first dimension is the batch)");
    rows = t.dim(0);
  }
  if (rows > max_rows)
    return invalid_argument("model '" + model + "': the request has " + std::to_string(rows) +
                            " rows, more than max_batch_size " + std::to_string(max_rows));
  return rows;
}

// What requests must share to run as one batch: each input's datatype and dimensions after
// the first, and the outputs asked for.
std::string batch_key(const NamedTensors& inputs, const std::vector<std::string>& outputs) {
  std::string k;
  for (const auto& [name, t] : inputs) {
    k += name + ':' + std::to_string(static_cast<int>(t.dtype()));
    for (int d = 1; d < t.rank(); ++d) k += ',' + std::to_string(t.dim(d));
    k += ';';
  }
  k += '|';
  for (const auto& o : outputs) k += o + ';';
  return k;
}

size_t row_bytes(const Tensor& t) {
  size_t n = 1;
  for (int d = 1; d < t.rank(); ++d) n *= static_cast<size_t>(t.dim(d));
  return t.dtype() == DataType::kString ? n : n * dtype_size(t.dtype());
}

// Requests' inputs, concatenated along the first dimension (same names, in the same order).
Result<NamedTensors> concat_rows(const std::vector<const NamedTensors*>& parts, int64_t total) {
  NamedTensors merged;
  const NamedTensors& first = *parts[0];
  for (size_t k = 0; k < first.size(); ++k) {
    const Tensor& a = first[k].second;
    Shape shape = a.shape();
    shape[0] = total;
    Tensor t = Tensor::host(a.dtype(), shape);
    const size_t rb = row_bytes(a);
    size_t at = 0;  // rows (strings) or bytes
    for (const NamedTensors* p : parts) {
      const Tensor& x = (*p)[k].second;
      if ((*p)[k].first != first[k].first) return internal_error("batched requests list their inputs differently");
      const size_t n = static_cast<size_t>(x.dim(0)) * rb;
      if (x.dtype() == DataType::kString) {
        std::copy(x.strings(), x.strings() + n, t.strings() + at);
      } else if (n > 0) {
        if (!x.on_host() || !x.raw()) return internal_error("input '" + first[k].first + "' is not in host memory");
        std::memcpy(static_cast<char*>(t.raw()) + at, x.raw(), n);
      }
      at += n;
    }
    merged.emplace_back(first[k].first, std::move(t));
  }
  return merged;
}

// Each request's rows of a batch's outputs (`rows`: the requests' row counts, in order).
Result<std::vector<NamedTensors>> split_rows(const NamedTensors& outputs, const std::vector<int64_t>& rows,
                                             int64_t total) {
  std::vector<NamedTensors> parts(rows.size());
  for (const auto& [name, t] : outputs) {
    if (t.rank() < 1 || t.dim(0) != total)
      return internal_error("output '" + name + "' has shape " + shape_to_string(t.shape()) + " for a batch of " +
                            std::to_string(total) + " rows: its first dimension is not the batch (max_batch_size "
                            "needs a model whose outputs follow its inputs' first dimension)");
    if (t.dtype() != DataType::kString && t.nbytes() > 0 && (!t.on_host() || !t.raw()))
      return internal_error("output '" + name + "' is not in host memory");
    const size_t rb = row_bytes(t);
    size_t at = 0;
    for (size_t i = 0; i < rows.size(); ++i) {
      Shape shape = t.shape();
      shape[0] = rows[i];
      Tensor piece = Tensor::host(t.dtype(), shape);
      const size_t n = static_cast<size_t>(rows[i]) * rb;
      if (t.dtype() == DataType::kString) {
        std::copy(t.strings() + at, t.strings() + at + n, piece.strings());
      } else if (n > 0) {
        std::memcpy(piece.raw(), static_cast<const char*>(t.raw()) + at, n);
      }
      at += n;
      parts[i].emplace_back(name, std::move(piece));
    }
  }
  return parts;
}

}  // namespace

ModelHost::~ModelHost() { drain(); }

Result<NamedTensors> ModelHost::infer(const NamedTensors& inputs, const std::vector<std::string>& outputs) {
  const auto t0 = Clock::now();
  const int64_t limit_ms = config_.request_timeout_ms;
  const int max_rows = config_.max_batch_size;
  Waiter w;  // this request, while it waits
  std::string key;
  if (max_rows > 1) {
    BH_ASSIGN_OR_RETURN(w.rows, batch_rows(inputs, name_, max_rows));
    key = batch_key(inputs, outputs);
    w.inputs = &inputs;
    if (w.rows > 0) w.key = &key;  // an empty request runs alone
  }
  int instance = -1;
  std::vector<Waiter*> batch;  // the waiting requests this one runs with
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
      waiters_.push_back(&w);
      ++stats_.waiting;
      if (max_rows > 1) batch_cv_.notify_all();
      auto given = [&] { return w.instance >= 0 || w.done || (draining_ && !w.batched); };
      if (limit_ms > 0) {
        w.cv.wait_until(lock, t0 + std::chrono::milliseconds(limit_ms), given);
      } else {
        w.cv.wait(lock, given);
      }
      // Taken into a batch: its run reads this request's inputs, so it waits for the answer.
      if (w.batched) w.cv.wait(lock, [&] { return w.done; });
      --stats_.waiting;
      if (w.done) {
        record(std::chrono::duration<double, std::milli>(Clock::now() - t0).count(), w.result->is_ok());
        if (stats_.waiting == 0 && stats_.running == 0) idle_cv_.notify_all();
        return std::move(*w.result);
      }
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
    if (w.key) {
      // Take along the matching requests waiting now, in arrival order, and wait up to
      // max_queue_delay_us after this one's arrival for more while the batch is not full.
      int64_t rows = w.rows;
      auto gather = [&] {
        for (auto it = waiters_.begin(); it != waiters_.end() && rows < max_rows;) {
          Waiter* o = *it;
          if (o->key && *o->key == key && rows + o->rows <= max_rows) {
            o->batched = true;
            rows += o->rows;
            batch.push_back(o);
            it = waiters_.erase(it);
          } else {
            ++it;
          }
        }
        return rows >= max_rows || draining_;
      };
      const auto deadline = t0 + std::chrono::microseconds(config_.max_queue_delay_us);
      while (!gather() && Clock::now() < deadline) batch_cv_.wait_until(lock, deadline);
    }
  }
  RunOptions ro;
  ro.outputs = outputs;
  if (limit_ms > 0) {
    int64_t spent = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0).count();
    ro.timeout_ms = std::max<int64_t>(1, limit_ms - spent);
  }
  Session& s = sessions_[instance];
  auto r = run_batch(instance, inputs, w.rows, outputs, batch, ro);
  const double ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  {
    std::lock_guard lock(mu_);
    int pid = s.worker_pid();
    if (pid > 0 && last_pid_[instance] > 0 && pid != last_pid_[instance]) ++stats_.worker_restarts;
    if (pid > 0) last_pid_[instance] = pid;
    --stats_.running;
    record(ms, r.is_ok());
    record_run(1 + batch.size());
    for (Waiter* o : batch) {
      o->done = true;
      o->cv.notify_one();
    }
  }
  release(instance);
  return r;
}

Result<NamedTensors> ModelHost::run_batch(int instance, const NamedTensors& inputs, int64_t rows,
                                          const std::vector<std::string>& outputs, const std::vector<Waiter*>& batch,
                                          const RunOptions& ro) {
  Session& s = sessions_[instance];
  const std::string context = "model '" + name_ + "': ";
  if (batch.empty()) {
    auto r = s.run(inputs, ro);
    if (!r.is_ok()) return r.status().with_context(context);
    return r;
  }
  // Every request of the batch gets its answer (set here, published under the lock by
  // the caller): its rows of the outputs, or the batch's failure.
  std::vector<const NamedTensors*> parts = {&inputs};
  std::vector<int64_t> counts = {rows};
  int64_t total = rows;
  for (Waiter* o : batch) {
    parts.push_back(o->inputs);
    counts.push_back(o->rows);
    total += o->rows;
  }
  auto fail_all = [&](const Status& st) -> Result<NamedTensors> {
    Status with = st.with_context(context + "a batch of " + std::to_string(batch.size() + 1) + " requests: ");
    for (Waiter* o : batch) o->result.emplace(with);
    return with;
  };
  auto merged = concat_rows(parts, total);
  if (!merged.is_ok()) return fail_all(merged.status());
  auto r = s.run(*merged, ro);
  if (!r.is_ok()) return fail_all(r.status());
  auto split = split_rows(*r, counts, total);
  if (!split.is_ok()) return fail_all(split.status());
  for (size_t i = 0; i < batch.size(); ++i) batch[i]->result.emplace(std::move((*split)[i + 1]));
  return std::move((*split)[0]);
}

void ModelHost::record_run(size_t requests) {
  ++stats_.runs;
  stats_.batched_requests += requests;
  size_t b = 0;
  while (b < kBatchBuckets.size() && static_cast<double>(requests) > kBatchBuckets[b]) ++b;
  ++stats_.batch_buckets[b];
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
  batch_cv_.notify_all();  // a batch waiting to fill runs now with what it has
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
