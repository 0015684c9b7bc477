#include "rdmad/daemon/notifier.h"

#include <systemd/sd-daemon.h>
#include <time.h>

#include <string>

#include <fmt/format.h>

namespace rdmad::daemon {
namespace {

void notify(const std::string& text) {
  // sd_notify returns 0 when NOTIFY_SOCKET is unset; failures are not fatal for the service.
  sd_notify(0, text.c_str());
}

}  // namespace

void Notifier::ready(std::string_view status) { notify(fmt::format("READY=1\nSTATUS={}", status)); }

void Notifier::status(std::string_view status) { notify(fmt::format("STATUS={}", status)); }

void Notifier::reloading() {
  // MONOTONIC_USEC lets Type=notify-reload units (systemd ≥ 253) match the reload; older ones ignore it.
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  const long long usec = static_cast<long long>(ts.tv_sec) * 1000000 + ts.tv_nsec / 1000;
  notify(fmt::format("RELOADING=1\nMONOTONIC_USEC={}", usec));
}

void Notifier::stopping() { notify("STOPPING=1"); }

void Notifier::watchdog() { notify("WATCHDOG=1"); }

std::chrono::microseconds Notifier::watchdog_interval() const {
  uint64_t usec = 0;
  if (sd_watchdog_enabled(0, &usec) <= 0) return std::chrono::microseconds(0);
  return std::chrono::microseconds(usec / 2);
}

}  // namespace rdmad::daemon
