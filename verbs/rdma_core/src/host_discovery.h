#pragma once
// The rdma_core backend's BackendInfo::discover and ::watch_addresses: its discovery (libibverbs +
// sysfs) and rtnetlink address watcher as verbs-level data, so the daemon needs none of its types.
#include <memory>

#include "rdmad/verbs/registry.h"

namespace rdmad::verbs::rdma_core {

/// Every device libibverbs lists, plus each of scan.devices that sysfs shows (all from sysfs alone
/// with scan.sysfs_only), one HostNic per port.
Result<HostNics> discover_host(const HostScan& scan);

/// An AddressWatcher behind the verbs ChangeWatch: readable when the host's IP addresses change.
Result<std::unique_ptr<ChangeWatch>> watch_addresses();

}  // namespace rdmad::verbs::rdma_core
