// Daemons that another local user may reach: for the tests in which a second uid attacks.
#pragma once

#include <sys/stat.h>

#include <filesystem>
#include <string>

#include "integration/flow/flow_cluster.h"

namespace rdmad::security {

/// The user the attacking clients run as.
inline constexpr uid_t kNobody = 65534;

/// A node with one soft NIC on 127.0.0.<octet> whose client socket anyone may open.
inline test::NodeSpec open_node(const std::string& id, int octet) {
  return test::NodeSpec{id, {test::NicSpec{fmt::format("127.0.0.{}", octet), 0, ""}},
                        "[ipc]\nsocket_mode = \"0666\"\n", "", 14, {}, "127.0.0.1"};
}

/// Lets other users reach the socket: its directories below /tmp become 0755.
inline void open_to_others(const std::string& socket_path) {
  namespace fs = std::filesystem;
  for (fs::path d = fs::path(socket_path).parent_path(); d.has_relative_path() && d != "/tmp"; d = d.parent_path())
    chmod(d.c_str(), 0755);
}

}  // namespace rdmad::security
