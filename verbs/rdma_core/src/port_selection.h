#pragma once
// From a NIC's configuration (RdmaCoreConfig: port, gid_index / gid_netdev / gid_cidr) to the source
// GID of a port. Pure over a GID table and the sysfs root, so fixture hosts exercise it.
#include <span>
#include <string>
#include <string_view>

#include "rdmad/nic_cc/sysfs_root.h"
#include "device_info.h"
#include "gid_selector.h"
#include "rc_options.h"
#include "rdmad/verbs/registry.h"

namespace rdmad::verbs::rdma_core {

/// The GID rule the config asks for: a fixed gid_index when set (>= 0); otherwise bound to
/// gid_netdev (or the port's own netdev when empty) and the VLANs on top of it, of the fabric's
/// family, inside gid_cidr when set. Error text for a malformed CIDR.
base::Result<GidMatch, std::string> gid_match_from_config(const RdmaCoreConfig& config,
                                                            const nic_cc::SysfsRoot& root,
                                                            std::string_view port_netdev);

/// The source GID of `port`: on Ethernet the RoCEv2 rule of `match`; on InfiniBand the port GID
/// (index 0, or the fixed gid_index).
GidChoice select_port_gid(std::span<const GidEntry> table, const PortInfo& port, const GidMatch& match);

/// The interface's PortInfo of `port` of `device` from sysfs alone, with the GID `config` selects
/// from the sysfs GID table (zero GID when none qualifies; *choice says why).
verbs::PortInfo port_info_from_sysfs(const nic_cc::SysfsRoot& root, const DeviceInfo& device,
                                     const PortInfo& port, const RdmaCoreConfig& config,
                                     GidChoice* choice = nullptr);

}  // namespace rdmad::verbs::rdma_core
