#pragma once
// The DPDK backend ("dpdk"): the RoCEv2 engine (soft's RC queue pairs, reliability and DCQCN) over
// an rte_ethdev port instead of UDP sockets, for Ethernet NICs without RoCE offload bound to a PMD.
// Built where DPDK is (RDMAD_WITH_DPDK); the only header of the backend visible outside its folder.
#include <optional>
#include <vector>

#include "rdmad/verbs/registry.h"

namespace rdmad::verbs::dpdk {

/// {name "dpdk", capabilities, factory}. Each opened device is one NIC on the port its devargs
/// option names, with DeviceConfig::address as its RoCEv2 address.
BackendInfo backend_info();

/// Its capabilities, none of which depend on the host (backend_info() advertises exactly these).
Capabilities static_capabilities();

/// Its options (BackendInfo::options): devargs, eal_args, mbufs, neighbors, ... and the engine's.
const std::vector<OptionSpec>& option_table();

/// Adds the dpdk backend to a registry.
inline void register_backend(BackendRegistry& registry) { registry.add(backend_info()); }

/// What a dpdk NIC's port counts beside the engine's counters.
struct PortCounters {
  uint64_t unresolved_drops = 0;   // packets to a peer whose MAC was not known yet (the engine resends)
  uint64_t tx_refused = 0;         // packets the PMD did not take (a full ring, a link still down)
  uint64_t no_mbufs = 0;           // packets not built: the mbuf pool was empty
  uint64_t handoff_drops = 0;      // packets for another queue's QP that did not fit its ring
  uint64_t bad_ip_checksum = 0;    // IPv4 frames to the NIC with a wrong header checksum
  uint64_t neighbor_requests = 0;  // ARP requests / neighbour solicitations sent
  uint64_t neighbor_replies = 0;   // ARP replies / neighbour advertisements sent
};

/// The port counters of `dev` if a dpdk NIC of this process is it; nullopt otherwise.
std::optional<PortCounters> port_counters(const Device& dev);

}  // namespace rdmad::verbs::dpdk
