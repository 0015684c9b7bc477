#pragma once
// Backend registry {name, factory, capabilities}. All backends are built into one binary and
// chosen by configuration (`[[nic]] backend = "soft"`) at startup.
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "rdmad/cc/dcqcn_params.h"
#include "rdmad/verbs/backend_options.h"
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
  // its `port` option names. False: open() makes a one-port NIC named after the [[nic]].
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

/// How to open one NIC. What only one backend reads is in backend_options, checked against that
/// backend's table (BackendInfo::options) when it opens the NIC.
struct DeviceConfig {
  std::string name;  // soft NICs are named after it; rdma_core opens the device of that name (empty: the first)
  std::string address = "127.0.0.1";  // soft: the IP its UDP socket binds to (its GID)
  cc::DcqcnParams dcqcn = cc::mlx5_profile();  // backends that run DCQCN themselves (Capabilities::software_cc)
  BackendOptions backend_options;
};

struct BackendInfo {
  std::string name;
  Capabilities caps;
  /// The options open() reads from DeviceConfig::backend_options, with defaults, ranges and help
  /// (configuration makes a [[nic]] key of each). open() refuses a key outside it.
  std::vector<OptionSpec> options;
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

/// Adds every backend built into this binary (soft, rdma_core, dpdk where DPDK is): the one way the daemon, tools and
/// benchmarks reach a backend (target rdmad::verbs_backends, which links them privately).
void register_builtin_backends(BackendRegistry& registry);

}  // namespace rdmad::verbs
