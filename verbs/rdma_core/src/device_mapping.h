#pragma once
// Pure translations of what a device reports (sysfs, ibv_query_port, counters) into the transport
// interface's PortInfo and NicCounters.
#include <infiniband/verbs.h>

#include "rdmad/nic_cc/port_counters.h"
#include "rdmad/verbs/counters.h"
#include "device_caps.h"
#include "device_info.h"
#include "gid_table.h"
#include "rdmad/verbs/registry.h"
#include "rdmad/verbs/types.h"

namespace rdmad::verbs::rdma_core {

/// The interface's view of a port from its sysfs facts, with `gid` (the selected source GID, or the
/// port GID on InfiniBand; zero when none) as its address. State: ACTIVE/ACTIVE_DEFER → active,
/// INIT/ARMED → init, else down. A RoCE port without an active MTU gets the one its netdev MTU allows.
verbs::PortInfo to_verbs_port(const PortInfo& port, const GidBytes& gid);

/// Overlays ibv_query_port's state, link layer and MTUs (fresher than sysfs's cached files).
void apply_port_attr(const ibv_port_attr& attr, verbs::PortInfo& out);

/// NicCounters from counters/ and hw_counters/ (either may be null: not every driver has both).
/// tx/rx bytes are the PMA data counters ×4 (wire bytes of the IB/RoCE payload, not UDP payload);
/// rx_dropped is port_rcv_errors + out_of_buffer (receives with no posted buffer); retransmitted
/// packets are not counted by mlx5 and stay 0. rxe's counters of the same meaning stand in where
/// the mlx5 name is missing (rcvd_rnr_err, rcvd_seq_err, out_of_seq_request; sent_pkts and
/// rcvd_pkts without counters/).
NicCounters to_nic_counters(const nic_cc::PortCounters* port, const nic_cc::HwCounters* hw);

/// What the backend advertises for a device: dma-buf exactly when the fd = -1 probe said supported;
/// max_mr_size what one handle can cover (kMaxSlices slices of kMaxMrSliceBytes when the device takes
/// MRs that large, else the device's own limit); hardware CC, IPv6 GIDs.
Capabilities to_capabilities(const DeviceCaps& caps, uint32_t port_max_msg_bytes);

}  // namespace rdmad::verbs::rdma_core
