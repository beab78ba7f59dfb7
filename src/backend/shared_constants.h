// SharedConstants: the immutable things sessions of one Env hold in common (I3: across
// sessions only immutable things are shared), found by content.
//
//   - Tensors (initializers, constants folded at session creation): intern() returns the
//     tensor already held by another session when one has the same element type, shape
//     and bytes, else registers the one given. Sessions of one model — or of two models
//     that carry the same weights, such as the halves of a split — then hold one copy.
//   - Things made from them (a kernel's weights packed for its primitive): get_or_make()
//     returns what a key names while anything still holds it, else makes it. The key
//     must say everything the result depends on; a kernel builds it from the identity of
//     an interned source (source_key) and the layout it packs into.
//
// Ownership: the registry holds nothing alive. Every entry is kept by the sessions (and
// kernels) that hold it and goes with the last of them; the registry only finds it
// again while it lives. A source named in a key is pinned by the entry made from it, so
// its address cannot be reused while the key may still be looked up.
//
// Immutability: nothing interned or made here may be written after it is returned;
// executors never hand a constant out as a run's output (Session::run copies those) and
// never donate one as a kernel's output (Step::donatable).
//
// Thread-safety: every method is thread-safe. Two sessions created at once may both make
// an entry for one key; one of them is kept, the other is dropped when its maker lets it go.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "bulkhead/tensor.h"

namespace bulkhead {

class SharedConstants {
 public:
  // Tensors smaller than this stay private (sharing them would cost more than it saves).
  static constexpr size_t kMinBytes = 4096;

  // The tensor equal to `t` that another holder already has, or `t` itself, registered.
  // Strings, tensors not in host memory and tensors under kMinBytes come back as given.
  Tensor intern(const Tensor& t);

  // Bytes made from constants (a kernel's weights packed for its primitive): 64-byte
  // aligned, never written after `fill` returns.
  struct Bytes {
    void* data = nullptr;
    size_t size = 0;
    Bytes() = default;
    Bytes(const Bytes&) = delete;
    Bytes& operator=(const Bytes&) = delete;
    ~Bytes();
  };
  // What `key` names while anything still holds it, else `size` new bytes written by
  // `fill` (outside the registry's lock; an exception from it propagates and registers
  // nothing). `pins` live as long as the result: the sources the key names by address.
  std::shared_ptr<const Bytes> get_or_make(const std::string& key, size_t size, const std::function<void(void*)>& fill,
                                           std::vector<std::shared_ptr<const void>> pins = {});

  // "<buffer address>+<offset>:<dtype>[shape]": the identity of an (interned) tensor, for
  // keys. Pin t.buffer() with the entry (get_or_make's `pins`).
  static std::string source_key(const Tensor& t);

  struct Stats {
    size_t tensors = 0;        // interned tensors alive now
    size_t tensor_bytes = 0;   // their bytes
    size_t made = 0;           // get_or_make entries alive now
    size_t made_bytes = 0;     // their bytes
    uint64_t tensor_hits = 0;  // intern() calls answered with another holder's tensor
    uint64_t hit_bytes = 0;    // the bytes those did not duplicate
    uint64_t made_hits = 0;    // get_or_make() calls answered without making
  };
  Stats stats() const;
  // A content hash over every entry alive now, in a fixed order: equal before and after
  // runs proves nothing shared was written (tests).
  uint64_t digest() const;

 private:
  struct TensorEntry {
    std::weak_ptr<Buffer> buffer;
    size_t offset = 0;
    DataType dtype = DataType::kUndefined;
    Shape shape;
    size_t nbytes = 0;
  };
  struct Made {
    std::weak_ptr<const Bytes> value;
  };
  void prune_locked();

  mutable std::mutex mu_;
  std::unordered_multimap<uint64_t, TensorEntry> tensors_;  // by content hash
  std::unordered_map<std::string, Made> made_;
  uint64_t tensor_hits_ = 0, hit_bytes_ = 0, made_hits_ = 0;
  size_t inserts_since_prune_ = 0;
};

}  // namespace bulkhead
