// The dpdk backend: the RoCEv2 engine over an rte_ethdev port (dpdk_port.h).
#include "rdmad/verbs/dpdk/dpdk_backend.h"

#include "dpdk_options.h"
#include "dpdk_port.h"
#include "rdmad/verbs/engine/engine.h"

namespace rdmad::verbs::dpdk {

Capabilities static_capabilities() { return engine::engine_capabilities(); }

BackendInfo backend_info() {
  BackendInfo b;
  b.name = "dpdk";
  b.caps = static_capabilities();
  b.discover = [](const HostScan&) -> Result<HostNics> { return HostNics{}; };
  b.options = option_table();
  b.open = [](const DeviceConfig& config) -> Result<std::unique_ptr<Device>> {
    auto dpdk = dpdk_config(config);
    if (!dpdk.ok()) return dpdk.status();
    const DpdkPortConfig port = dpdk.value().port;
    const DpdkPort* opened = nullptr;
    auto dev = engine::open_device(
        dpdk.value().engine,
        [&port, &opened](const engine::PortSteering& steering) -> Result<std::unique_ptr<engine::PacketPort>> {
          auto p = DpdkPort::open(port, steering);
          if (!p.ok()) return p.status();
          opened = p.value().get();
          return std::unique_ptr<engine::PacketPort>(std::move(p.value()));
        });
    if (dev.ok() && opened != nullptr) remember_device(*dev.value(), *opened);
    return dev;
  };
  b.list_devices = [] { return std::vector<std::string>{}; };
  return b;
}

}  // namespace rdmad::verbs::dpdk
