// Ends the test binary with a message when a call that must return does not: a library that
// blocks forever fails the test in seconds instead of hanging it until ctest's timeout.
#pragma once

#include <poll.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <thread>

namespace rdmad::test {

class Watchdog {
 public:
  // `on_fire` runs before the exit (e.g. SIGKILL the daemons a blocked test would leave behind).
  Watchdog(std::chrono::milliseconds limit, std::string what, std::function<void()> on_fire = {})
      : what_(std::move(what)), on_fire_(std::move(on_fire)) {
    thread_ = std::thread([this, limit] {
      const auto end = std::chrono::steady_clock::now() + limit;
      while (!done_.load()) {
        if (std::chrono::steady_clock::now() >= end) {
          std::fprintf(stderr, "FAILED: %s (still blocked after %lld ms)\n", what_.c_str(),
                       static_cast<long long>(limit.count()));
          std::fflush(stderr);
          if (on_fire_) on_fire_();
          std::_Exit(1);
        }
        pollfd none{};
        ::poll(&none, 0, 10);
      }
    });
  }
  ~Watchdog() {
    done_ = true;
    thread_.join();
  }
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

 private:
  std::string what_;
  std::function<void()> on_fire_;
  std::atomic<bool> done_{false};
  std::thread thread_;
};

}  // namespace rdmad::test
