#pragma once
// Bounds the log lines that outside input can cause (a peer that fails its handshake, a client that
// sends garbage, an acceptor out of file descriptors): at most `burst` lines per `interval`; what
// is left out is counted and reported on the next line that gets through, so a flood costs a few
// lines, not millions, and the operator still learns how many events there were.
//
// Thread-safe (one small mutex): for error paths, never for the per-packet hot path, which counts
// instead of logging.
#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>
#include <utility>

#include <fmt/format.h>
#include <spdlog/logger.h>

namespace rdmad::base {

class LogLimiter {
 public:
  using Clock = std::chrono::steady_clock;

  explicit LogLimiter(Clock::duration interval = std::chrono::seconds(10), uint32_t burst = 5)
      : interval_(interval), burst_(burst) {}

  /// Whether a line may be written at `now`. When it may, *suppressed is how many were refused
  /// since the last line that was written (0 usually).
  bool allow(Clock::time_point now, uint64_t* suppressed);
  /// Lines refused in total (for tests and counters).
  uint64_t suppressed_total() const;

 private:
  const Clock::duration interval_;
  const uint32_t burst_;
  mutable std::mutex mu_;
  Clock::time_point window_start_{};
  uint32_t in_window_ = 0;
  uint64_t pending_ = 0;  // refused since the last written line
  uint64_t total_ = 0;
};

/// Writes `fmt` at `level` through `limiter`; a line after suppressed ones ends with the field
/// " suppressed=N" (the lines like it left out since the last one written). Returns whether it was
/// written.
template <typename... Args>
bool log_limited(spdlog::logger& log, LogLimiter& limiter, spdlog::level::level_enum level,
                 fmt::format_string<Args...> format, Args&&... args) {
  if (!log.should_log(level)) return false;
  uint64_t suppressed = 0;
  if (!limiter.allow(LogLimiter::Clock::now(), &suppressed)) return false;
  std::string line = fmt::format(format, std::forward<Args>(args)...);
  if (suppressed > 0) line += fmt::format(" suppressed={}", suppressed);
  log.log(level, "{}", line);
  return true;
}

}  // namespace rdmad::base
