#include "backends/faulty/capture_cache.h"

#include <cstring>
#include <unordered_set>

#include "backends/faulty/forwarding_context.h"

namespace bulkhead::faulty {

CaptureCache::Lookup CaptureCache::find_or_record(const std::string& signature, uint64_t session) {
  std::lock_guard lock(mu_);
  auto [it, inserted] = recordings_.try_emplace(signature);
  if (inserted) {
    it->second.recorder = session;
    it->second.inputs = std::make_shared<const RecordedInputs>();
  }
  return {it->second.recorder == session, it->second.inputs};
}

void CaptureCache::publish(const std::string& signature, uint64_t session, RecordedInputs inputs) {
  auto snapshot = std::make_shared<const RecordedInputs>(std::move(inputs));
  std::lock_guard lock(mu_);
  auto it = recordings_.find(signature);
  if (it != recordings_.end() && it->second.recorder == session) it->second.inputs = std::move(snapshot);
}

size_t CaptureCache::size() const {
  std::lock_guard lock(mu_);
  return recordings_.size();
}

std::unique_ptr<CaptureRun> CaptureRun::begin(std::shared_ptr<CaptureCache> cache, const std::vector<const ir::Node*>& nodes,
                                              const std::vector<Value>& inputs, uint64_t session) {
  if (nodes.empty()) return nullptr;
  std::unique_ptr<CaptureRun> run(new CaptureRun());
  std::unordered_set<std::string> produced;
  // The signature names the graph, never the session: op types in dispatch order and the
  // shapes of the inputs this run was given.
  for (size_t p = 0; p < nodes.size(); ++p) {
    const ir::Node& n = *nodes[p];
    for (const auto& [name, a] : n.attrs)
      if (a.type == ir::AttrType::kGraph || a.type == ir::AttrType::kGraphs) return nullptr;
    run->signature_ += n.domain + "::" + n.op_type + ";";
    run->position_[&n] = static_cast<int>(p);
    std::vector<bool> internal;
    for (const auto& in : n.inputs) internal.push_back(!in.empty() && produced.count(in));
    run->internal_.push_back(std::move(internal));
    for (const auto& out : n.outputs)
      if (!out.empty()) produced.insert(out);
  }
  run->signature_ += "|";
  for (const auto& v : inputs) run->signature_ += v.describe() + ";";
  run->cache_ = std::move(cache);
  run->session_ = session;
  auto found = run->cache_->find_or_record(run->signature_, session);
  run->recorder_ = found.recorder;
  if (!found.recorder) run->replay_ = std::move(found.inputs);
  return run;
}

CaptureRun::~CaptureRun() {
  if (recorder_ && !recorded_.empty()) cache_->publish(signature_, session_, std::move(recorded_));
}

Status CaptureRun::apply(const ir::Node& node, const std::vector<bool>& constant, ForwardingContext& ctx) {
  auto pos = position_.find(&node);
  if (pos == position_.end()) return Status::ok();  // inside a subgraph: not part of the capture
  const auto& internal = internal_[pos->second];
  for (int i = 0; i < ctx.num_inputs() && static_cast<size_t>(i) < internal.size(); ++i) {
    if (internal[i] || (static_cast<size_t>(i) < constant.size() && constant[i])) continue;
    const Tensor* t = ctx.input(i);
    if (!t || t->dtype() == DataType::kString || (t->nbytes() && !t->raw())) continue;
    std::pair<int, int> key{pos->second, i};
    if (recorder_) {
      recorded_[key] = t->clone_host();
      continue;
    }
    auto rec = replay_ ? replay_->find(key) : RecordedInputs::const_iterator();
    if (!replay_ || rec == replay_->end()) continue;  // the recorder has not finished a run yet
    const Tensor& r = rec->second;
    if (r.dtype() != t->dtype() || r.shape() != t->shape()) continue;
    BH_ASSIGN_OR_RETURN(Tensor copy, ctx.allocate_scratch(r.dtype(), r.shape()));
    if (r.nbytes()) std::memcpy(copy.raw(), r.raw(), r.nbytes());
    ctx.substitute(i, Value(copy));
  }
  return Status::ok();
}

}  // namespace bulkhead::faulty
