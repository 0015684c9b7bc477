#pragma once
// How the fleet's daemons find each other, and the configuration that follows from it. THE SWITCH
// is RDMAD_FLEET_DEFAULT_DISCOVERY in tests/integration/fleet/CMakeLists.txt (the `fleet` ctest
// entry runs that mode); RDMAD_FLEET_DISCOVERY=static|dns in the environment overrides it for a
// run, and the `fleet_dns` entry runs DNS whatever the default.
//
//   static: every node lists the other 31 in [[peers]] (sessions come up at start).
//   dns:    every node has [peer] discover = "dns:rdmad-peers.fleet.test" (the A records dnsmasq
//           serves in the hub; port discover_port), re-resolved every discover_interval_ms;
//           sessions open on the first flow and close after idle_session_ms.
#include <cstdlib>
#include <string>

#include <fmt/format.h>

#include "fleet_net.h"

namespace rdmad::test::fleet {

enum class Discovery { kStatic, kDns };

inline constexpr int kPeerPort = 18515;           // every node's peer channel ([peer] discover_port's default)
inline constexpr int kDiscoverIntervalMs = 1000;  // dns: how often the name is resolved again
inline constexpr int kKeepaliveIntervalMs = 1000;  // flow_cluster.h's Node writes this
inline constexpr int kKeepaliveMisses = 3;         // the daemon's default

inline Discovery discovery_mode() {
  const char* env = std::getenv("RDMAD_FLEET_DISCOVERY");
  const std::string mode = env != nullptr ? env : RDMAD_FLEET_DEFAULT_DISCOVERY;
  return mode == "dns" ? Discovery::kDns : Discovery::kStatic;
}

inline const char* name(Discovery d) { return d == Discovery::kDns ? "dns" : "static"; }

/// The [peer] keys a node adds to what flow_cluster.h's Node writes (listen, node id, cluster key,
/// keepalive, reconnect back-off).
inline std::string peer_keys(Discovery d) {
  if (d == Discovery::kStatic) return "";
  return fmt::format("discover = \"dns:{}\"\ndiscover_port = {}\ndiscover_interval_ms = {}\nidle_session_ms = 600000\n",
                     kServiceName, kPeerPort, kDiscoverIntervalMs);
}

/// The tables appended to node `node`'s file: in static mode the other nodes' [[peers]]; in both
/// the knobs that keep 32 daemons within two cores (one client worker each).
inline std::string extra_tables(Discovery d, int node, int nodes) {
  std::string t;
  if (d == Discovery::kStatic)
    for (int j = 0; j < nodes; ++j)
      if (j != node)
        t += fmt::format("[[peers]]\nnode_id = \"node-{:02}\"\naddress = \"{}:{}\"\n", j, FleetNet::address(j, 0),
                         kPeerPort);
  t += "[ipc]\nworkers = 1\n";
  if (const char* more = std::getenv("RDMAD_FLEET_EXTRA_TOML")) t += std::string(more) + "\n";
  return t;
}

/// The longest the others may take to see a removed node go: its connections close at once when
/// its daemon dies (the kernel resets them), a silent one by keepalive; in dns mode the next
/// resolution drops its record too.
inline int notice_bound_ms(Discovery d) {
  return kKeepaliveIntervalMs * kKeepaliveMisses + (d == Discovery::kDns ? kDiscoverIntervalMs : 0) + 2000;
}

}  // namespace rdmad::test::fleet
