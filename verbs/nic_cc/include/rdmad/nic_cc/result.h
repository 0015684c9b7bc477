#pragma once
// A value or the error that prevented it. Setup-time code only (sysfs, verbs control path).
#include <optional>
#include <utility>

namespace rdmad::nic_cc {

template <class T, class E>
class Result {
 public:
  Result(T value) : value_(std::move(value)) {}  // NOLINT(google-explicit-constructor)
  Result(E error) : error_(std::move(error)) {}  // NOLINT(google-explicit-constructor)
  bool ok() const { return value_.has_value(); }
  explicit operator bool() const { return ok(); }
  const T& value() const& { return *value_; }
  T& value() & { return *value_; }
  T&& value() && { return std::move(*value_); }
  const T& operator*() const& { return *value_; }
  T& operator*() & { return *value_; }
  const T* operator->() const { return &*value_; }
  T* operator->() { return &*value_; }
  const E& error() const { return error_; }
  T value_or(T fallback) const { return ok() ? *value_ : std::move(fallback); }

 private:
  std::optional<T> value_;
  E error_{};
};

}  // namespace rdmad::nic_cc
