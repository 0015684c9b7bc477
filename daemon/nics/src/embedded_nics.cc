#include "rdmad/daemon/nics/embedded_nics.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>

#include <fmt/format.h>

namespace rdmad::daemon {
namespace {

// The backend a machine without RDMA devices runs: the one whose NICs are made, not found (soft).
const verbs::BackendInfo* software_backend(const verbs::BackendRegistry& backends) {
  for (const std::string& name : backends.names()) {
    const verbs::BackendInfo* b = backends.find(name);
    if (b->caps.software_cc && b->caps.needs_address && !b->caps.opens_named_device) return b;
  }
  return nullptr;
}

}  // namespace

std::string primary_ipv4_address() {
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return "";
  std::string found;
  for (const ifaddrs* a = list; a != nullptr && found.empty(); a = a->ifa_next) {
    if (a->ifa_addr == nullptr || a->ifa_addr->sa_family != AF_INET) continue;
    if ((a->ifa_flags & IFF_UP) == 0 || (a->ifa_flags & IFF_LOOPBACK) != 0) continue;
    char text[INET_ADDRSTRLEN] = {};
    const auto* in = reinterpret_cast<const sockaddr_in*>(a->ifa_addr);
    if (inet_ntop(AF_INET, &in->sin_addr, text, sizeof text) != nullptr) found = text;
  }
  freeifaddrs(list);
  return found;
}

base::Result<EmbeddedNics> embedded_nics(const verbs::BackendRegistry& backends, const config::Config& config) {
  EmbeddedNics out;
  std::vector<std::string> found;
  for (const std::string& name : backends.names()) {
    const verbs::BackendInfo* b = backends.find(name);
    if (!b->caps.sysfs_ports || !b->discover) continue;
    verbs::HostScan scan;
    scan.sysfs_root = config.daemon.sysfs_root.empty() ? "/" : config.daemon.sysfs_root;
    auto host = b->discover(scan);
    if (!host.ok()) continue;  // HardwareNics logs the discovery error when it runs it again
    out.discovered.emplace(name, host.value());
    for (const verbs::HostNic& p : host.value().ports) {
      config::NicSection n;
      n.name = p.port == 1 ? p.device : fmt::format("{}-{}", p.device, p.port);
      n.backend = name;
      n.device = p.device;
      n.port = p.port;
      out.nics.push_back(std::move(n));
      found.push_back(fmt::format("{} port {}", p.device, p.port));
    }
  }
  if (!out.nics.empty()) {
    out.why = fmt::format("every rdma port found: {}", fmt::join(found, ", "));
    return out;
  }
  const verbs::BackendInfo* soft = software_backend(backends);
  if (soft == nullptr) return base::Status::error("no [[nic]], no RDMA device and no software backend to run instead");
  config::NicSection n;
  n.name = "soft0";
  n.backend = soft->name;
  if (config.daemon.embedded_nic_address == "primary") {
    n.address = primary_ipv4_address();
    if (n.address.empty())
      return base::Status::error(
          "no [[nic]] and no RDMA device, and embedded_nic_address = \"primary\" finds no IPv4 address on an "
          "interface that is up and not loopback: configure a [[nic]] or set embedded_nic_address to an address");
    n.udp_port = 4791;
  } else {
    n.address = config.daemon.embedded_nic_address.empty() ? "127.0.0.1" : config.daemon.embedded_nic_address;
    // On loopback only local applications use it: a free port, so that several daemons (and tests) coexist.
    n.udp_port = n.address == "127.0.0.1" || n.address == "::1" ? 0 : 4791;
  }
  out.why = fmt::format("no rdma device: one {} nic on {}", soft->name, n.address);
  out.nics.push_back(std::move(n));
  return out;
}

}  // namespace rdmad::daemon
