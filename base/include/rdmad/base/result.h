#pragma once
// The one result type: a value, or the error that prevented it. E is Status unless a layer needs a
// richer error at its boundary (a sysfs path, a verb and errno, a client-protocol status).
#include <concepts>
#include <optional>
#include <utility>

#include "rdmad/base/assert.h"
#include "rdmad/base/status.h"

namespace rdmad::base {

template <class T, class E = Status>
class [[nodiscard]] Result {
 public:
  Result(T value) : value_(std::move(value)) {}  // NOLINT(google-explicit-constructor)
  Result(E error) : error_(std::move(error)) {   // NOLINT(google-explicit-constructor)
    if constexpr (std::same_as<E, Status>) RDMAD_ASSERT(!error_.ok(), "a Result without a value needs an error status");
  }

  bool ok() const { return value_.has_value(); }
  explicit operator bool() const { return ok(); }

  // The value; reading it from a failed result is a bug.
  T& value() & { return checked(); }
  const T& value() const& { return checked(); }
  T&& value() && { return std::move(checked()); }
  T& operator*() & { return checked(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &checked(); }
  const T* operator->() const { return &value(); }
  T value_or(T fallback) const { return ok() ? *value_ : std::move(fallback); }

  // The error; default-constructed (a success status for E = Status) when there is a value.
  const E& error() const { return error_; }
  const E& status() const
    requires std::same_as<E, Status>
  {
    return error_;
  }

 private:
  T& checked() {
    RDMAD_ASSERT(value_.has_value(), "value() of a failed result");
    return *value_;
  }
  const T& checked() const {
    RDMAD_ASSERT(value_.has_value(), "value() of a failed result");
    return *value_;
  }

  std::optional<T> value_;
  E error_{};
};

}  // namespace rdmad::base
