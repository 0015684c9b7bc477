// Configuration of the client service (socket, access control, quotas). Plain data: the daemon's
// TOML config fills it; tests build it directly.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace rdmad::clients {

struct Quota {
  uint64_t max_pinned_bytes = uint64_t{16} << 30;  // page-rounded bytes mapped for the uid
  uint32_t max_registrations = 4096;               // handles held by the uid's connections
  uint32_t max_connections = 1024;                 // connections open at once
  uint32_t max_flows = 1024;                       // flows open by the uid's connections
  uint32_t max_exports = 4096;                     // exports of the uid's connections
};

struct IpcConfig {
  std::string socket_path = "/run/rdmad/rdmad.sock";
  uint32_t socket_mode = 0660;
  std::string socket_group;  // a name or a number; empty: keep the daemon's group
  // The operator's socket (admin requests only there): mode 0600, root and the daemon's uid only.
  // Empty: no admin socket (unit tests); the daemon always sets one.
  std::string admin_socket_path;
  // Who may use the service besides root. Both empty: anyone who can open the socket (the
  // socket's mode and group are then the only gate).
  std::vector<uid_t> allowed_uids;
  std::vector<gid_t> allowed_gids;  // matched against the peer's primary and supplementary groups
  std::map<uid_t, Quota> quotas;    // per uid tenant (outside pods); others get default_quota
  std::map<std::string, Quota> pod_quotas;  // per pod tenant, by pod UID
  // Where /proc/<pid>/cgroup is read to name a client's tenant (tenant.h); tests use a fixture tree.
  std::string proc_root = "/proc";
  Quota default_quota;
  bool systemd_activation = true;   // adopt a socket passed by systemd for socket_path
  std::string diagnose_root = "/";  // prefix for /proc and /sys in diagnose (tests use a fake tree)
  uint32_t max_clients = 16384;  // lowered at start to what the file-descriptor limit allows
  // A connection that has not said hello by then is closed; so is one that holds nothing (no
  // registration, no flow) and has sent nothing for idle_timeout_ms (0: never).
  uint32_t hello_timeout_ms = 5000;
  uint32_t idle_timeout_ms = 300000;
  // Share of a NIC's memory-region table one uid's registrations may fill (MemoryRegistrar::
  // mr_capacity), whatever its max_registrations.
  uint32_t nic_table_share_percent = 25;
  // Threads serving the client connections (a new one goes to the least loaded), and as many bulk
  // threads for large registrations; 0: min(4, hardware threads).
  uint32_t workers = 0;
};

}  // namespace rdmad::clients
