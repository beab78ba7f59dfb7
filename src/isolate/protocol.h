// The supervisor ↔ worker protocol. One request, one reply, in lock step:
//
//   supervisor                                worker
//   kLoad  {model, options} [+ model memfd] → builds an in-process Session
//                                           ← kReady {inputs, outputs, placement, precision} | kLoadFailed {status}
//   kRun#id {inputs, outputs wanted, output region offered} [+ input region]
//                                           → runs it
//                                           ← kRunDone#id {outputs, their region} [+ new output region]
//                                             | kRunFailed#id {status}
//
// Every run carries its id and the reply must carry the same one. Tensors travel in
// shared-memory regions both sides keep mapped (value_transfer.h, output_regions.h);
// these messages hold only their descriptors, and a region's memfd travels once, with
// the first message that uses it. Decoders validate everything they read: a malformed message is an error,
// never a crash. Value types; thread-compatible.
#pragma once

#include <cstdint>
#include <string>
#include <optional>
#include <utility>
#include <vector>

#include "bulkhead/bulkhead.hpp"

namespace bulkhead::isolate {

// Bumped whenever a message changes; a worker of another version refuses to load.
constexpr uint32_t kProtocolVersion = 8;

enum MessageType : uint32_t {
  kLoad = 1,
  kReady = 2,
  kLoadFailed = 3,
  kRun = 4,
  kRunDone = 5,
  kRunFailed = 6,
};

struct LoadRequest {
  uint32_t version = kProtocolVersion;
  std::string model;        // the file for Env::load, or the name given to Env::load_bytes
  bool from_bytes = false;  // the serialized model comes in a memfd (the message's fd)
  uint64_t bytes_size = 0;
  SessionOptions options;   // isolation is always "in-process" here
};

// What the caller needs to validate inputs exactly as an in-process session does.
struct ModelInfo {
  std::vector<IoInfo> all_inputs;  // every graph input, in binding order
  std::vector<bool> required;      // false for inputs with an initializer default
  std::vector<bool> bindable;      // required inputs and overridable defaults
  std::vector<IoInfo> outputs;
  std::vector<std::pair<std::string, int>> placement;
  Session::PrecisionUse precision;  // as the worker's session runs
};

// A region lent to a run (lending.h): another session's outputs that this run's inputs
// view, which the worker maps read-only once and keeps until told to forget it.
struct LentInput {
  uint64_t uid = 0;    // the region's lend id
  uint64_t bytes = 0;  // its size
  bool fd = false;     // its descriptor comes with this message (the first time it is lent)
};

struct RunRequest {
  std::vector<std::string> outputs;  // in the order the caller wants them
  bool profile = false;
  uint64_t region_bytes = 0;         // bytes of inputs in the region (0: no region)
  // The supervisor's reusable input region (value_transfer.h ReusableRegion) these
  // inputs are in; its memfd comes with the message the first time a worker sees it.
  // 0 when region_bytes is 0.
  uint64_t region_id = 0;
  std::string values;                // value_transfer descriptors of the inputs
  // The worker's output region (an id from an earlier reply) that the outputs may be
  // written into, if they fit: no output Tensor views it any more. 0: none.
  uint64_t output_region = 0;
  // Output regions the supervisor has unmapped: the worker unmaps them too.
  std::vector<uint64_t> forget_regions;
  // The lent regions the input descriptors name (region k is lent[k - 1]). The message's
  // descriptors come in this order: the input region's first (when it is new to the
  // worker), then those of the lent regions with `fd` set.
  std::vector<LentInput> lent;
  // Lent regions (uids) the worker may unmap: forgotten before `lent` is read.
  std::vector<uint64_t> forget_lent;
  int64_t timeout_ms = -1;           // RunOptions::timeout_ms
};

struct RunReply {
  uint64_t region_bytes = 0;
  // The output region holding them: the one offered, or a new one (id never used before
  // by this worker) whose memfd comes with the reply. 0 when region_bytes is 0.
  uint64_t region_id = 0;
  std::string values;                // value_transfer descriptors of the outputs
  std::vector<NodeProfile> profile;
  // Milliseconds the worker spent on the request, from reading it to sending this reply:
  // the rest of the supervisor's wait is messaging and wake-ups (a profile's "(isolation)"
  // entries).
  double handled_ms = 0;
};

// A profiled run of a process-isolated session (RunOptions::profile) ends with entries
// of this op_type for the hand-off: "inputs copied in" (the supervisor's copy into the
// worker's input region), "outputs copied out" (the worker's copy into an output region)
// and "messages and wake-ups" (the rest of the supervisor's wait that the worker did not
// spend on the request — sending the reply included, which in a profiled run carries the
// profile itself); `shapes` gives the bytes copied ("0.00 MiB" for outputs the run
// wrote straight into the output region, KiB below a MiB: "2.0 KiB").
inline constexpr const char* kIsolationOp = "(isolation)";
// `bytes`: those copied, or none for an entry that copies nothing (messages).
NodeProfile isolation_entry(const char* what, double ms, std::optional<uint64_t> bytes);

std::string encode(const LoadRequest& r);
Result<LoadRequest> decode_load_request(const std::string& payload);
std::string encode(const ModelInfo& m);
Result<ModelInfo> decode_model_info(const std::string& payload);
std::string encode(const RunRequest& r);
Result<RunRequest> decode_run_request(const std::string& payload);
std::string encode(const RunReply& r);
Result<RunReply> decode_run_reply(const std::string& payload);
// A failed Status, carried verbatim (code and message).
std::string encode(const Status& s);
// The Status a kLoadFailed / kRunFailed carries; an internal error if malformed.
Status decode_status(const std::string& payload);

}  // namespace bulkhead::isolate
