// Errors as values inside the plugin: a Status (a BhStatusCode and a one-line message, or
// a status the host made and handed back through a callback, passed on untouched) and a
// Result<T>. plugin.cc turns them into BhpStatus objects at the ABI boundary.
#pragma once

#include <optional>
#include <string>
#include <utility>

#include "bulkhead/backend_plugin.h"

namespace bulkhead::opencl {

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(int32_t code, std::string message) : code_(code), message_(std::move(message)) {}
  // A status from a host callback (BhpKernelCall): returned to the host as it is.
  static Status from_host(BhpStatus* s) {
    Status r(BH_INTERNAL, "");
    r.host_ = s;
    return r;
  }
  static Status ok() { return {}; }

  bool is_ok() const { return code_ == BH_OK; }
  int32_t code() const { return code_; }
  const std::string& message() const { return message_; }
  BhpStatus* host_status() const { return host_; }

 private:
  int32_t code_ = BH_OK;
  std::string message_;
  BhpStatus* host_ = nullptr;
};

inline Status invalid_argument(std::string m) { return Status(BH_INVALID_ARGUMENT, std::move(m)); }
inline Status unsupported(std::string m) { return Status(BH_UNSUPPORTED, std::move(m)); }
inline Status internal_error(std::string m) { return Status(BH_INTERNAL, std::move(m)); }

template <class T>
class [[nodiscard]] Result {
 public:
  Result(T value) : value_(std::move(value)) {}
  Result(Status status) : status_(std::move(status)) {}
  bool is_ok() const { return status_.is_ok(); }
  const Status& status() const { return status_; }
  T& value() { return *value_; }
  T& operator*() { return *value_; }
  T* operator->() { return &*value_; }

 private:
  std::optional<T> value_;
  Status status_;
};

#define OCL_CAT_(a, b) a##b
#define OCL_CAT(a, b) OCL_CAT_(a, b)
#define OCL_TRY(expr)                       \
  do {                                      \
    ::bulkhead::opencl::Status s_ = (expr); \
    if (!s_.is_ok()) return s_;             \
  } while (0)
#define OCL_ASSIGN_(tmp, lhs, expr)      \
  auto tmp = (expr);                     \
  if (!tmp.is_ok()) return tmp.status(); \
  lhs = std::move(tmp.value())
// lhs = the value of a Result<T> expression, or return its error.
#define OCL_ASSIGN(lhs, expr) OCL_ASSIGN_(OCL_CAT(result_, __LINE__), lhs, expr)

}  // namespace bulkhead::opencl
