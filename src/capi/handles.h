// The C API's handles (include/bulkhead/bulkhead.h): each C handle type is a struct that
// starts with a HandleHeader naming its kind and whether it is live, so that a handle of
// the wrong kind, or one recently released, is reported instead of misread.
//
// Released handles go to a bounded quarantine (the 1,024 most recent): their payload is
// destroyed at once, their small shell is freed only when it leaves the quarantine, so a
// stale pointer to one reads "released" rather than freed memory. The quarantine is the
// C API's only process-wide state; it holds nothing of any session.
#pragma once

#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "bulkhead/bulkhead.h"
#include "bulkhead/bulkhead.hpp"
#include "backend/backend.h"

namespace bulkhead::capi {

enum class HandleKind : uint32_t {
  kStatus = 1,
  kEnv,
  kSessionOptions,
  kSession,
  kRunOptions,
  kTensor,
  kDeviceList,
};

const char* handle_kind_name(HandleKind kind);

struct HandleHeader {
  static constexpr uint32_t kLive = 0x6b686c62;      // "blhk"
  static constexpr uint32_t kReleased = 0x64616564;  // "dead"
  uint32_t state = kLive;
  HandleKind kind;
  explicit HandleHeader(HandleKind k) : kind(k) {}
};

// Marks a handle released (its owner has already dropped its payload) and hands it to
// the quarantine, which calls `free_shell` when it leaves. Thread-safe.
void retire(HandleHeader* header, void (*free_shell)(HandleHeader*));

}  // namespace bulkhead::capi

struct BhStatus {
  bulkhead::capi::HandleHeader header{bulkhead::capi::HandleKind::kStatus};
  BhStatusCode code = BH_OK;
  std::string message;
};

struct BhEnv {
  bulkhead::capi::HandleHeader header{bulkhead::capi::HandleKind::kEnv};
  std::optional<bulkhead::Env> env;
  // Every distinct comma-separated list env_backends returned (plugins come and go; each
  // string stays valid until the environment is released).
  std::mutex mu;
  std::list<std::string> backend_lists;
};

struct BhSessionOptions {
  bulkhead::capi::HandleHeader header{bulkhead::capi::HandleKind::kSessionOptions};
  bulkhead::SessionOptions options;
};

struct BhRunOptions {
  bulkhead::capi::HandleHeader header{bulkhead::capi::HandleKind::kRunOptions};
  int64_t timeout_ms = -1;
  std::optional<bulkhead::Session> outputs_for;  // run_options_set_outputs_for (a reference of its own)
};

struct BhSession {
  bulkhead::capi::HandleHeader header{bulkhead::capi::HandleKind::kSession};
  std::optional<bulkhead::Session> session;
  std::vector<std::pair<std::string, int>> placement;
  std::mutex mu;                   // guards memory_devices
  std::set<std::string> memory_devices;  // names handed out by session_memory (stable addresses)
};

struct BhTensor {
  bulkhead::capi::HandleHeader header{bulkhead::capi::HandleKind::kTensor};
  bulkhead::Tensor tensor;
  std::string device;  // "host", "vulkan:0", ...
};

struct BhDeviceList {
  bulkhead::capi::HandleHeader header{bulkhead::capi::HandleKind::kDeviceList};
  struct Entry {
    std::string name, backend, description, submit_policy;
  };
  std::vector<Entry> entries;
};
