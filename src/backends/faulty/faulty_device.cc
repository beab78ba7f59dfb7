#include "backends/faulty/faulty_device.h"

#include <cstring>

#include "backends/faulty/faulty_allocator.h"
#include "backends/faulty/faulty_kernel.h"

namespace bulkhead::faulty {
namespace {

// Both ends are CPU-addressable (host or host-visible): a memcpy.
Status copy_bytes(const Tensor& src, const Tensor& dst) {
  if (src.nbytes() != dst.nbytes())
    return invalid_argument("copy " + src.describe() + " -> " + dst.describe() + ": sizes differ");
  if (src.nbytes() == 0) return Status::ok();
  if (!src.raw() || !dst.raw())
    return invalid_argument("copy " + src.domain().to_string() + " -> " + dst.domain().to_string() +
                            ": a buffer is not CPU-addressable");
  std::memcpy(dst.raw(), src.raw(), src.nbytes());
  return Status::ok();
}

}  // namespace

FaultyDevice::FaultyDevice(Fault fault, DeviceInfo info, int dropped_dispatch, std::shared_ptr<Device> cpu,
                           std::shared_ptr<CopyRouter> router)
    : info_(std::move(info)), cpu_(std::move(cpu)), router_(std::move(router)), kernels_(wrap_kernels(cpu_, fault)) {
  faults_->fault = fault;
  faults_->dropped_dispatch = dropped_dispatch;
  domain_.id = Domain::new_id();
  domain_.backend = info_.backend;
  domain_.device = info_.ordinal;
  domain_.kind = MemoryKind::kHostVisible;
  std::string owner = info_.backend + ":" + info_.name;
  router_->add(Domain::host(), domain_, copy_bytes, owner);
  router_->add(domain_, Domain::host(), copy_bytes, owner);
  router_->add(domain_, domain_, copy_bytes, owner);
}

FaultyDevice::~FaultyDevice() { router_->remove_domain(domain_.id); }

std::shared_ptr<Allocator> FaultyDevice::create_session_allocator(const std::string& owner) {
  auto session = std::make_shared<SessionState>();
  session->id = ++sessions_;
  if (faults_->fault == Fault::kGlobalSlot) faults_->slot.set(session->weights);  // the bug: last created wins
  return std::make_shared<FaultyAllocator>(shared_from_this(), domain_, info_.backend + ":" + info_.name + ":" + owner,
                                           std::move(session));
}

std::shared_ptr<void> FaultyDevice::begin_run(const RunStart& run) {
  if (faults_->fault == Fault::kNone) return nullptr;
  auto state = std::make_shared<RunState>();
  state->fault = faults_->fault;
  state->device = faults_;
  if (auto* alloc = dynamic_cast<FaultyAllocator*>(run.session_allocator)) state->session = alloc->session();
  if (faults_->fault == Fault::kDroppedDependency && run.nodes)
    state->dropped = choose_dropped_edge(*run.nodes, faults_->dropped_dispatch);
  if (faults_->fault == Fault::kStaleReplay && run.nodes && run.inputs && state->session)
    state->capture = CaptureRun::begin(faults_->capture, *run.nodes, *run.inputs, state->session->id);
  return state;
}

}  // namespace bulkhead::faulty
