// The faulty device's kernels: each wraps the CPU backend's kernel for the same node
// (obtained through the Backend interface, never from CPU headers) and adds one fault.
//   none              — the CPU kernel as it is.
//   shared-scratch,
//   global-slot       — the inner kernel is built without its weights (the floating-point
//                       constant inputs of weight-bearing operators); each call feeds it
//                       the weights the buggy device state holds, through a
//                       ForwardingContext.
//   dropped-dependency — the run's chosen producer holds its result back as a pending
//                       write (its output buffer zero-filled); the consumer computes on
//                       the zeros and then the write lands.
//   stale-replay      — inputs from outside the device's dispatches are recorded by the
//                       graph's recorder, or replaced by the recording in another session.
// Kernels are immutable; per-session and per-run state is reached through the run state
// (fault_state.h) that Device::begin_run made, so concurrent runs share nothing mutable
// beyond the device's mutex-protected parts.
#pragma once

#include <memory>

#include "backend/backend.h"
#include "backends/faulty/fault.h"

namespace bulkhead::faulty {

// A kernel table with one factory per operator of `cpu`'s table, each building the CPU
// kernel for the node's opset and wrapping it with `fault`. The table keeps `cpu` alive.
KernelTable wrap_kernels(std::shared_ptr<Device> cpu, Fault fault);

}  // namespace bulkhead::faulty
