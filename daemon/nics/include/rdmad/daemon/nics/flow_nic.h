#pragma once
// A local NIC as the flow engine sees it (NodeNics::flow_nics() makes the list).
#include <cstdint>
#include <optional>
#include <string>

#include "rdmad/verbs/device.h"

namespace rdmad::daemon {

/// A local NIC flows may use, in [[nic]] order (lane i pairs with the peer's NIC i).
struct FlowNic {
  std::string name;    // [[nic]] name
  std::string device;  // the device's name (the `device` metric label)
  verbs::Device* device_ptr = nullptr;  // nullptr while out of service (nic_opened() brings it in)
  uint8_t port = 1;
  std::optional<verbs::Gid> advertise_gid;
  uint16_t advertise_udp_port = 0;
};

}  // namespace rdmad::daemon
