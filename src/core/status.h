#pragma once
// Status and Result<T>: how every fallible call in streamline reports failure.
//
//   Result<Tensor> r = load(...);
//   if (!r.ok()) return r.status();            // propagate
//   Tensor t = std::move(r).value();
//
//   SL_RETURN_IF_ERROR(check(x));              // early return on error
//   SL_ASSIGN_OR_RETURN(auto t, load(...));    // unwrap or return
//
// No exceptions cross layer boundaries; abort only on broken internal invariants.

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace streamline {

enum class StatusCode {
  kOk = 0,
  kInvalidArgument,
  kNotFound,
  kUnsupported,
  kResourceExhausted,
  kUnavailable,
  kDeadlineExceeded,
  kCancelled,
  kInternal,
};

const char* status_code_name(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status ok_status() { return Status(); }

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }
  // "InvalidArgument: message".
  std::string to_string() const;

  // Returns a copy whose message is "context: message" (for enriching errors as they bubble up).
  Status with_context(std::string_view context) const;

  // Marks a deliberately ignored status.
  void ignore() const {}

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

inline Status ok_status() { return Status(); }
inline Status invalid_argument(std::string m) { return {StatusCode::kInvalidArgument, std::move(m)}; }
inline Status not_found(std::string m) { return {StatusCode::kNotFound, std::move(m)}; }
inline Status unsupported(std::string m) { return {StatusCode::kUnsupported, std::move(m)}; }
inline Status resource_exhausted(std::string m) { return {StatusCode::kResourceExhausted, std::move(m)}; }
inline Status unavailable(std::string m) { return {StatusCode::kUnavailable, std::move(m)}; }
inline Status deadline_exceeded(std::string m) { return {StatusCode::kDeadlineExceeded, std::move(m)}; }
inline Status cancelled(std::string m) { return {StatusCode::kCancelled, std::move(m)}; }
inline Status internal_error(std::string m) { return {StatusCode::kInternal, std::move(m)}; }

template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}  // NOLINT(google-explicit-constructor)
  Result(Status status) : v_(std::move(status)) {  // NOLINT(google-explicit-constructor)
    if (std::get<Status>(v_).ok()) v_ = Status(StatusCode::kInternal, "Result built from an OK status");
  }

  bool ok() const { return std::holds_alternative<T>(v_); }
  Status status() const { return ok() ? Status() : std::get<Status>(v_); }

  T& value() & { return std::get<T>(v_); }
  const T& value() const& { return std::get<T>(v_); }
  T&& value() && { return std::get<T>(std::move(v_)); }
  T* operator->() { return &std::get<T>(v_); }
  const T* operator->() const { return &std::get<T>(v_); }
  T& operator*() & { return std::get<T>(v_); }
  const T& operator*() const& { return std::get<T>(v_); }

 private:
  std::variant<T, Status> v_;
};

}  // namespace streamline

#define SL_CONCAT_INNER(a, b) a##b
#define SL_CONCAT(a, b) SL_CONCAT_INNER(a, b)

#define SL_RETURN_IF_ERROR(expr)                  \
  do {                                            \
    ::streamline::Status sl_status_ = (expr);     \
    if (!sl_status_.ok()) return sl_status_;      \
  } while (0)

#define SL_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                             \
  if (!tmp.ok()) return tmp.status();            \
  lhs = std::move(tmp).value()

#define SL_ASSIGN_OR_RETURN(lhs, expr) SL_ASSIGN_OR_RETURN_IMPL(SL_CONCAT(sl_result_, __LINE__), lhs, expr)
