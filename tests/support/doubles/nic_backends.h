#pragma once
// A backend registry for tests of the node's NIC slots: `hardware` (rdma_core by default) is a
// backend with a hardware NIC's capabilities whose devices open only once `present` names them
// (StubDevices) and whose discovery finds `host_ports`, and `soft` a software backend whose NICs never open (address not local).
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "rdmad/config/config.h"
#include "rdmad/verbs/builtin_backends.h"
#include "rdmad/verbs/host_nic.h"
#include "rdmad/verbs/registry.h"
#include "support/doubles/stub_device.h"

namespace rdmad::daemon::test {

// What the daemon's handling of a hardware NIC rests on (as the rdma_core backend advertises).
inline verbs::Capabilities hardware_caps() {
  verbs::Capabilities c;
  c.registration_faults_in_pages = true;
  c.sysfs_ports = true;
  c.opens_named_device = true;
  c.address_selects_gid = true;
  c.retries_failed_open = true;
  return c;
}

// The option table of a built-in backend (so that options reach the doubles as they reach it).
inline std::vector<verbs::OptionSpec> options_of(const std::string& builtin) {
  return verbs::find_builtin_backend(builtin)->options;
}

// `hardware` here: a backend whose devices open only once `present` names them.
struct NicBackends {
  std::set<std::string> present;
  std::vector<std::string> opened;  // every attempt, by device name
  std::vector<verbs::DeviceConfig> configs;
  std::vector<verbs::HostNic> host_ports;  // what the hardware backend's discover() finds
  int discoveries = 0;                     // its discover() calls
  verbs::BackendRegistry registry;
  explicit NicBackends(const std::string& hardware = "rdma_core") {
    registry.add({hardware, hardware_caps(), options_of("rdma_core"), [this](const verbs::DeviceConfig& c) -> verbs::Result<std::unique_ptr<verbs::Device>> {
                    opened.push_back(c.name);
                    configs.push_back(c);
                    if (!present.count(c.name)) return verbs::Status::error("no RDMA device named '" + c.name + "'");
                    return std::unique_ptr<verbs::Device>(new StubDevice(c.name));
                  },
                  [] { return std::vector<std::string>{}; },
                  [this](const verbs::HostScan&) -> verbs::Result<verbs::HostNics> {
                    ++discoveries;
                    verbs::HostNics found;
                    found.ports = host_ports;
                    for (const verbs::HostNic& p : host_ports) found.devices.push_back(p.device);
                    return found;
                  },
                  nullptr});
    verbs::Capabilities soft;
    soft.needs_address = true;
    soft.software_cc = true;
    registry.add({"soft", soft, options_of("soft"), [](const verbs::DeviceConfig&) -> verbs::Result<std::unique_ptr<verbs::Device>> {
                    return verbs::Status::error("address not local");
                  },
                  [] { return std::vector<std::string>{}; }, nullptr, nullptr});
  }
};

inline config::NicSection rdma_nic(const std::string& name, const std::string& device) {
  config::NicSection n;
  n.name = name;
  n.backend = "rdma_core";
  n.device = device;
  return n;
}

}  // namespace rdmad::daemon::test
