#include "device_info.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <tuple>

namespace rdmad::verbs::rdma_core {

using nic_cc::SysfsRoot;
using nic_cc::trim;

std::string_view to_string(LinkLayer l) {
  switch (l) {
    case LinkLayer::kInfiniBand:
      return "InfiniBand";
    case LinkLayer::kEthernet:
      return "Ethernet";
    case LinkLayer::kUnknown:
      break;
  }
  return "unknown";
}

std::optional<uint64_t> parse_rate_mbps(std::string_view rate) {
  rate = trim(rate);
  const auto sp = rate.find(' ');
  if (sp == std::string_view::npos || rate.substr(sp + 1, 3) != "Gb/") return std::nullopt;
  const std::string number(rate.substr(0, sp));
  char* end = nullptr;
  const double gbps = std::strtod(number.c_str(), &end);
  if (end != number.c_str() + number.size() || !(gbps >= 0)) return std::nullopt;
  return static_cast<uint64_t>(std::llround(gbps * 1000.0));
}

std::pair<int, std::string> parse_state(std::string_view text) {
  text = trim(text);
  const auto colon = text.find(':');
  int v = 0;
  if (colon == std::string_view::npos) return {0, std::string(text)};
  std::from_chars(text.data(), text.data() + colon, v);
  return {v, std::string(trim(text.substr(colon + 1)))};
}

uint32_t roce_active_mtu(uint32_t netdev_mtu) {
  constexpr uint32_t kRoceOverhead = 40 + 12 + 4 + 28 + 4;
  if (netdev_mtu < kRoceOverhead + 256) return 0;
  const uint32_t room = netdev_mtu - kRoceOverhead;
  for (uint32_t mtu = 4096; mtu >= 256; mtu /= 2) {
    if (mtu <= room) return mtu;
  }
  return 0;
}

namespace {

std::string text_or_empty(const SysfsRoot& root, const std::string& path) {
  return root.read_trimmed(path).value_or(std::string());
}

PortInfo read_port(const SysfsRoot& root, const std::string& dev_dir, unsigned num) {
  const std::string p = fmt::format("{}/ports/{}", dev_dir, num);
  PortInfo port;
  port.port = num;
  const std::string ll = text_or_empty(root, p + "/link_layer");
  port.link_layer = ll == "InfiniBand" ? LinkLayer::kInfiniBand
                    : ll == "Ethernet" ? LinkLayer::kEthernet
                                       : LinkLayer::kUnknown;
  std::tie(port.state, port.state_text) = parse_state(text_or_empty(root, p + "/state"));
  std::tie(port.phys_state, port.phys_state_text) = parse_state(text_or_empty(root, p + "/phys_state"));
  port.rate_text = text_or_empty(root, p + "/rate");
  port.rate_mbps = parse_rate_mbps(port.rate_text).value_or(0);
  if (port.link_layer == LinkLayer::kInfiniBand) {
    port.lid = static_cast<uint16_t>(root.read_u64(p + "/lid").value_or(0));
  }
  // The kernel binds GID 0 of a RoCE port to the port's own netdev.
  if (port.link_layer == LinkLayer::kEthernet) {
    port.netdev = text_or_empty(root, p + "/gid_attrs/ndevs/0");
    if (!port.netdev.empty()) {
      port.netdev_mtu =
          static_cast<uint32_t>(root.read_u64("/sys/class/net/" + port.netdev + "/mtu").value_or(0));
      port.active_mtu_bytes = roce_active_mtu(port.netdev_mtu);
    }
  }
  return port;
}

bool is_pci_address(std::string_view s) {
  // "dddd:bb:dd.f", hex digits.
  if (s.size() != 12 || s[4] != ':' || s[7] != ':' || s[10] != '.') return false;
  for (size_t i = 0; i < s.size(); ++i) {
    if (i == 4 || i == 7 || i == 10) continue;
    if (!std::isxdigit(static_cast<unsigned char>(s[i]))) return false;
  }
  return true;
}

// The PCI function a netdev sits on: the last PCI address in the path of its `device` (a virtio
// netdev's device is virtioN, a child of the PCI function). Empty when there is none.
std::string pci_function_of(const SysfsRoot& root, const std::string& netdev, std::string* path) {
  const auto dev = root.resolve("/sys/class/net/" + netdev + "/device");
  if (!dev) return {};
  std::string found;
  for (size_t start = 0; start < dev->size();) {
    size_t slash = dev->find('/', start);
    if (slash == std::string::npos) slash = dev->size();
    const std::string part = dev->substr(start, slash - start);
    if (is_pci_address(part)) {
      found = part;
      *path = dev->substr(0, slash);
    }
    start = slash + 1;
  }
  return found;
}

}  // namespace

DeviceInfo read_device_sysfs(const SysfsRoot& root, std::string_view name) {
  const std::string dir = fmt::format("/sys/class/infiniband/{}", name);
  DeviceInfo d;
  d.name = std::string(name);
  d.sysfs_path = root.resolve(dir).value_or(dir);
  d.node_type = text_or_empty(root, dir + "/node_type");
  d.fw_ver = text_or_empty(root, dir + "/fw_ver");
  d.hca_type = text_or_empty(root, dir + "/hca_type");
  d.board_id = text_or_empty(root, dir + "/board_id");
  d.node_guid = text_or_empty(root, dir + "/node_guid");
  if (auto pci = root.resolve(dir + "/device")) {
    const auto slash = pci->rfind('/');
    const std::string last = pci->substr(slash + 1);
    // A PCI function directory is named by its address; software devices (rxe) have no `device`.
    if (pci->find("/pci") != std::string::npos) d.pci_address = last;
    const auto numa = root.read_trimmed(dir + "/device/numa_node");
    if (numa) d.numa_node = std::atoi(numa->c_str());
    d.netdevs = root.list(dir + "/device/net");
  }
  for (const auto& p : root.list(dir + "/ports")) {
    if (const auto num = nic_cc::parse_u64(p))
      d.ports.push_back(read_port(root, dir, static_cast<unsigned>(*num)));
  }
  std::sort(d.ports.begin(), d.ports.end(),
            [](const PortInfo& a, const PortInfo& b) { return a.port < b.port; });
  if (d.pci_address.empty()) {
    // A software device (rxe, siw) has no PCI function of its own; its traffic goes through the
    // netdev it is bound to, so that NIC's PCI function and NUMA node are where it sits.
    for (const PortInfo& p : d.ports) {
      std::string pci_dir;
      if (p.netdev.empty()) continue;
      d.pci_address = pci_function_of(root, p.netdev, &pci_dir);
      if (d.pci_address.empty()) continue;
      if (const auto numa = root.read_trimmed(pci_dir + "/numa_node")) d.numa_node = std::atoi(numa->c_str());
      if (d.netdevs.empty()) d.netdevs.push_back(p.netdev);
      break;
    }
  }
  return d;
}

std::vector<DeviceInfo> discover_sysfs(const SysfsRoot& root) {
  std::vector<DeviceInfo> out;
  for (const auto& name : root.list("/sys/class/infiniband")) out.push_back(read_device_sysfs(root, name));
  return out;
}

std::vector<std::string> describe(const DeviceInfo& d) {
  std::vector<std::string> lines;
  for (const auto& p : d.ports) {
    std::string line = fmt::format("{} port {}: {} {} {} Gb/s", d.name, p.port, to_string(p.link_layer),
                                   p.state_text.empty() ? "state?" : p.state_text,
                                   static_cast<double>(p.rate_mbps) / 1000.0);
    if (p.active_mtu_bytes != 0) line += fmt::format(" mtu {}", p.active_mtu_bytes);
    if (!p.netdev.empty()) line += fmt::format(" netdev {}", p.netdev);
    if (p.link_layer == LinkLayer::kInfiniBand) line += fmt::format(" lid 0x{:x}", p.lid);
    if (!d.pci_address.empty()) line += fmt::format(" pci {}", d.pci_address);
    if (d.numa_node >= 0) line += fmt::format(" numa {}", d.numa_node);
    if (!d.fw_ver.empty()) line += fmt::format(" fw {}", d.fw_ver);
    lines.push_back(std::move(line));
  }
  if (lines.empty()) lines.push_back(fmt::format("{}: no ports in sysfs", d.name));
  return lines;
}

}  // namespace rdmad::verbs::rdma_core
