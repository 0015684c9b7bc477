#pragma once
// Small statuses returned by every backend operation (UCX style): the caller branches on the code;
// the message is only filled on the error paths, so returning ok never allocates.
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>

namespace rdmad::verbs {

enum class StatusCode : uint8_t {
  kOk,            // done
  kInProgress,    // accepted, completes later
  kNoResource,    // back-pressure (queue full, table full): retry later
  kNotSupported,  // the backend does not implement this
  kError,         // failed; message says why
};

class Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status ok() { return {}; }
  static Status error(std::string message) { return {StatusCode::kError, std::move(message)}; }
  static Status no_resource(std::string message) { return {StatusCode::kNoResource, std::move(message)}; }
  static Status not_supported(std::string message) {
    return {StatusCode::kNotSupported, std::move(message)};
  }

  /// True for kOk only.
  bool is_ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

/// Name of a status code ("ok", "no-resource", ...).
std::string_view to_string(StatusCode code);

/// A value or the status explaining why there is none.
template <class T>
class Result {
 public:
  Result(T value) : value_(std::move(value)) {}  // NOLINT(google-explicit-constructor)
  Result(Status status) : status_(std::move(status)) {}  // NOLINT(google-explicit-constructor)

  bool is_ok() const { return status_.is_ok(); }
  const Status& status() const { return status_; }
  T& value() { return value_; }
  const T& value() const { return value_; }
  T& operator*() { return value_; }
  T* operator->() { return &value_; }

 private:
  Status status_;
  T value_{};
};

}  // namespace rdmad::verbs
