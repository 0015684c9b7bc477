#pragma once
// systemd service notifications (sd_notify): READY=1, STATUS=, RELOADING=1, WATCHDOG=1, STOPPING=1.
// Every call is a no-op when NOTIFY_SOCKET is unset, so behaviour outside systemd is unchanged.
#include <chrono>
#include <string_view>

namespace rdmad::daemon {

class Notifier {
 public:
  void ready(std::string_view status);
  void status(std::string_view status);
  void reloading();
  void stopping();
  void watchdog();
  // Interval at which watchdog() must be called: half of WATCHDOG_USEC; zero when disabled.
  std::chrono::microseconds watchdog_interval() const;
};

}  // namespace rdmad::daemon
