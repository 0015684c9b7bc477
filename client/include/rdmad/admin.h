// Operator requests (docs/protocol.md, "Admin requests") over a librdmad connection, for rdmactl.
// Internal to the project: not installed, not exported from librdmad.so, no stability promise.
#pragma once

#include <cstddef>
#include <span>
#include <vector>

#include "rdmad/protocol.h"
#include "rdmad/rdmad.h"

namespace rdmad::admin {

// Sends one request and copies the reply body into *reply. On failure the daemon's message is
// what rdmad_last_error(client) returns.
rdmad_status call(rdmad_client* client, proto::MsgType type, std::span<const std::byte> body,
                  std::vector<std::byte>* reply);

}  // namespace rdmad::admin
