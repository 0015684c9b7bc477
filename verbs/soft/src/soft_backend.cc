// The soft backend: the RoCEv2 engine over UDP sockets (udp_port.h).
#include "rdmad/verbs/soft/soft_backend.h"

#include <stdexcept>

#include "rdmad/verbs/engine/engine.h"
#include "soft_options.h"
#include "udp_port.h"

namespace rdmad::verbs::soft {

Capabilities static_capabilities() { return engine::engine_capabilities(); }

BackendInfo backend_info() {
  BackendInfo b;
  b.name = "soft";
  b.caps = static_capabilities();
  b.discover = [](const HostScan&) -> Result<HostNics> { return HostNics{}; };
  b.options = option_table();
  b.open = [](const DeviceConfig& config) -> Result<std::unique_ptr<Device>> {
    auto soft = soft_config(config);
    if (!soft.ok()) return soft.status();
    const UdpPortConfig port = soft.value().port;
    return engine::open_device(
        soft.value().engine, [port](const engine::PortSteering& steering) -> Result<std::unique_ptr<engine::PacketPort>> {
          try {
            return std::unique_ptr<engine::PacketPort>(std::make_unique<UdpPort>(port, steering));
          } catch (const std::exception& e) {
            return Status::error(e.what());
          }
        });
  };
  b.list_devices = [] { return std::vector<std::string>{}; };
  return b;
}

}  // namespace rdmad::verbs::soft
