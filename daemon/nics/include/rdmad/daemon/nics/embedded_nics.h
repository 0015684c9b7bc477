#pragma once
// The NICs of a configuration without [[nic]]: the embedded default. Every port the backends with
// kernel ports discover (rdma_core) is a NIC; without any, one NIC of the software backend (soft0)
// on [daemon] embedded_nic_address, so that a machine without RDMA devices still serves
// registrations.
#include <map>
#include <string>
#include <vector>

#include "rdmad/config/config.h"
#include "rdmad/base/result.h"
#include "rdmad/verbs/registry.h"

namespace rdmad::daemon {

struct EmbeddedNics {
  std::vector<config::NicSection> nics;
  std::string why;  // for the log: what was found and what runs
  // Each backend's discovery that succeeded, by backend name: NodeNics starts from it instead of
  // scanning the host a second time.
  std::map<std::string, verbs::HostNics> discovered;
};

/// The [[nic]] sections the daemon runs when the file has none: it asks every backend with kernel
/// ports (Capabilities::sysfs_ports) for the host's ports. An error when there are none and the
/// soft NIC cannot run: no software backend, or "primary" on a host without a non-loopback IPv4
/// address.
base::Result<EmbeddedNics> embedded_nics(const verbs::BackendRegistry& backends, const config::Config& config);

/// The first IPv4 address of an interface that is up and not loopback; "" when there is none.
std::string primary_ipv4_address();

}  // namespace rdmad::daemon
