// Operator requests (docs/protocol.md, "Admin requests") over a librdmad connection, for rdmactl.
// Internal to the project: not installed, not exported from librdmad.so, no stability promise.
#pragma once

#include <cstddef>
#include <span>
#include <string>
#include <vector>

#include "rdmad/protocol.h"
#include "rdmad/rdmad.h"

namespace rdmad::admin {

// Sends one request and copies the reply body into *reply. On failure the daemon's message is
// what rdmad_last_error(client) returns.
rdmad_status call(rdmad_client* client, proto::MsgType type, std::span<const std::byte> body,
                  std::vector<std::byte>* reply);

// Where the daemon puts its admin socket when [ipc] admin_socket_path is not set: admin.sock in a
// sibling of the client socket's directory ("/run/rdmad/rdmad.sock" -> "/run/rdmad-admin/admin.sock"),
// never inside it. The same rule as config::default_admin_socket_path.
inline std::string default_admin_socket(const std::string& client_socket) {
  const size_t slash = client_socket.rfind('/');
  const std::string dir = slash == std::string::npos || slash == 0 ? "/run/rdmad" : client_socket.substr(0, slash);
  return dir + "-admin/admin.sock";
}

}  // namespace rdmad::admin
