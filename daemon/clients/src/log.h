#pragma once

#include <memory>

#include "rdmad/base/log.h"

namespace rdmad::clients {

// The "ipc" component logger.
inline std::shared_ptr<spdlog::logger> ipc_log() { return log::get(log::Component::kIpc); }

}  // namespace rdmad::clients
