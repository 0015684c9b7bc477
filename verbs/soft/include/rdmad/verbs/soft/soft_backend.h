#pragma once
// The software RoCEv2 backend ("soft"): RC queue pairs over UDP sockets with the real RoCEv2 wire
// format, ECN marking/reading and software DCQCN. The only header of the backend visible outside
// its folder: the daemon registers it, everything else goes through the verbs interface.
#include <vector>

#include "rdmad/verbs/registry.h"

namespace rdmad::verbs::soft {

/// {name "soft", capabilities, factory}. Each opened device is one soft NIC with its own socket and
/// datapath thread; DeviceConfig::address and its udp_port option say where it listens.
BackendInfo backend_info();

/// Its capabilities, none of which depend on the host (backend_info() advertises exactly these).
Capabilities static_capabilities();

/// Its options (BackendInfo::options): udp_port, line_rate_mbps, cc_enabled, ... with defaults,
/// ranges and help.
const std::vector<OptionSpec>& option_table();

/// Adds the soft backend to a registry.
inline void register_backend(BackendRegistry& registry) { registry.add(backend_info()); }

}  // namespace rdmad::verbs::soft
