#pragma once
// Who is on the other end of a client connection, as SO_PEERCRED told the service at accept.
#include <sys/types.h>

#include <cstdint>
#include <string>

#include "rdmad/daemon/clients/tenant.h"

namespace rdmad::clients {

struct Peer {
  uint64_t conn_id = 0;
  uid_t uid = 0;
  gid_t gid = 0;
  pid_t pid = 0;
  bool admin = false;   // connected through the admin socket (root or the daemon's uid)
  std::string pod_uid{};  // the Kubernetes pod it runs in (from its cgroup at accept); empty: none

  // What its quotas and listings count it as (tenant.h): its pod, else its uid.
  Tenant tenant() const { return pod_uid.empty() ? Tenant::of_uid(uid) : Tenant::of_pod(pod_uid); }
};

}  // namespace rdmad::clients
