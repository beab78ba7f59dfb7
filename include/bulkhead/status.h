// Status and Result<T>: errors are values. A Status carries a code and one line of
// message naming the file, node, tensor or option at fault.
// Thread-compatible value types.
#pragma once

#include <cassert>
#include <string>
#include <utility>
#include <variant>

namespace bulkhead {

enum class StatusCode {
  kOk = 0,
  kInvalidArgument,   // bad input from the user: names, shapes, types, options
  kNotFound,          // missing file, input, output, backend
  kUnsupported,       // operator, type or attribute the backend lacks
  kInvalidModel,      // corrupt or malformed model
  kFailedPrecondition,
  kResourceExhausted,
  kInternal,          // a broken internal invariant
  kUnavailable,       // a worker or device went away
  kDeadlineExceeded,  // a run took longer than its time limit
  // (the last code: src/isolate/protocol.cc checks codes against it)
};

const char* status_code_name(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status ok() { return Status(); }
  bool is_ok() const { return code_ == StatusCode::kOk; }
  explicit operator bool() const { return is_ok(); }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }
  // "code: message", for logs.
  std::string to_string() const;
  // Prefixes context ("node 'conv1' (Conv): ") to the message.
  Status with_context(const std::string& prefix) const {
    if (is_ok()) return *this;
    return Status(code_, prefix + message_);
  }

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

inline Status invalid_argument(std::string m) { return {StatusCode::kInvalidArgument, std::move(m)}; }
inline Status not_found(std::string m) { return {StatusCode::kNotFound, std::move(m)}; }
inline Status unsupported(std::string m) { return {StatusCode::kUnsupported, std::move(m)}; }
inline Status invalid_model(std::string m) { return {StatusCode::kInvalidModel, std::move(m)}; }
inline Status internal_error(std::string m) { return {StatusCode::kInternal, std::move(m)}; }

template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}  // NOLINT(google-explicit-constructor)
  Result(Status status) : v_(std::move(status)) {  // NOLINT(google-explicit-constructor)
    assert(!std::get<Status>(v_).is_ok() && "Result constructed from an OK status");
  }

  bool is_ok() const { return std::holds_alternative<T>(v_); }
  explicit operator bool() const { return is_ok(); }
  Status status() const { return is_ok() ? Status::ok() : std::get<Status>(v_); }
  T& value() & { return std::get<T>(v_); }
  const T& value() const& { return std::get<T>(v_); }
  T&& value() && { return std::get<T>(std::move(v_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

 private:
  std::variant<T, Status> v_;
};

}  // namespace bulkhead

#define BH_CONCAT_INNER(a, b) a##b
#define BH_CONCAT(a, b) BH_CONCAT_INNER(a, b)

// Returns the Status from the enclosing function when `expr` is not OK.
#define BH_RETURN_IF_ERROR(expr)                         \
  do {                                                   \
    ::bulkhead::Status bh_status_ = (expr);              \
    if (!bh_status_.is_ok()) return bh_status_;          \
  } while (0)

// `BH_ASSIGN_OR_RETURN(auto x, f());` unwraps a Result or returns its Status.
#define BH_ASSIGN_OR_RETURN(lhs, expr) BH_ASSIGN_OR_RETURN_IMPL(BH_CONCAT(bh_result_, __LINE__), lhs, expr)
#define BH_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                             \
  if (!tmp.is_ok()) return tmp.status();         \
  lhs = std::move(tmp).value()
