#include "kernel.h"

#include "device.h"
#include "session.h"

namespace bulkhead::opencl {

Status Kernel::compute(const BhpKernelCall& call) const {
  if (call.run) {
    Run& run = *reinterpret_cast<Run*>(call.run);
    if (&run.session().device() != &device_)
      return invalid_argument(where_ + "the run belongs to another device than this kernel");
    Call c(where_, call, run.stream(), device_);
    OCL_TRY(c.init());
    return op_->compute(c);
  }
  // Outside a run (constant folding): a queue of this call's own, done when this returns.
  OCL_ASSIGN(QueueHandle queue, device_.make_queue());
  QueueSlot slot(device_, std::move(queue));
  SubmitPolicy single;
  single.policy = Policy::kSingle;
  Stream stream(device_, slot, single, false);
  Call c(where_, call, stream, device_);
  OCL_TRY(c.init());
  Status s = op_->compute(c);
  const Status done = stream.submit();
  return s.is_ok() ? done : s;
}

}  // namespace bulkhead::opencl
