#include "isolate/remote_session.h"

#include <signal.h>
#include <sys/socket.h>

#include <algorithm>
#include <chrono>
#include <cerrno>
#include <cstring>
#include <utility>

namespace bulkhead::isolate {
namespace {

// Loading may legitimately take longer than a run (a large model, first-time setup):
// it gets at least this long, and worker_timeout_ms when that is longer.
constexpr int kMinLoadTimeoutMs = 60000;
// A worker told to go (its socket closed) gets this long before SIGKILL.
constexpr int kGracefulExitMs = 200;
// After SIGKILL, how long to wait for the kernel to finish it before moving on (it is
// then reaped later, at the latest when the session goes).
constexpr int kReapMs = 5000;
constexpr const char* kNextRun = "; a fresh worker will serve the next run";

}  // namespace

Result<std::unique_ptr<RemoteSession>> RemoteSession::create(const ModelSource& source, const SessionOptions& options) {
  if (options.worker_timeout_ms <= 0)
    return invalid_argument("worker_timeout_ms must be > 0, got " + std::to_string(options.worker_timeout_ms));
  BH_ASSIGN_OR_RETURN(std::string binary, resolve_worker_binary(options.worker_binary));
  std::unique_ptr<RemoteSession> r(new RemoteSession());
  r->binary_ = std::move(binary);
  r->model_name_ = source.name;
  r->from_bytes_ = source.from_bytes;
  r->timeout_ms_ = options.worker_timeout_ms;
  r->worker_options_ = options;
  r->worker_options_.isolation = "in-process";
  r->worker_options_.worker_binary.clear();
  if (source.from_bytes) {
    // Kept for the session's life: a fresh worker loads the same bytes.
    BH_ASSIGN_OR_RETURN(r->model_bytes_, SharedMemory::create_region(source.bytes->size()));
    BH_RETURN_IF_ERROR(SharedMemory::write(r->model_bytes_.get(), 0, source.bytes->data(), source.bytes->size()));
    BH_RETURN_IF_ERROR(SharedMemory::seal(r->model_bytes_.get()));
    r->model_size_ = source.bytes->size();
  }
  std::lock_guard<std::mutex> l(r->mu_);
  BH_RETURN_IF_ERROR(r->start_worker());
  return r;
}

RemoteSession::~RemoteSession() {
  std::lock_guard<std::mutex> l(mu_);
  std::string how;
  end_worker(false, &how);
  for (pid_t p : unreaped_) reap_child(p, kReapMs, &how);
}

std::string RemoteSession::who() const {
  return "worker process " + std::to_string(worker_.pid) + " for '" + model_name_ + "'";
}

void RemoteSession::end_worker(bool kill_first, std::string* how) {
  if (worker_.pid < 0) return;
  const pid_t pid = worker_.pid;
  // Closing the socket is the request to leave; a worker that is busy, stopped or hung
  // does not hear it, so SIGKILL follows after a moment.
  worker_.channel.reset();
  if (kill_first) kill(pid, SIGKILL);
  if (!reap_child(pid, kill_first ? kReapMs : kGracefulExitMs, how)) {
    if (!kill_first) kill(pid, SIGKILL);
    if (kill_first || !reap_child(pid, kReapMs, how)) {
      unreaped_.push_back(pid);
      *how = "did not go away after SIGKILL";
    }
  }
  worker_.pid = -1;
  pid_.store(-1);
}

Status RemoteSession::worker_failed(const std::string& what, bool kill_first, bool in_run) {
  std::string me = who(), how;
  end_worker(kill_first, &how);
  std::string msg = me + " " + what;
  if (what.find("%s") != std::string::npos) msg.replace(msg.find("%s"), 2, how);
  return Status(StatusCode::kUnavailable, in_run ? msg + kNextRun : msg);
}

Status RemoteSession::start_worker() {
  // Killed workers that were slow to go: reap them now if they have.
  for (size_t i = 0; i < unreaped_.size();) {
    std::string how;
    if (reap_child(unreaped_[i], 0, &how)) unreaped_.erase(unreaped_.begin() + static_cast<long>(i));
    else ++i;
  }
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0)
    return Status(StatusCode::kResourceExhausted, std::string("cannot create a socket pair: ") + std::strerror(errno));
  UniqueFd mine(sv[0]), theirs(sv[1]);
  BH_ASSIGN_OR_RETURN(pid_t pid, launcher_.start(binary_, theirs.get()));
  theirs.reset();
  worker_.pid = pid;
  worker_.channel = std::make_unique<Channel>(std::move(mine));
  inputs_sent_id_ = 0;
  lent_mapped_.clear();
  lent_unsure_.clear();
  outputs_->new_worker();

  const int load_timeout = std::max(timeout_ms_, kMinLoadTimeoutMs);
  LoadRequest req;
  req.model = model_name_;
  req.from_bytes = from_bytes_;
  req.bytes_size = model_size_;
  req.options = worker_options_;
  std::vector<int> fds;
  if (from_bytes_) fds.push_back(model_bytes_.get());
  Status sent = worker_.channel->send(kLoad, 0, encode(req), fds, load_timeout);
  Message reply;
  std::string error;
  RecvState st = sent.is_ok() ? worker_.channel->recv(reply, load_timeout, &error) : RecvState::kClosed;
  switch (st) {
    case RecvState::kTimeout:
      return worker_failed("did not load the model within " + std::to_string(load_timeout) + " ms (killed)", true, false);
    case RecvState::kClosed: {
      std::string me = who(), how;
      end_worker(false, &how);
      if (how.rfind("killed", 0) == 0)
        return Status(StatusCode::kUnavailable, me + " died while loading the model (" + how + ")");
      return Status(StatusCode::kUnavailable, me + " (program '" + binary_ + "') " + how +
                                                  " before it was ready: is it the bulkhead program, of this build?");
    }
    case RecvState::kError:
      return worker_failed("broke the protocol while loading: " + error + " (killed)", true, false);
    case RecvState::kOk: break;
  }
  if (reply.type == kLoadFailed) {
    std::string how;
    end_worker(false, &how);
    return decode_status(reply.payload);  // verbatim: the worker's own error
  }
  if (reply.type != kReady)
    return worker_failed("broke the protocol: answered the load with message type " + std::to_string(reply.type) + " (killed)",
                         true, false);
  auto info = decode_model_info(reply.payload);
  if (!info.is_ok()) return worker_failed(info.status().message() + " (killed)", true, false);
  if (!have_info_) {
    info_ = std::move(info).value();
    have_info_ = true;
  } else if (encode(*info) != encode(info_)) {
    // A replacement worker loaded the file again and found another model: callers
    // validate against the first one, so this one must not serve them.
    return worker_failed("loaded a model whose inputs or outputs differ from the session's (did '" + model_name_ +
                             "' change on disk?)",
                         false, false);
  }
  pid_.store(pid);  // only now: a worker still loading the model is not yet serving
  return Status::ok();
}

Status RemoteSession::ensure_worker() {
  std::lock_guard<std::mutex> l(mu_);
  return ensure_worker_locked();
}

Status RemoteSession::ensure_worker_locked() {
  if (worker_.pid >= 0 && worker_.channel->peer_closed()) {
    // It died between runs: nobody's run was affected, so just replace it.
    std::string how;
    end_worker(false, &how);
  }
  if (worker_.pid < 0) {
    Status s = start_worker();
    if (!s.is_ok()) return s.with_context("cannot start a fresh worker for '" + model_name_ + "': ");
  }
  return Status::ok();
}

Result<NamedValues> RemoteSession::run(const NamedValues& inputs, const std::vector<std::string>& outputs,
                                       std::vector<NodeProfile>* profile, int64_t timeout_ms, uint64_t outputs_for) {
  std::lock_guard<std::mutex> l(mu_);
  BH_RETURN_IF_ERROR(ensure_worker_locked());

  using Clock = std::chrono::steady_clock;
  auto ms_between = [](Clock::time_point a, Clock::time_point b) {
    return std::chrono::duration<double, std::milli>(b - a).count();
  };
  // The one copy of the inputs: into the region the worker maps (written only here,
  // between runs, and mapped read-only there).
  const auto pack_start = Clock::now();
  // Inputs in regions lent to this session (another session's outputs for it) are read
  // there by the worker; at most kMaxLent regions per run, the rest copied.
  std::vector<LendableRegion> lending;
  for (const auto& [name, v] : inputs) {
    for (const Tensor* t : tensors_of(v)) {
      const std::shared_ptr<Buffer>& b = t->buffer();
      auto* from = b ? dynamic_cast<const LendingAllocator*>(b->allocator()) : nullptr;
      if (!from || lending.size() == kMaxLent) continue;
      std::optional<LendableRegion> l = from->lendable(*b, lend_id_);
      if (l && std::none_of(lending.begin(), lending.end(), [&](const LendableRegion& o) { return o.uid == l->uid; }))
        lending.push_back(*l);
    }
  }
  std::vector<LentSpan> spans;
  for (const LendableRegion& l : lending) spans.push_back({l.base, l.size});
  BH_ASSIGN_OR_RETURN(PackedValues packed,
                      pack_values(inputs, [this](uint64_t n) { return inputs_.get(*shm_, n); }, "input", {}, {}, spans));
  RunRequest req;
  req.outputs = outputs;
  req.profile = profile != nullptr;
  req.timeout_ms = timeout_ms;
  req.region_bytes = packed.region_bytes;
  req.values = std::move(packed.descriptors);
  std::vector<int> fds;
  if (packed.region_bytes) {
    req.region_id = inputs_.id;
    if (inputs_sent_id_ != inputs_.id) fds.push_back(SharedMemory::fd_of(*inputs_.mapping));
  }
  // The lent regions' descriptors follow the input region's, the first time each is lent
  // to this worker; the least recently lent beyond kMaxLent are forgotten.
  req.forget_lent = std::exchange(lent_unsure_, {});
  std::vector<uint64_t> lent_fresh;  // sent with their descriptors in this run
  for (const LendableRegion& l : lending) {
    auto known = std::find(lent_mapped_.begin(), lent_mapped_.end(), l.uid);
    req.lent.push_back({l.uid, l.size, known == lent_mapped_.end()});
    if (known == lent_mapped_.end()) {
      fds.push_back(l.fd);
      lent_fresh.push_back(l.uid);
    } else {
      lent_mapped_.erase(known);
    }
    lent_mapped_.push_back(l.uid);
  }
  while (lent_mapped_.size() > kMaxLent) {
    req.forget_lent.push_back(lent_mapped_.front());
    lent_mapped_.erase(lent_mapped_.begin());
  }
  // The outputs go into a region no caller's Tensor views any more, if one fits (one
  // made for the session they are for, when they are for one).
  req.output_region = outputs_->offer(last_output_bytes_, outputs_for);
  req.forget_regions = outputs_->forgotten();
  struct Withdraw {
    OutputRegions& regions;
    ~Withdraw() { regions.withdraw(); }  // no-op once the offer is taken
  } withdraw{*outputs_};

  const auto sending = Clock::now();
  const double inputs_ms = ms_between(pack_start, sending);
  const uint64_t id = ++last_run_id_;
  bool closed = false;
  Status sent = worker_.channel->send(kRun, id, encode(req), fds, timeout_ms_, &closed);
  packed.region.reset();
  if (sent.is_ok() && req.region_id) inputs_sent_id_ = req.region_id;
  if (!sent.is_ok()) {
    if (closed) return worker_failed("died during the run (%s)", false);
    return worker_failed("did not take the run within " + std::to_string(timeout_ms_) + " ms (killed)", true);
  }
  Message reply;
  std::string error;
  const RecvState received = worker_.channel->recv(reply, timeout_ms_, &error);
  const double waited_ms = ms_between(sending, Clock::now());
  switch (received) {
    case RecvState::kTimeout:
      return worker_failed("did not answer within " + std::to_string(timeout_ms_) + " ms (killed)", true);
    case RecvState::kClosed: return worker_failed("died during the run (%s)", false);
    case RecvState::kError: return worker_failed("broke the protocol: " + error + " (killed)", true);
    case RecvState::kOk: break;
  }
  // Never hand back another run's outputs.
  if (reply.id != id)
    return worker_failed("broke the protocol: answered run #" + std::to_string(reply.id) + " when run #" +
                             std::to_string(id) + " was asked (killed)",
                         true);
  if (reply.type == kRunFailed) {
    // The worker may have failed before mapping the regions sent to it.
    for (uint64_t uid : lent_fresh) {
      auto it = std::find(lent_mapped_.begin(), lent_mapped_.end(), uid);
      if (it != lent_mapped_.end()) lent_mapped_.erase(it);
      lent_unsure_.push_back(uid);
    }
    return decode_status(reply.payload);
  }
  if (reply.type != kRunDone)
    return worker_failed("broke the protocol: answered a run with message type " + std::to_string(reply.type) + " (killed)", true);
  auto answer = decode_run_reply(reply.payload);
  if (!answer.is_ok()) return worker_failed(answer.status().message() + " (killed)", true);
  if (reply.fds.size() > (answer->region_bytes ? 1u : 0u))
    return worker_failed("broke the protocol: sent " + std::to_string(reply.fds.size()) + " regions for the outputs (killed)", true);
  std::shared_ptr<Buffer> region;
  if (answer->region_bytes) {
    UniqueFd fd;
    if (!reply.fds.empty()) fd = std::move(reply.fds[0]);
    auto lease = outputs_->take(answer->region_id, std::move(fd), answer->region_bytes, "outputs of " + who());
    if (!lease.is_ok()) return worker_failed("sent unusable outputs: " + lease.status().message() + " (killed)", true);
    region = std::move(lease).value();
  }
  last_output_bytes_ = answer->region_bytes;
  // The outputs are views of the mapping: no second copy.
  auto values = unpack_values(answer->values, region, answer->region_bytes, "output");
  if (!values.is_ok()) return worker_failed("sent unusable outputs: " + values.status().message() + " (killed)", true);
  bool names_match = values->size() == outputs.size();
  for (size_t i = 0; names_match && i < outputs.size(); ++i) names_match = (*values)[i].first == outputs[i];
  if (!names_match) return worker_failed("broke the protocol: returned outputs other than those asked for (killed)", true);
  if (profile) {
    profile->insert(profile->end(), answer->profile.begin(), answer->profile.end());
    profile->push_back(isolation_entry("inputs copied in", inputs_ms, req.region_bytes));
    profile->push_back(isolation_entry("messages and wake-ups", std::max(0.0, waited_ms - answer->handled_ms), std::nullopt));
  }
  return std::move(values).value();
}

}  // namespace bulkhead::isolate
