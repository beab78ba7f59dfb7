// The faults the `faulty` backend reproduces on purpose, one device each, in the order of
// their ordinals (faulty:0 = none, faulty:1 = shared-scratch, ...). An immutable table.
#pragma once

#include <string>
#include <vector>

namespace bulkhead::faulty {

enum class Fault {
  kNone,                // a control: the CPU backend's results
  kSharedScratch,       // field report A: one device-wide weights scratch, per-session offsets from 0
  kGlobalSlot,          // field report B: kernels find their session through a "current session" slot
  kDroppedDependency,   // field report C: one barrier inside a run is missing
  kStaleReplay,         // field report D: a captured graph is replayed with the recorder's buffers
};

struct FaultInfo {
  Fault fault;
  const char* name;    // the device's name: faulty:<name>
  const char* detail;  // what goes wrong, for `bulkhead devices`
};

// Every fault, indexed by device ordinal.
const std::vector<FaultInfo>& all_faults();

}  // namespace bulkhead::faulty
