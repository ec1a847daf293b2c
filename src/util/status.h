// Status and Result<T>: the error currency at every library API boundary.
//
// A Status is either OK or carries an error code, a user-facing message and the
// source location (file:line) where it was raised. The message is written for the
// user ("telco.csv:17: field 3 'tenure': invalid UTF-8"), the location is for us
// and is shown with --verbose.
//
//   Status s = DS_ERR(kInvalidInput, "{}:{}: unbalanced quote", path, line);
//   DS_RETURN_IF_ERROR(ReadHeader(...));
//   DS_ASSIGN_OR_RETURN(auto reader, CsvReader::Open(path, opts));
//
// Internals may throw ds::Error (for deep code where threading a Status would be
// noise); API boundaries catch it and turn it into a Status (see ds::Capture).
#pragma once

#include <fmt/core.h>

#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <variant>

namespace ds {

enum class Code {
  kOk = 0,
  kInvalidInput,     // bad user data (CSV, text, seeds)
  kInvalidArgument,  // bad config key/value or flag
  kNotFound,         // missing file or directory
  kIo,               // read/write failure (disk full, permissions)
  kCorrupt,          // model file failed checksum / bounds / version checks
  kAlreadyExists,    // would overwrite a model without --overwrite
  kResourceExhausted,// out of memory (host or device), too many invalid records
  kCancelled,        // interrupted (Ctrl-C)
  kUnavailable,      // no GPU, missing optional dependency
  kInternal,         // a bug
};

const char* CodeName(Code c);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(Code code, std::string message, const char* file = "", int line = 0)
      : code_(code), message_(std::move(message)), file_(file), line_(line) {}
  static Status Ok() { return Status(); }

  bool ok() const { return code_ == Code::kOk; }
  Code code() const { return code_; }
  const std::string& message() const { return message_; }
  const char* file() const { return file_; }
  int line() const { return line_; }
  // "message" or, with where=true, "message [src/io/csv.cc:123]".
  std::string ToString(bool where = false) const;
  // Prefix the message with context ("loading model: ...").
  Status WithContext(const std::string& ctx) const {
    if (ok()) return *this;
    return Status(code_, ctx + ": " + message_, file_, line_);
  }

 private:
  Code code_ = Code::kOk;
  std::string message_;
  const char* file_ = "";
  int line_ = 0;
};

// Exception form of Status, for internals. Converted at API boundaries.
class Error : public std::runtime_error {
 public:
  explicit Error(Status s) : std::runtime_error(s.message()), status_(std::move(s)) {}
  const Status& status() const { return status_; }

 private:
  Status status_;
};

template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}  // NOLINT: implicit by design
  Result(Status s) : v_(std::move(s)) {      // NOLINT
    if (std::get<Status>(v_).ok()) v_ = Status(Code::kInternal, "Result built from OK status");
  }
  bool ok() const { return std::holds_alternative<T>(v_); }
  const Status& status() const {
    static const Status kOk;
    return ok() ? kOk : std::get<Status>(v_);
  }
  T& value() & { return std::get<T>(v_); }
  const T& value() const& { return std::get<T>(v_); }
  T&& value() && { return std::get<T>(std::move(v_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  // Throws ds::Error when not ok; for tests and internals.
  T ValueOrThrow() && {
    if (!ok()) throw Error(std::get<Status>(v_));
    return std::get<T>(std::move(v_));
  }

 private:
  std::variant<T, Status> v_;
};

// Throws ds::Error if the status is an error.
inline void ThrowIfError(const Status& s) {
  if (!s.ok()) throw Error(s);
}

// Runs fn() (returning Status, or void), converting a thrown ds::Error or
// std::bad_alloc into a Status.
template <typename Fn>
Status Capture(Fn&& fn) {
  try {
    if constexpr (std::is_void_v<decltype(fn())>) {
      fn();
      return Status::Ok();
    } else {
      return fn();
    }
  } catch (const Error& e) {
    return e.status();
  } catch (const std::bad_alloc&) {
    return Status(Code::kResourceExhausted, "out of memory", __FILE__, __LINE__);
  }
}

}  // namespace ds

#define DS_ERR(code, ...) ::ds::Status(::ds::Code::code, ::fmt::format(__VA_ARGS__), __FILE__, __LINE__)
#define DS_THROW(code, ...) throw ::ds::Error(DS_ERR(code, __VA_ARGS__))
// Internal invariant: a failure is a bug in datasynth.
#define DS_CHECK(cond)                                                                   \
  do {                                                                                   \
    if (!(cond)) DS_THROW(kInternal, "internal check failed: {}", #cond);                \
  } while (0)

#define DS_CONCAT_INNER(a, b) a##b
#define DS_CONCAT(a, b) DS_CONCAT_INNER(a, b)

#define DS_RETURN_IF_ERROR(expr)             \
  do {                                       \
    ::ds::Status _ds_st = (expr);            \
    if (!_ds_st.ok()) return _ds_st;         \
  } while (0)

#define DS_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                             \
  if (!tmp.ok()) return tmp.status();            \
  lhs = std::move(tmp).value()

#define DS_ASSIGN_OR_RETURN(lhs, expr) \
  DS_ASSIGN_OR_RETURN_IMPL(DS_CONCAT(_ds_res_, __LINE__), lhs, expr)
