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
  return table_.count({src.id, dst.id}) != 0;
}

std::string CopyRouter::route_name(const Domain& src, const Domain& dst) const {
  if (src.is_host() && dst.is_host()) return "host";
  std::shared_lock lock(mu_);
  auto it = table_.find({src.id, dst.id});
  return it == table_.end() ? std::string() : it->second.owner;
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
  CopyFn fn;
  {
    std::shared_lock lock(mu_);
    auto it = table_.find({s.id, d.id});
    if (it == table_.end())
      return unsupported("no transfer is registered from " + s.to_string() + " to " + d.to_string() +
                         " (is the device that owns one of them still open?)");
    fn = it->second.fn;
  }
  return fn(src, dst);
}

}  // namespace bulkhead
