#pragma once
// The RoCEv2 engine: RC queue pairs with the real wire format, reliability (IB spec 9.7) and
// software DCQCN, over any PacketPort. The `soft` backend is the engine over UDP sockets, `dpdk`
// the engine over an rte_ethdev port; both open their devices here. Nothing outside verbs/
// backends includes this.
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "rdmad/cc/dcqcn_params.h"
#include "rdmad/verbs/backend_options.h"
#include "rdmad/verbs/device.h"
#include "rdmad/verbs/engine/packet_port.h"
#include "rdmad/verbs/registry.h"

namespace rdmad::verbs::engine {

/// What the engine of one NIC is opened with: DeviceConfig's common fields and the engine's own
/// options (engine_options()).
struct EngineConfig {
  std::string backend = "soft";  // DeviceInfo::backend, and the prefix of a generated device name
  std::string name;              // empty: backend + NIC number
  std::string address = "127.0.0.1";
  cc::DcqcnParams dcqcn = cc::mlx5_profile();
  // The options, at their defaults (engine_options() documents each).
  uint32_t line_rate_mbps = 100000;
  bool cc_enabled = true;
  std::string relay_address;  // empty: no relay
  uint16_t relay_udp_port = 0;
  uint32_t busy_poll_us = 0;
  uint32_t completion_spin_us = 0;
  bool crc_at_post = true;
  uint32_t datapath_threads = 1;
  uint32_t max_qps = 1u << 16;
};

/// The engine's options, which every engine backend offers besides its port's own.
std::vector<OptionSpec> engine_options();
/// Reads them (parsed by the backend from its whole table) and DeviceConfig's common fields.
EngineConfig engine_config(const DeviceConfig& config, const OptionValues& values, std::string backend);

/// Makes the NIC's port once the engine knows how QP numbers map to its queues.
using PortFactory = std::function<Result<std::unique_ptr<PacketPort>>(const PortSteering&)>;

/// Opens one NIC: its port, then `datapath_threads` datapath threads, one port queue each.
Result<std::unique_ptr<Device>> open_device(const EngineConfig& config, const PortFactory& make_port);

/// Capabilities every engine NIC has (a backend adds nothing that depends on its port).
Capabilities engine_capabilities();

/// Test-only: loop passes a NIC's datapaths have run, and the QP visits they made (a transmit turn,
/// or one of its timers handled), summed over its datapath threads.
struct PassStats {
  uint64_t passes = 0;
  uint64_t qps_visited = 0;
  size_t timers_scheduled = 0;  // on the datapaths' timing wheels, now
};
/// The pass counts of `dev`, which open_device opened (one pass of each datapath to read them).
PassStats pass_stats_for_test(const Device& dev);

}  // namespace rdmad::verbs::engine
