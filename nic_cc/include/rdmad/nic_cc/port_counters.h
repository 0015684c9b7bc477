#pragma once
// Port counters of an RDMA port, read from /sys/class/infiniband/<dev>/ports/<p>/counters/* (IB PMA
// PortCounters) and .../hw_counters/* (driver counters: DCQCN, retransmission, errors). Plain structs
// for the metrics exporter; no I/O happens on the hot path.
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "rdmad/nic_cc/sysfs_root.h"

namespace rdmad::nic_cc {

struct PortCounters {
  // port_xmit_data / port_rcv_data count 4-byte words (IBA PortCounters: "octets divided by 4"),
  // whatever the link width; these are the byte values (×4).
  uint64_t xmit_bytes = 0;
  uint64_t rcv_bytes = 0;
  uint64_t xmit_packets = 0;
  uint64_t rcv_packets = 0;
  // Every file of counters/ as read (the *_data ones still in words), keyed by file name.
  std::map<std::string, uint64_t, std::less<>> raw;
  std::optional<uint64_t> get(std::string_view name) const;
};

struct HwCounters {
  // Every counter of hw_counters/ (without `lifespan`, which is a setting: the counter-cache lifetime
  // in ms), keyed by file name.
  std::map<std::string, uint64_t, std::less<>> values;
  std::optional<uint64_t> get(std::string_view name) const;
};

// The DCQCN-related hw_counters, nullopt where the driver has no such file.
struct DcqcnCounters {
  std::optional<uint64_t> np_ecn_marked_roce_packets;  // ECN-marked RoCE packets received (NP)
  std::optional<uint64_t> np_cnp_sent;                 // CNPs sent (NP)
  std::optional<uint64_t> rp_cnp_handled;              // CNPs that cut a rate (RP)
  std::optional<uint64_t> rp_cnp_ignored;              // CNPs received while RP CC is off for the priority
  std::optional<uint64_t> out_of_sequence;
  std::optional<uint64_t> packet_seq_err;
  std::optional<uint64_t> local_ack_timeout_err;
};
DcqcnCounters dcqcn_counters(const HwCounters& hw);

// Host directory of a port: "/sys/class/infiniband/<dev>/ports/<port>".
std::string port_dir(std::string_view device, unsigned port);

// Reads counters/; error when the directory is missing. Unparsable files are skipped.
SysfsResult<PortCounters> read_port_counters(const SysfsRoot& root, std::string_view device, unsigned port);
// Reads hw_counters/; error when the directory is missing (not every driver has one).
SysfsResult<HwCounters> read_hw_counters(const SysfsRoot& root, std::string_view device, unsigned port);

}  // namespace rdmad::nic_cc
