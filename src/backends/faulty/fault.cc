#include "backends/faulty/fault.h"

namespace bulkhead::faulty {

const std::vector<FaultInfo>& all_faults() {
  static const std::vector<FaultInfo> kFaults = {
      {Fault::kNone, "none", "no fault: the CPU backend's kernels and results (a control)"},
      {Fault::kSharedScratch, "shared-scratch",
       "field report A: each session uploads its weights on its first run into one device-wide scratch area at "
       "offsets counted from 0 per session, and later runs read them back from there (a later session overwrites "
       "an earlier one's weights)"},
      {Fault::kGlobalSlot, "global-slot",
       "field report B: kernels find their session's weights through a device-wide 'current session' slot that "
       "every new session overwrites (an earlier session reads the newest one's)"},
      {Fault::kDroppedDependency, "dropped-dependency",
       "field report C: one barrier per run is missing: the consumer of the k-th dispatch's output reads it "
       "(zero-filled) before the producer's write lands"},
      {Fault::kStaleReplay, "stale-replay",
       "field report D: a capture cache keyed by graph signature, not by session: another session of the same "
       "graph replays the recorder's buffers and gets the recorder's results"},
  };
  return kFaults;
}

}  // namespace bulkhead::faulty
