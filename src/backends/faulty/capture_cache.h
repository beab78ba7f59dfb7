// Field report D's bug: the device caches captured graphs by the graph's signature (op
// types and input shapes), not by the session that recorded them. The first session to
// run a graph records it; its own later runs replay correctly (they copy their new inputs
// into the recorded input buffers first); another session with the same signature
// replays the recording and so computes on the recorder's last inputs.
//
// CaptureCache is device-wide (owned by the device, so it goes with the device's
// teardown; thread-safe). Recorded inputs are immutable host copies published whole
// under the mutex: a replay reads a snapshot while the recorder publishes the next one.
// CaptureRun is one run's view (used by the run's thread only).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "backend/kernel.h"
#include "ir/graph.h"

namespace bulkhead::faulty {

class ForwardingContext;

// A recording's input buffers: (dispatch position, input index) -> the bytes the recorder
// last fed there from outside the device's own dispatches (graph inputs, mostly).
using RecordedInputs = std::map<std::pair<int, int>, Tensor>;

class CaptureCache {
 public:
  struct Lookup {
    bool recorder = false;                         // this session recorded the graph
    std::shared_ptr<const RecordedInputs> inputs;  // the recorder's last inputs (may be empty)
  };
  // Finds the recording of `signature`; the first session to ask becomes its recorder.
  Lookup find_or_record(const std::string& signature, uint64_t session);
  // The recorder's latest inputs become the recording's (ignored from any other session).
  void publish(const std::string& signature, uint64_t session, RecordedInputs inputs);
  size_t size() const;

 private:
  struct Recording {
    uint64_t recorder = 0;
    std::shared_ptr<const RecordedInputs> inputs;
  };
  mutable std::mutex mu_;
  std::map<std::string, Recording> recordings_;
};

class CaptureRun {
 public:
  // The capture for one run of `nodes` (one device's dispatches) with `inputs`, or
  // nullptr when capture is off: graphs with control flow are never captured.
  static std::unique_ptr<CaptureRun> begin(std::shared_ptr<CaptureCache> cache, const std::vector<const ir::Node*>& nodes,
                                           const std::vector<Value>& inputs, uint64_t session);
  CaptureRun(const CaptureRun&) = delete;
  CaptureRun& operator=(const CaptureRun&) = delete;
  // A recorder's run publishes the inputs it fed.
  ~CaptureRun();

  // Before `node` computes: each input it reads from outside the device's own dispatches
  // (and that is not one of the kernel's constants) is recorded, or — in a replay — read
  // from the recording instead (a copy in `ctx`'s scratch memory).
  Status apply(const ir::Node& node, const std::vector<bool>& constant, ForwardingContext& ctx);

 private:
  CaptureRun() = default;
  std::shared_ptr<CaptureCache> cache_;
  std::string signature_;
  uint64_t session_ = 0;
  bool recorder_ = false;
  std::shared_ptr<const RecordedInputs> replay_;
  RecordedInputs recorded_;
  std::unordered_map<const ir::Node*, int> position_;
  std::vector<std::vector<bool>> internal_;  // per position: input produced by an earlier dispatch here
};

}  // namespace bulkhead::faulty
