#include "isolate/value_transfer.h"

#include <algorithm>
#include <cstring>
#include <limits>

#include "isolate/wire.h"

namespace bulkhead::isolate {
namespace {

constexpr uint64_t kAlign = 64;

uint64_t align_up(uint64_t n) { return (n + kAlign - 1) / kAlign * kAlign; }

// Bytes a tensor occupies in the region.
uint64_t region_size_of(const Tensor& t) {
  if (t.dtype() != DataType::kString) return t.nbytes();
  uint64_t n = 0;
  for (int64_t i = 0; i < t.numel(); ++i) n += 8 + t.strings()[i].size();
  return n;
}

Status bad(const char* what, const std::string& name, const std::string& why) {
  return internal_error(std::string(what) + " '" + name + "' received from the peer: " + why);
}

}  // namespace

std::vector<const Tensor*> tensors_of(const Value& v) {
  std::vector<const Tensor*> r;
  if (v.is_tensor()) r.push_back(&v.tensor);
  for (auto& t : v.sequence) r.push_back(&t);
  return r;
}

Result<std::shared_ptr<Buffer>> ReusableRegion::get(SharedMemory& shm, uint64_t bytes) {
  if (!mapping || mapping->size() < bytes || (mapping->size() > 4 * bytes && mapping->size() > (uint64_t{1} << 20))) {
    mapping.reset();  // unmapped and closed before the new one is made
    BH_ASSIGN_OR_RETURN(mapping, shm.allocate(bytes));
    ++id;
  }
  return mapping;
}

Result<PackedValues> pack_values(const NamedValues& values, const RegionSource& into, const char* what,
                                 const DeviceCopy& copy, const InPlace& in_place, const std::vector<LentSpan>& lent) {
  std::vector<const Tensor*> all;
  for (const auto& [name, v] : values)
    for (const Tensor* t : tensors_of(v)) {
      if (t->dtype() != DataType::kString && t->numel() > 0 && !t->raw() && !copy)
        return invalid_argument(std::string(what) + " '" + name + "': tensor " + t->describe() +
                                " is in memory the CPU cannot read (" + t->domain().to_string() + ")");
      all.push_back(t);
    }
  // Pass 1: where each tensor goes — where it already is, for those in place, and the
  // others after the bytes in place; or, without them, one after the other from the start.
  std::vector<uint64_t> offsets(all.size(), 0);
  std::vector<bool> placed(all.size(), false);
  // Tensors the receiver reads where they are, in a region it has mapped: not copied.
  std::vector<uint32_t> in_lent(all.size(), 0);  // 0: not; k: lent[k - 1]
  for (size_t i = 0; i < all.size(); ++i) {
    const Tensor& t = *all[i];
    const uint64_t n = region_size_of(t);
    if (!n || t.dtype() == DataType::kString || !t.raw()) continue;
    const char* q = static_cast<const char*>(t.raw());
    for (size_t k = 0; k < lent.size() && !in_lent[i]; ++k) {
      const LentSpan& l = lent[k];
      if (q < l.base || q >= l.base + l.size) continue;
      const uint64_t b = static_cast<uint64_t>(q - l.base);
      if (b % kAlign || n > l.size - b) continue;
      in_lent[i] = static_cast<uint32_t>(k + 1);
      offsets[i] = b;
    }
  }
  auto layout = [&](bool use_in_place) {
    uint64_t total = 0;
    for (size_t i = 0; i < all.size(); ++i) placed[i] = in_lent[i] != 0;
    std::vector<std::pair<uint64_t, uint64_t>> taken;  // [begin, end) of tensors in place
    if (use_in_place && in_place.base) {
      for (size_t i = 0; i < all.size(); ++i) {
        const Tensor& t = *all[i];
        const uint64_t n = region_size_of(t);
        if (placed[i] || !n || t.dtype() == DataType::kString || !t.raw()) continue;
        const char* q = static_cast<const char*>(t.raw());
        if (q < in_place.base || q >= in_place.base + in_place.used) continue;
        const uint64_t b = static_cast<uint64_t>(q - in_place.base), e = b + n;
        if (e > in_place.used || b % kAlign) continue;
        bool overlaps = false;
        for (auto& [tb, te] : taken) overlaps = overlaps || (b < te && tb < e);
        if (overlaps) continue;
        taken.emplace_back(b, e);
        placed[i] = true;
        offsets[i] = b;
      }
      // The others after every byte the run wrote: a tensor copied may come from there.
      total = align_up(in_place.used);
    }
    for (size_t i = 0; i < all.size(); ++i) {
      if (placed[i]) continue;
      const uint64_t n = region_size_of(*all[i]);
      offsets[i] = n ? total : 0;
      if (n) total = align_up(total + n);
    }
    return total;
  };
  uint64_t total = layout(true);
  // Pass 2: the one copy of each other tensor's bytes — a memcpy into the region's
  // mapping, or a device copy into a view of it — and the descriptors.
  PackedValues p;
  if (total) {
    BH_ASSIGN_OR_RETURN(p.region, into(total));
    if (!p.region || !p.region->data() || p.region->size() < total)
      return internal_error(std::string("no shared-memory region for the ") + what + "s");
    // Another region than the one holding them: every tensor is copied, packed from its
    // start (which takes no more than `total`).
    if (in_place.base && p.region->data() != in_place.base) total = layout(false);
  }
  char* base = p.region ? static_cast<char*>(p.region->data()) : nullptr;
  Writer w;
  w.u32(static_cast<uint32_t>(values.size()));
  size_t k = 0;
  for (const auto& [name, v] : values) {
    w.str(name);
    w.u8(static_cast<uint8_t>(v.kind));
    w.u8(v.is_optional);
    w.i32(static_cast<int32_t>(v.sequence_dtype));
    auto ts = tensors_of(v);
    w.u32(static_cast<uint32_t>(ts.size()));
    for (const Tensor* t : ts) {
      const uint64_t off = offsets[k++], n = region_size_of(*t);
      if (!placed[k - 1]) p.copied_bytes += n;
      if (t->dtype() == DataType::kString) {
        char* q = base + off;  // each string as its length (8 bytes) and its bytes
        for (int64_t i = 0; i < t->numel(); ++i) {
          const std::string& s = t->strings()[i];
          const uint64_t len = s.size();
          std::memcpy(q, &len, 8);
          std::memcpy(q + 8, s.data(), len);
          q += 8 + len;
        }
      } else if (n && placed[k - 1]) {
        // Already there: the run wrote it into this region, or it lies in a lent one.
      } else if (n && t->raw()) {
        std::memcpy(base + off, t->raw(), n);
      } else if (n) {
        Tensor view(t->dtype(), t->shape(), p.region, off);
        BH_RETURN_IF_ERROR(copy(*t, view).with_context(std::string(what) + " '" + name + "': "));
      }
      w.i32(static_cast<int32_t>(t->dtype()));
      w.i64s(t->shape());
      w.u32(in_lent[k - 1]);
      w.u64(off);
      w.u64(n);
    }
  }
  p.descriptors = w.take();
  p.region_bytes = total;
  return p;
}

Result<NamedValues> unpack_values(const std::string& descriptors, const std::shared_ptr<Buffer>& region,
                                  uint64_t region_bytes, const char* what,
                                  const std::vector<std::shared_ptr<Buffer>>& lent) {
  if (region_bytes && (!region || region->size() < region_bytes))
    return internal_error(std::string("the ") + what + " region received from the peer is missing or short");
  Reader r(descriptors);
  NamedValues out(r.count(18));
  for (auto& [name, v] : out) {
    name = r.str();
    uint8_t kind = r.u8();
    v.is_optional = r.u8() != 0;
    v.sequence_dtype = static_cast<DataType>(r.i32());
    uint32_t count = r.count(28);
    if (!r.ok()) break;
    if (kind > static_cast<uint8_t>(Value::Kind::kSequence) || (kind == 0 && count != 0) ||
        (kind == static_cast<uint8_t>(Value::Kind::kTensor) && count != 1))
      return bad(what, name, "bad value kind");
    v.kind = static_cast<Value::Kind>(kind);
    for (uint32_t i = 0; i < count; ++i) {
      DataType dtype = static_cast<DataType>(r.i32());
      Shape shape = r.i64s();
      const uint32_t in = r.u32();
      uint64_t off = r.u64(), n = r.u64();
      if (!r.ok()) break;
      if (in > lent.size() || (in && (!lent[in - 1] || !lent[in - 1]->data())))
        return bad(what, name, "names a region that was not lent");
      const std::shared_ptr<Buffer>& from = in ? lent[in - 1] : region;
      const uint64_t from_bytes = in ? lent[in - 1]->size() : region_bytes;
      const bool is_string = dtype == DataType::kString;
      const uint64_t elem = is_string ? 8 : dtype_size(dtype);
      if (elem == 0) return bad(what, name, "unknown element type " + std::to_string(static_cast<int>(dtype)));
      for (int64_t d : shape)
        if (d < 0) return bad(what, name, "negative dimension");
      // A string is at least its 8-byte length: the same minimum as an int64 element.
      int64_t numel = 0;
      size_t want = 0;
      if (!checked_numel(shape, &numel) || !checked_nbytes(is_string ? DataType::kInt64 : dtype, shape, &want))
        return bad(what, name, "shape too large");
      if (is_string ? n < want : n != want) return bad(what, name, "size does not match its shape");
      if (n && (off % kAlign || off > from_bytes || n > from_bytes - off))
        return bad(what, name, "bytes lie outside the shared region");
      if (is_string && in) return bad(what, name, "a string tensor in a lent region");
      Tensor t;
      if (is_string) {
        t = Tensor::host(dtype, shape);
        const char* p = static_cast<const char*>(region ? region->data() : nullptr) + (n ? off : 0);
        uint64_t left = n;
        for (int64_t e = 0; e < numel; ++e) {
          uint64_t len;
          if (left < 8) return bad(what, name, "truncated string");
          std::memcpy(&len, p, 8);
          if (len > left - 8) return bad(what, name, "truncated string");
          t.strings()[e].assign(p + 8, len);
          p += 8 + len;
          left -= 8 + len;
        }
      } else if (n) {
        t = Tensor(dtype, std::move(shape), from, off);  // a view: no copy
      } else {
        t = Tensor::host(dtype, std::move(shape));  // no bytes to share
      }
      if (v.kind == Value::Kind::kTensor) v.tensor = std::move(t);
      else v.sequence.push_back(std::move(t));
    }
  }
  if (!r.ok() || !r.at_end()) return internal_error(std::string("malformed ") + what + " descriptors from the peer");
  return out;
}

}  // namespace bulkhead::isolate
