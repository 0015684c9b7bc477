#pragma once

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <memory>

namespace rdmad::ipc {

// The "ipc" component logger, created on first use when the daemon has not set it up.
inline std::shared_ptr<spdlog::logger> ipc_log() {
  static std::shared_ptr<spdlog::logger> log = [] {
    auto l = spdlog::get("ipc");
    if (!l) {
      try {
        l = spdlog::stderr_color_mt("ipc");
      } catch (const spdlog::spdlog_ex&) {  // registered concurrently
        l = spdlog::get("ipc");
      }
    }
    return l;
  }();
  return log;
}

}  // namespace rdmad::ipc
