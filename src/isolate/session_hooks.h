// The two things process isolation needs from inside a Session, implemented in
// session/session.cc (they read SessionImpl). Used by the worker (worker.cc).
// Thread-safety: as Session::run_values.
#pragma once

#include "bulkhead/bulkhead.hpp"
#include "isolate/protocol.h"
#include "memory/planned_allocator.h"

namespace bulkhead::isolate {

// How `session` binds inputs (all of them, with their required/overridable flags), its
// outputs and its placement: what the supervisor needs to validate runs itself.
ModelInfo describe_session(const Session& session);

// Session::run_values, except that outputs may alias the inputs or the model's
// weights: the worker copies such outputs into shared memory before the next run, so
// the defensive copy an in-process caller needs would be a second copy here.
// `survivors`, when given, is lent to the session's host allocator for this run: the
// blocks its plan says outlive the run (the outputs) are placed there (planned_allocator.h).
Result<NamedValues> run_for_transfer(const Session& session, const NamedValues& inputs, const RunOptions& options,
                                     std::shared_ptr<SurvivorRegion> survivors = nullptr);

}  // namespace bulkhead::isolate
