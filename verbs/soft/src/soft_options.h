#pragma once
// What a soft NIC is opened with: DeviceConfig's common fields and the soft backend's options
// (option_table() in soft_backend.h, read from DeviceConfig::backend_options by soft_config).
#include <cstdint>
#include <string>
#include <vector>

#include "rdmad/cc/dcqcn_params.h"
#include "rdmad/verbs/registry.h"

namespace rdmad::verbs::soft {

struct SoftConfig {
  std::string name;
  std::string address = "127.0.0.1";  // the IP the UDP socket binds to (the GID)
  cc::DcqcnParams dcqcn = cc::mlx5_profile();
  // The options, at their defaults (option_table() takes its defaults from here and documents each).
  uint16_t udp_port = 4791;
  uint32_t line_rate_mbps = 100000;
  bool cc_enabled = true;
  uint32_t socket_buffer_bytes = 8u << 20;
  uint32_t source_ports = 8;
  std::string relay_address;  // empty: no relay
  uint16_t relay_udp_port = 0;
  uint32_t busy_poll_us = 0;
  uint32_t completion_spin_us = 0;
  bool udp_offload = true;
  bool crc_at_post = true;
};

/// An error names the option (and the backend) that is unknown or invalid.
Result<SoftConfig> soft_config(const DeviceConfig& config);

}  // namespace rdmad::verbs::soft
