#pragma once
#include <memory>

#include <spdlog/spdlog.h>

namespace rdmad::peer {

// The daemon's "peer" component logger; spdlog's default one where it was not set up (tests).
inline std::shared_ptr<spdlog::logger> peer_logger() {
  auto l = spdlog::get("peer");
  return l ? l : spdlog::default_logger();
}

}  // namespace rdmad::peer
