#pragma once
// Backend registry {name, factory, capabilities}. All backends are built into one binary and
// chosen by configuration (`[[nic]] backend = "soft"`) at startup.
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "rdmad/cc/dcqcn_params.h"
#include "rdmad/verbs/device.h"
#include "rdmad/verbs/host_nic.h"

namespace rdmad::verbs {

/// What a backend implements. A test checks that each advertised capability behaves as claimed.
struct Capabilities {
  bool dmabuf_mr = false;        // ProtectionDomain::reg_dmabuf_mr works
  bool software_cc = false;      // DCQCN runs in the backend (otherwise in NIC firmware)
  bool ipv6 = false;             // GIDs may be IPv6
  uint64_t max_mr_size = 0;      // bytes
  uint32_t max_mr = 0;           // memory regions per device (0: unknown)
  uint32_t max_qp = 0;
  uint32_t max_qp_wr = 0;
  uint32_t max_cq_depth = 0;
  uint32_t max_msg_size = 0;     // bytes of one work request
  uint32_t min_mtu_bytes = 256;
  uint32_t max_mtu_bytes = 4096;

  // How the daemon treats the backend's NICs. Each says what it means, so that nothing outside the
  // backends tests a backend's name.

  // ProtectionDomain::reg_mr faults the pages in and pins them (a NIC's DMA needs them resident).
  // False for a user-space NIC (soft), which reaches memory through the daemon's own mapping: the
  // registration path then maps a memfd's pages itself and registers dma-bufs through a mapping.
  bool registration_faults_in_pages = false;
  // The NIC's ports are kernel RDMA ports (/sys/class/infiniband): discover() finds them, their
  // counters are exported from sysfs and their DCQCN is managed there (rdmad/nic_cc), even while
  // the device cannot be opened. False: the daemon exports Device::counters() (datapath counters).
  bool sysfs_ports = false;
  // open() opens an existing device, named by DeviceConfig::name ([[nic]] device), whose port
  // DeviceConfig::port is used. False: open() makes a one-port NIC named after the [[nic]].
  bool opens_named_device = false;
  // DeviceConfig::address is required: the NIC binds to it (its GID is that address).
  bool needs_address = false;
  // A [[nic]] address picks the source GID among the port's (the GID of that address). Such GIDs
  // follow the host's IP addresses: see watch_addresses.
  bool address_selects_gid = false;
  // A NIC that fails to open (driver loading, device absent) is kept out of service in its slot and
  // retried with back-off, because sysfs still manages it. False: a failed open is a start-up
  // error (the configuration is wrong: an address that is not local, a port that is taken).
  bool retries_failed_open = false;
};

/// A descriptor that becomes readable when something the backend's NICs depend on changed (the
/// host's IP addresses, which the kernel's GID tables follow).
class ChangeWatch {
 public:
  virtual ~ChangeWatch() = default;
  /// Non-blocking; poll it for readability, then drain().
  virtual int fd() const = 0;
  /// Reads what is pending without blocking; true when anything changed (or may have: messages lost).
  virtual bool drain() = 0;
};

/// How to open one NIC. Backends read the fields they need.
struct DeviceConfig {
  std::string name;                 // device name: soft NICs name themselves, rdma_core opens it
  std::string address = "127.0.0.1";  // soft: IP the UDP socket binds to (the GID)
  uint16_t udp_port = 4791;         // soft: 0 picks an ephemeral port (tests)
  uint32_t line_rate_mbps = 100000;  // soft: port speed and DCQCN line rate
  bool cc_enabled = true;           // soft: run DCQCN (reaction + notification point)
  cc::DcqcnParams dcqcn = cc::mlx5_profile();
  uint32_t socket_buffer_bytes = 8u << 20;  // soft: SO_SNDBUF/SO_RCVBUF
  // soft: send sockets bound to random ports in 49152-65535; each QP sends from one of them, picked
  // by a hash of its and its peer's QP numbers (as hardware derives the source port from the flow
  // label), so ECMP can spread QPs over paths. 0 sends everything from udp_port.
  uint32_t source_ports = 8;
  // soft: the relay in front of this NIC when peers reach it through one (an rdmad-fabric port;
  // [[nic]] advertise_address/advertise_udp_port). A relay forwards from its own address and port,
  // so QPs accept exactly that source besides their peer's. Empty: no relay. Every packet's ICRC is
  // verified either way (a relay re-seals what it forwards).
  std::string relay_address;
  uint16_t relay_udp_port = 0;
  // soft: keep polling this long after the last work before sleeping in ppoll. Spinning shortens
  // round trips when the datapath has a core of its own and lengthens them when cores are shared.
  uint32_t busy_poll_us = 0;
  // soft: after handing completions to a CQ, keep polling this long (or until the datapath sends
  // again) for the work the application posts in reply: a request/response exchange then costs one
  // thread wake-up per direction, as a UDP ping-pong does, instead of two at the requester. Off by
  // default: worth 10-50 µs where the datapath thread has a core to itself; on oversubscribed cores
  // the spinning thread delays the ones it waits for (BENCHMARKS.md, soft backend).
  uint32_t completion_spin_us = 0;
  // soft: UDP segmentation offload (UDP_SEGMENT sends, UDP_GRO receives): a run of packets crosses
  // the kernel as one buffer. Where the kernel splits a run for a NIC without the offload, the IP
  // ids of the packets count up from 0; soft receivers assume 0 in the ICRC either way, hardware
  // RoCE receivers include them: turn it off when soft NICs talk to hardware NICs.
  bool udp_offload = true;
  // soft: the thread that posts a SEND or WRITE of at least 16 KiB computes the CRC-32 of its
  // full-MTU payload segments, and the datapath combines each with its headers' CRC for the ICRC
  // instead of reading the payload twice. Moves about a tenth of the requester's work at 1 MiB
  // onto the posting thread (BENCHMARKS.md). False: the datapath computes every ICRC (tests, A/B).
  bool crc_at_post = true;
  // rdma_core: which port, which source GID, which DSCP. name empty opens the first device.
  uint8_t port = 1;                 // rdma_core: port number (from 1)
  int gid_index = -1;               // rdma_core: fixed GID index; -1 selects by gid_netdev/gid_cidr
  std::string gid_netdev;           // rdma_core: netdev the RoCEv2 GID must be bound to (VLANs on it too)
  std::string gid_cidr;             // rdma_core: optional prefix the GID must be in ("10.0.0.0/16")
  bool gid_ipv6 = false;            // rdma_core: the fabric is IPv6 (prefer IPv6 GIDs over IPv4-mapped)
  uint8_t dscp = 26;                // rdma_core: DSCP of data packets (traffic class = DSCP with ECT(0))
  uint8_t sl = 0;                   // rdma_core: service level of the QPs (InfiniBand SL; RoCE: the priority
                                    // mlx5 maps it to where the port does not trust DSCP)
  std::string sysfs_root = "/";     // rdma_core: stands in for "/" when reading sysfs (tests)
};

struct BackendInfo {
  std::string name;
  Capabilities caps;
  std::function<Result<std::unique_ptr<Device>>(const DeviceConfig&)> open;
  /// Names of the devices present (empty when the hardware is absent).
  std::function<std::vector<std::string>()> list_devices;
  /// The host's ports of this backend's devices, found without opening them for the datapath (soft
  /// has none: its NICs exist only once opened). An error only when the backend's own listing
  /// fails in a way other than "no devices".
  std::function<Result<HostNics>(const HostScan&)> discover;
  /// Opens a watch on what moves this backend's source GIDs (address_selects_gid); null where
  /// nothing does.
  std::function<Result<std::unique_ptr<ChangeWatch>>()> watch_addresses;
};

class BackendRegistry {
 public:
  /// Adds or replaces a backend by name.
  void add(BackendInfo info);
  /// nullptr when no backend has that name.
  const BackendInfo* find(const std::string& name) const;
  std::vector<std::string> names() const;
  /// Opens a device with the named backend; an error names the backend when it is unknown.
  Result<std::unique_ptr<Device>> open(const std::string& backend, const DeviceConfig& config) const;

 private:
  std::vector<BackendInfo> backends_;
};

/// Adds every backend built into this binary (soft, rdma_core): the one way the daemon, tools and
/// benchmarks reach a backend (target rdmad::verbs_backends, which links them privately).
void register_builtin_backends(BackendRegistry& registry);

}  // namespace rdmad::verbs
