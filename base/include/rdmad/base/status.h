#pragma once
// The one status of the project (UCX style): the caller branches on the code; the message is only
// filled on the error paths, so a successful status never allocates. Every layer above cc/ and the
// RoCEv2 codec returns it (or a Result<T> carrying it); see docs/errors.md for the policy.
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>

namespace rdmad::base {

enum class StatusCode : uint8_t {
  kOk,            // done
  kInProgress,    // accepted, completes later
  kNoResource,    // back-pressure (queue full, table full): retry later
  kNotSupported,  // not implemented here (a backend without the capability)
  kError,         // failed; the message says why
};

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status success() { return {}; }
  static Status error(std::string message) { return {StatusCode::kError, std::move(message)}; }
  static Status no_resource(std::string message) { return {StatusCode::kNoResource, std::move(message)}; }
  static Status not_supported(std::string message) {
    return {StatusCode::kNotSupported, std::move(message)};
  }
  static Status in_progress() { return {StatusCode::kInProgress, {}}; }

  /// True for kOk only.
  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

/// Name of a status code ("ok", "no-resource", ...).
std::string_view to_string(StatusCode code);

}  // namespace rdmad::base
