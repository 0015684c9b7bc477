// Result type of the client service: a value or an Error {status, message}. The status is the
// rdmad_status sent to the client; the message names the failing check or call.
#pragma once

#include <string>
#include <utility>
#include <variant>

#include "rdmad/rdmad.h"

namespace rdmad::ipc {

struct Error {
  rdmad_status status = RDMAD_ERR_SYSTEM;
  std::string message;
};

struct Ok {};

template <class T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}      // NOLINT(google-explicit-constructor)
  Result(Error error) : v_(std::move(error)) {}  // NOLINT(google-explicit-constructor)

  bool ok() const { return v_.index() == 0; }
  T& value() { return std::get<0>(v_); }
  const T& value() const { return std::get<0>(v_); }
  const Error& error() const { return std::get<1>(v_); }

 private:
  std::variant<T, Error> v_;
};

// Builds an Error whose message carries errno text: "<what>: <strerror(err)>".
Error sys_error(const std::string& what, int err);

}  // namespace rdmad::ipc
