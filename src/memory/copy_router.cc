#include "memory/copy_router.h"

#include <cstring>
#include <mutex>

namespace bulkhead {

void CopyRouter::add(const Domain& src, const Domain& dst, CopyFn fn, const std::string& owner) {
  std::unique_lock lock(mu_);
  table_[{src.id, dst.id}] = Entry{std::move(fn), owner};
}

void CopyRouter::remove_domain(uint64_t id) {
  std::unique_lock lock(mu_);
  for (auto it = table_.begin(); it != table_.end();) {
    if (it->first.first == id || it->first.second == id) it = table_.erase(it);
    else ++it;
  }
}

size_t CopyRouter::size() const {
  std::shared_lock lock(mu_);
  return table_.size();
}

bool CopyRouter::can_copy(const Domain& src, const Domain& dst) const {
  if (src.is_host() && dst.is_host()) return true;
  std::shared_lock lock(mu_);
  return table_.count({src.id, dst.id}) != 0 || (table_.count({src.id, 0}) && table_.count({0, dst.id}));
}

std::string CopyRouter::route_name(const Domain& src, const Domain& dst) const {
  if (src.is_host() && dst.is_host()) return "host";
  std::shared_lock lock(mu_);
  auto it = table_.find({src.id, dst.id});
  if (it != table_.end()) return it->second.owner;
  auto out = table_.find({src.id, 0}), in = table_.find({0, dst.id});
  if (out != table_.end() && in != table_.end()) return out->second.owner + " → host → " + in->second.owner;
  return std::string();
}

Status CopyRouter::copy(const Tensor& src, const Tensor& dst) const {
  if (src.dtype() != dst.dtype() || src.numel() != dst.numel())
    return invalid_argument("copy from " + src.describe() + " to " + dst.describe() + ": element types or counts differ");
  Domain s = src.domain(), d = dst.domain();
  if (s.is_host() && d.is_host()) {
    if (src.dtype() == DataType::kString) {
      for (int64_t i = 0; i < src.numel(); ++i) dst.strings()[i] = src.strings()[i];
    } else if (src.nbytes()) {
      std::memmove(dst.raw(), src.raw(), src.nbytes());
    }
    return Status::ok();
  }
  CopyFn fn, out, in;
  {
    std::shared_lock lock(mu_);
    auto it = table_.find({s.id, d.id});
    if (it != table_.end()) {
      fn = it->second.fn;
    } else {
      // Between two devices with no transfer of their own (two backends): staged
      // through host memory, by each end's own transfer.
      auto o = table_.find({s.id, 0}), i = table_.find({0, d.id});
      if (o == table_.end() || i == table_.end() || src.dtype() == DataType::kString)
        return unsupported("no transfer is registered from " + s.to_string() + " to " + d.to_string() +
                           " (is the device that owns one of them still open?)");
      out = o->second.fn;
      in = i->second.fn;
    }
  }
  if (fn) return fn(src, dst);
  Tensor staged = Tensor::host(src.dtype(), src.shape());
  BH_RETURN_IF_ERROR(out(src, staged));
  return in(staged, dst);
}

}  // namespace bulkhead
