#pragma once
#include <chrono>
#include <memory>
#include <utility>

#include <spdlog/spdlog.h>

#include "rdmad/base/log.h"
#include "rdmad/base/log_limiter.h"

namespace rdmad::peer {

// The daemon's "peer" component logger; spdlog's default one where it was not set up (tests).
inline std::shared_ptr<spdlog::logger> peer_logger() { return log::get(log::Component::kPeer); }

// Lines an established peer can cause with any frame it sends without losing its connection (a
// stale or unexpected rebuild message): a burst per interval, then one line with the count.
inline base::LogLimiter& peer_message_limiter() {
  static base::LogLimiter limiter(std::chrono::seconds(10), 20);
  return limiter;
}

template <typename... Args>
void log_peer_message(spdlog::level::level_enum level, fmt::format_string<Args...> format, Args&&... args) {
  base::log_limited(*peer_logger(), peer_message_limiter(), level, format, std::forward<Args>(args)...);
}

}  // namespace rdmad::peer
