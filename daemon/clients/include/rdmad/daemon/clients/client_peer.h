#pragma once
// Who is on the other end of a client connection, as SO_PEERCRED told the service at accept.
#include <sys/types.h>

#include <cstdint>

namespace rdmad::clients {

struct Peer {
  uint64_t conn_id = 0;
  uid_t uid = 0;
  gid_t gid = 0;
  pid_t pid = 0;
};

}  // namespace rdmad::clients
