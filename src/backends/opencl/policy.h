// Submission policies (DESIGN.md I5): how a run's kernels reach its in-order queue.
//
//   single        every kernel enqueued, one clFlush + clFinish when the run flushes
//                 (the in-order queue orders each kernel after the writes before it);
//   per-dispatch  as single, with a clEnqueueBarrierWithWaitList after every kernel;
//   split         clFlush + clFinish after every kernel: one submit per dispatch;
//   auto          as single, but submits and waits once the bytes kernels wrote since
//                 the last submit reach a threshold (default 64 MiB) — the defence
//                 against drivers that lose long chains in one submission.
//
// The device default is `auto`, or the backend option `policy=...`; a session's
// submit_policy overrides it.
#pragma once

#include <cstdint>
#include <string>

#include "status.h"

namespace bulkhead::opencl {

enum class Policy { kSingle, kPerDispatch, kSplit, kAuto };

struct SubmitPolicy {
  Policy policy = Policy::kAuto;
  uint64_t auto_bytes = uint64_t{64} << 20;  // kAuto: submit once this many bytes were written
  std::string why = "default";               // where the choice came from

  std::string to_string() const;  // "auto (64 MiB)"
};

// Parses "single", "per-dispatch", "split", "auto" or "auto:<bytes>[K|M|G]"; `what`
// names the text's source in errors.
Result<SubmitPolicy> parse_policy(const std::string& text, const std::string& what);

}  // namespace bulkhead::opencl
