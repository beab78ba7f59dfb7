#include "isolate/worker.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <optional>
#include <thread>

#include "isolate/channel.h"
#include "isolate/protocol.h"
#include "isolate/session_hooks.h"
#include "isolate/value_transfer.h"

namespace bulkhead::isolate {
namespace {

// The supervisor always reads its replies; this only bounds a send to one that has
// stopped reading without closing.
constexpr int kSendTimeoutMs = 60000;

// The model is loaded (parsed, optimised, its weights packed) on a thread of its own at
// this nice value: a worker started again after a crash then takes CPU from the models
// serving beside it only where they leave some (its runs, on the main thread, keep the
// normal priority; lowering a thread's priority needs no privilege, raising it would).
// 10: under full load the load still gets about a tenth of a core.
constexpr int kLoadNice = 10;

class Worker {
 public:
  explicit Worker(UniqueFd socket) : channel_(std::move(socket)) {}

  int serve() {
    for (;;) {
      Message m;
      std::string error;
      switch (channel_.recv(m, -1, &error)) {
        case RecvState::kClosed: return 0;  // the supervisor is done with us
        case RecvState::kTimeout: continue;
        case RecvState::kError:
          std::fprintf(stderr, "bulkhead worker: %s\n", error.c_str());
          return 1;
        case RecvState::kOk: break;
      }
      bool ok = true;
      if (m.type == kLoad) ok = load(m);
      else if (m.type == kRun) ok = run(m);
      else {
        std::fprintf(stderr, "bulkhead worker: unexpected message type %u\n", m.type);
        return 1;
      }
      if (!ok) return 0;  // the supervisor went while we answered
    }
  }

 private:
  bool reply(uint32_t type, uint64_t id, const std::string& payload, const std::vector<int>& fds = {}) {
    return channel_.send(type, id, payload, fds, kSendTimeoutMs).is_ok();
  }

  bool load(Message& m) {
    if (session_) return reply(kLoadFailed, 0, encode(internal_error("the worker has a model already")));
    auto req = decode_load_request(m.payload);
    if (!req.is_ok()) return reply(kLoadFailed, 0, encode(req.status()));
    SessionOptions options = req->options;
    options.isolation = "in-process";
    Result<Session> s = Status(StatusCode::kInternal, "no model");
    std::string bytes;
    if (req->from_bytes) {
      if (m.fds.size() != 1) return reply(kLoadFailed, 0, encode(internal_error("the model's bytes did not arrive")));
      auto region = shm_->map(std::move(m.fds[0]), req->bytes_size, "model '" + req->model + "'");
      if (!region.is_ok()) return reply(kLoadFailed, 0, encode(region.status()));
      bytes.assign(static_cast<const char*>((*region)->data()), req->bytes_size);
      region->reset();
    }
    std::thread loader([&] {
      (void)setpriority(PRIO_PROCESS, static_cast<id_t>(syscall(SYS_gettid)), kLoadNice);  // best effort
      s = req->from_bytes ? env_.load_bytes(bytes, req->model, options) : env_.load(req->model, options);
    });
    loader.join();
    if (!s.is_ok()) return reply(kLoadFailed, 0, encode(s.status()));
    session_ = std::move(s).value();
    return reply(kReady, 0, encode(describe_session(*session_)));
  }

  bool run(Message& m) {
    Status st = run_inner(m);
    if (st.is_ok()) return true;
    return reply(kRunFailed, m.id, encode(st));
  }

  // Answers the run on success; returns the error to report otherwise.
  Status run_inner(Message& m) {
    const auto got = std::chrono::steady_clock::now();
    auto ms_since = [](std::chrono::steady_clock::time_point t) {
      return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t).count();
    };
    if (!session_) return internal_error("the worker has no model loaded");
    BH_ASSIGN_OR_RETURN(RunRequest req, decode_run_request(m.payload));
    for (uint64_t id : req.forget_regions) {
      out_regions_.erase(id);
      lent_.erase(id);  // blocks still living in it keep its mapping themselves
    }
    // The offered output region is lent to the run for its outputs (written there, not
    // copied), unless a block of the run it was last lent to still lives in it (a failed
    // run's, or one a kernel kept): then it is not used at all, not even for copies.
    std::shared_ptr<SurvivorRegion> survivors;
    bool offered_usable = true;
    if (req.output_region) {
      auto it = out_regions_.find(req.output_region);
      auto last = lent_.find(req.output_region);
      offered_usable = last == lent_.end() || last->second->live() == 0;
      if (it != out_regions_.end() && offered_usable) {
        survivors = std::make_shared<SurvivorRegion>(static_cast<char*>(it->second->data()), it->second->size(), it->second);
        lent_[req.output_region] = survivors;
      }
    }
    for (uint64_t uid : req.forget_lent) lent_in_.erase(uid);
    // The message's descriptors: the input region's when it is new, then the lent ones'.
    const size_t lent_fds =
        static_cast<size_t>(std::count_if(req.lent.begin(), req.lent.end(), [](const LentInput& l) { return l.fd; }));
    if (m.fds.size() < lent_fds || m.fds.size() > lent_fds + 1) return internal_error("the run's regions did not arrive");
    const bool new_inputs = m.fds.size() == lent_fds + 1;
    std::shared_ptr<Buffer> region;
    if (req.region_bytes) {
      // The supervisor's reusable input region: mapped once, kept while it is current.
      if (new_inputs) {
        BH_ASSIGN_OR_RETURN(inputs_, shm_->map_readonly(std::move(m.fds[0]), req.region_bytes, "inputs"));
        inputs_id_ = req.region_id;
      } else if (req.region_id == 0 || req.region_id != inputs_id_ || !inputs_) {
        return internal_error("the input region did not arrive");
      }
      if (inputs_->size() < req.region_bytes) return internal_error("the input region is smaller than its inputs");
      region = inputs_;
    } else if (new_inputs) {
      return internal_error("an input region came with inputs that have no bytes");
    }
    // Regions lent to the run (another session's outputs for this one): mapped
    // read-only the first time, kept until the supervisor forgets them.
    std::vector<std::shared_ptr<Buffer>> lent;
    size_t next_fd = new_inputs ? 1 : 0;
    for (const LentInput& l : req.lent) {
      if (l.fd) {
        if (lent_in_.count(l.uid)) return internal_error("lent region " + std::to_string(l.uid) + " arrived twice");
        BH_ASSIGN_OR_RETURN(lent_in_[l.uid], shm_->map_readonly(std::move(m.fds[next_fd++]), l.bytes, "lent region"));
      }
      auto it = lent_in_.find(l.uid);
      if (it == lent_in_.end()) return internal_error("lent region " + std::to_string(l.uid) + " did not arrive");
      if (it->second->size() < l.bytes) return internal_error("lent region " + std::to_string(l.uid) + " is short");
      lent.push_back(it->second);
    }
    NamedValues outs;
    std::vector<NodeProfile> profile;
    {
      // Inputs are views of the supervisor's region: no copy.
      BH_ASSIGN_OR_RETURN(NamedValues inputs, unpack_values(req.values, region, req.region_bytes, "input", lent));
      region.reset();
      lent.clear();
      RunOptions ro;
      ro.outputs = req.outputs;
      ro.timeout_ms = req.timeout_ms;
      if (req.profile) ro.profile = &profile;
      BH_ASSIGN_OR_RETURN(outs, run_for_transfer(*session_, inputs, ro, survivors));
    }
    // The outputs the run wrote into the offered region stay there; the one copy of the
    // others (they may alias the inputs, which are still mapped) goes into that region
    // when they fit (no Tensor of the supervisor's views it any more), else everything
    // into a new one it will map.
    DeviceCopy to_host = [this](const Tensor& src, const Tensor& dst) { return env_.copy(src, dst); };
    uint64_t used = 0;
    bool made = false;
    bool avoid_offered = !offered_usable;
    RegionSource into = [&](uint64_t bytes) -> Result<std::shared_ptr<Buffer>> {
      if (req.output_region && !avoid_offered) {
        auto it = out_regions_.find(req.output_region);
        if (it == out_regions_.end())
          return internal_error("output region " + std::to_string(req.output_region) + " is not this worker's");
        if (it->second->size() >= bytes) {
          used = it->first;
          return it->second;
        }
      }
      BH_ASSIGN_OR_RETURN(std::shared_ptr<Buffer> fresh, shm_->allocate(bytes));
      used = ++last_region_id_;
      made = true;
      out_regions_[used] = fresh;
      return fresh;
    };
    const auto pack_start = std::chrono::steady_clock::now();
    InPlace in_place;
    if (survivors && survivors->used()) in_place = {survivors->base(), survivors->used()};
    auto packed = pack_values(outs, into, "output", to_host, in_place);
    outs.clear();
    if (packed.is_ok() && survivors && survivors->live() > 0 && used == req.output_region) {
      // Something of the run other than its outputs still lives in the offered region
      // (a kernel kept a block the plan took for an output): the supervisor must not get
      // that region. The outputs go into another one; this one is not lent again while
      // such a block lives (lent_).
      auto views = unpack_values(packed->descriptors, packed->region, packed->region_bytes, "output");
      if (!views.is_ok()) return views.status();
      avoid_offered = true;
      packed = pack_values(*views, into, "output", to_host);
    }
    if (req.profile && packed.is_ok())
      profile.push_back(isolation_entry("outputs copied out", ms_since(pack_start), packed->copied_bytes));
    if (!packed.is_ok()) {
      if (made) out_regions_.erase(used);  // the supervisor never heard of it
      return packed.status();
    }
    RunReply answer;
    answer.region_bytes = packed->region_bytes;
    answer.region_id = packed->region_bytes ? used : 0;
    answer.values = std::move(packed->descriptors);
    answer.profile = std::move(profile);
    std::vector<int> fds;
    if (made) fds.push_back(SharedMemory::fd_of(*packed->region));
    answer.handled_ms = ms_since(got);
    if (!reply(kRunDone, m.id, encode(answer), fds)) return Status(StatusCode::kUnavailable, "supervisor gone");
    return Status::ok();
  }

  Channel channel_;
  Env env_;
  std::optional<Session> session_;
  std::shared_ptr<SharedMemory> shm_ = SharedMemory::create("worker");
  std::shared_ptr<Buffer> inputs_;  // read-only mapping of the supervisor's input region
  uint64_t inputs_id_ = 0;
  // Read-only mappings of regions lent to runs (lending.h), by uid, until forgotten.
  std::map<uint64_t, std::shared_ptr<Buffer>> lent_in_;
  // Output regions (output_regions.h), by id, until the supervisor forgets them.
  std::map<uint64_t, std::shared_ptr<Buffer>> out_regions_;
  // The run each output region was last lent to (SurvivorRegion), by id: lent again only
  // when no block of that run lives in it.
  std::map<uint64_t, std::shared_ptr<SurvivorRegion>> lent_;
  uint64_t last_region_id_ = 0;
};

}  // namespace

int worker_main(int fd, int parent) {
  // Die with the supervisor (its launcher thread, see child_process.h); if it went
  // before this was asked, nobody will ever talk to us.
  if (parent > 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) return 3;
  }
  struct stat st {};
  if (fd < 0 || fstat(fd, &st) != 0 || !S_ISSOCK(st.st_mode)) {
    std::fprintf(stderr,
                 "bulkhead worker: --fd %d is not an open socket (this subcommand serves process isolation and is "
                 "started by it)\n",
                 fd);
    return 2;
  }
  fcntl(fd, F_SETFD, FD_CLOEXEC);
  Worker w{UniqueFd(fd)};
  return w.serve();
}

}  // namespace bulkhead::isolate
