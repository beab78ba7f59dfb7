#include "backend/shared_constants.h"

#include "memory/host_pages.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <sstream>

namespace bulkhead {
namespace {

// A fast content hash (64-bit multiply-xor over 8-byte words). Equal hashes are checked
// with memcmp, so this only needs to spread distinct weights apart.
uint64_t content_hash(const void* data, size_t n, DataType dtype, const Shape& shape) {
  constexpr uint64_t kMul = 0x9E3779B97F4A7C15ull;
  uint64_t h = 0xCBF29CE484222325ull ^ (static_cast<uint64_t>(dtype) << 56) ^ n;
  for (int64_t d : shape) h = (h ^ static_cast<uint64_t>(d)) * kMul;
  const unsigned char* p = static_cast<const unsigned char*>(data);
  size_t i = 0;
  // Four independent lanes so the loop is not one long multiply chain.
  uint64_t a = h, b = h ^ 1, c = h ^ 2, e = h ^ 3;
  for (; i + 32 <= n; i += 32) {
    uint64_t w[4];
    std::memcpy(w, p + i, 32);
    a = (a ^ w[0]) * kMul;
    b = (b ^ w[1]) * kMul;
    c = (c ^ w[2]) * kMul;
    e = (e ^ w[3]) * kMul;
  }
  h = ((a ^ (b >> 29)) * kMul) ^ ((c ^ (e >> 31)) * kMul);
  for (; i + 8 <= n; i += 8) {
    uint64_t w;
    std::memcpy(&w, p + i, 8);
    h = (h ^ w) * kMul;
  }
  for (; i < n; ++i) h = (h ^ p[i]) * kMul;
  return h ^ (h >> 32);
}

constexpr size_t kPruneEvery = 256;

}  // namespace

Tensor SharedConstants::intern(const Tensor& t) {
  if (!t.defined() || t.dtype() == DataType::kString || !t.buffer() || !t.on_host() || t.raw() == nullptr) return t;
  const size_t n = t.nbytes();
  if (n < kMinBytes || t.offset() + n > t.buffer()->size()) return t;
  const uint64_t h = content_hash(t.raw(), n, t.dtype(), t.shape());

  // Candidates are collected under the lock and compared outside it: the bytes of a live
  // entry never change (they are immutable), and the candidate's buffer is held meanwhile.
  std::vector<Tensor> candidates;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto [lo, hi] = tensors_.equal_range(h);
    for (auto it = lo; it != hi; ++it) {
      const TensorEntry& e = it->second;
      if (e.dtype != t.dtype() || e.shape != t.shape() || e.nbytes != n) continue;
      std::shared_ptr<Buffer> b = e.buffer.lock();
      if (!b) continue;
      if (b == t.buffer() && e.offset == t.offset()) return t;  // already interned
      candidates.emplace_back(e.dtype, e.shape, std::move(b), e.offset);
    }
  }
  for (const Tensor& c : candidates) {
    if (std::memcmp(c.raw(), t.raw(), n) == 0) {
      std::lock_guard<std::mutex> lock(mu_);
      ++tensor_hits_;
      hit_bytes_ += n;
      return c;
    }
  }
  std::lock_guard<std::mutex> lock(mu_);
  tensors_.emplace(h, TensorEntry{t.buffer(), t.offset(), t.dtype(), t.shape(), n});
  if (++inserts_since_prune_ >= kPruneEvery) prune_locked();
  return t;
}

SharedConstants::Bytes::~Bytes() { std::free(data); }

std::shared_ptr<const SharedConstants::Bytes> SharedConstants::get_or_make(const std::string& key, size_t size,
                                                                         const std::function<void(void*)>& fill,
                                                                         std::vector<std::shared_ptr<const void>> pins) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = made_.find(key);
    if (it != made_.end()) {
      if (std::shared_ptr<const Bytes> v = it->second.value.lock()) {
        ++made_hits_;
        return v;
      }
    }
  }
  // Made outside the lock: packing a large weight takes milliseconds, and other sessions
  // may be looking up other keys meanwhile.
  struct Holder {
    Bytes bytes;
    std::vector<std::shared_ptr<const void>> pins;
  };
  auto holder = std::make_shared<Holder>();
  holder->bytes.data = std::aligned_alloc(64, (std::max<size_t>(size, 1) + 63) / 64 * 64);
  if (!holder->bytes.data) throw std::bad_alloc();
  holder->bytes.size = size;
  prefault_for_write(holder->bytes.data, size);
  fill(holder->bytes.data);
  holder->pins = std::move(pins);
  std::shared_ptr<const Bytes> result(holder, &holder->bytes);

  std::lock_guard<std::mutex> lock(mu_);
  Made& slot = made_[key];
  if (std::shared_ptr<const Bytes> other = slot.value.lock()) {
    // Another session made it meanwhile: keep theirs, drop ours.
    ++made_hits_;
    return other;
  }
  slot.value = result;
  if (++inserts_since_prune_ >= kPruneEvery) prune_locked();
  return result;
}

std::string SharedConstants::source_key(const Tensor& t) {
  std::ostringstream s;
  s << static_cast<const void*>(t.buffer().get()) << '+' << t.offset() << ':' << static_cast<int>(t.dtype()) << '[';
  for (size_t i = 0; i < t.shape().size(); ++i) s << (i ? "," : "") << t.shape()[i];
  s << ']';
  return s.str();
}

SharedConstants::Stats SharedConstants::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  Stats s;
  for (const auto& [h, e] : tensors_) {
    if (e.buffer.expired()) continue;
    ++s.tensors;
    s.tensor_bytes += e.nbytes;
  }
  for (const auto& [k, m] : made_)
    if (auto v = m.value.lock()) {
      ++s.made;
      s.made_bytes += v->size;
    }
  s.tensor_hits = tensor_hits_;
  s.hit_bytes = hit_bytes_;
  s.made_hits = made_hits_;
  return s;
}

uint64_t SharedConstants::digest() const {
  std::vector<std::pair<std::string, uint64_t>> parts;
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& [h, e] : tensors_)
    if (auto b = e.buffer.lock()) {
      Tensor t(e.dtype, e.shape, b, e.offset);
      parts.emplace_back(source_key(t), content_hash(t.raw(), e.nbytes, e.dtype, e.shape));
    }
  for (const auto& [k, m] : made_)
    if (auto v = m.value.lock()) parts.emplace_back(k, content_hash(v->data, v->size, DataType::kUInt8, {}));
  std::sort(parts.begin(), parts.end());
  uint64_t d = 0;
  for (const auto& [k, h] : parts) d = (d ^ h ^ std::hash<std::string>{}(k)) * 0x100000001B3ull;
  return d;
}

void SharedConstants::prune_locked() {
  inserts_since_prune_ = 0;
  for (auto it = tensors_.begin(); it != tensors_.end();) it = it->second.buffer.expired() ? tensors_.erase(it) : std::next(it);
  for (auto it = made_.begin(); it != made_.end();) it = it->second.value.expired() ? made_.erase(it) : std::next(it);
}

}  // namespace bulkhead
