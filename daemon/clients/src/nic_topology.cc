#include "rdmad/daemon/clients/nic_topology.h"

#include <climits>
#include <cstdlib>
#include <filesystem>
#include <fstream>

namespace rdmad::clients {
namespace {

// Components of the resolved sysfs device path of a PCI function, root complex first.
std::vector<std::string> pci_path(const std::string& root, const std::string& bdf) {
  std::error_code ec;
  auto path = std::filesystem::canonical(root + "/sys/bus/pci/devices/" + bdf, ec);
  std::vector<std::string> parts;
  if (ec) return parts;
  for (const auto& p : path) parts.push_back(p.string());
  return parts;
}

int pci_numa_node(const std::string& root, const std::string& bdf) {
  std::ifstream in(root + "/sys/bus/pci/devices/" + bdf + "/numa_node");
  int node = -1;
  if (!(in >> node)) return -1;
  return node;
}

std::vector<uint32_t> by_numa(const std::vector<NicDescriptor>& nics, int node) {
  std::vector<uint32_t> out;
  for (uint32_t i = 0; node >= 0 && i < nics.size(); ++i)
    if (nics[i].numa_node == node) out.push_back(i);
  if (out.empty())  // nothing known about locality: every NIC is as near as any other
    for (uint32_t i = 0; i < nics.size(); ++i) out.push_back(i);
  return out;
}

Locality by_node(int a, int b) {
  return a < 0 || b < 0 || a == b ? Locality::kHostBridge : Locality::kCrossSocket;
}

// Index of the root complex ("pci0000:00") in a device path, or npos.
size_t root_complex(const std::vector<std::string>& path) {
  for (size_t i = 0; i < path.size(); ++i)
    if (path[i].rfind("pci", 0) == 0) return i;
  return std::string::npos;
}

}  // namespace

std::vector<Locality> nic_localities(const std::vector<NicDescriptor>& nics, rdmad_mem_kind kind, int32_t numa_node,
                                     const std::string& gpu_pci_address, const std::string& root) {
  std::vector<Locality> out(nics.size(), Locality::kHostBridge);
  if (kind == RDMAD_MEM_HOST) {
    for (size_t i = 0; i < nics.size(); ++i) out[i] = by_node(numa_node, nics[i].numa_node);
    return out;
  }
  if (gpu_pci_address.empty()) return out;
  const auto gpu_path = pci_path(root, gpu_pci_address);
  const int gpu_node = pci_numa_node(root, gpu_pci_address);
  const size_t rc = root_complex(gpu_path);
  for (size_t i = 0; i < nics.size(); ++i) {
    if (nics[i].pci_address.empty()) continue;  // a software NIC: as near as memory is
    const auto nic_path = pci_path(root, nics[i].pci_address);
    size_t common = 0;
    while (common < gpu_path.size() && common < nic_path.size() && gpu_path[common] == nic_path[common]) ++common;
    if (rc != std::string::npos && !nic_path.empty() && common > rc + 1)
      out[i] = Locality::kSameSwitch;
    else if (rc != std::string::npos && !nic_path.empty() && common == rc + 1)
      out[i] = Locality::kHostBridge;
    else
      out[i] = by_node(gpu_node, nics[i].numa_node);
  }
  return out;
}

Result<std::vector<uint32_t>> nearest_nics(const std::vector<NicDescriptor>& nics,
                                           const proto::NearestNicsRequest& where, const std::string& root) {
  if (where.kind == RDMAD_MEM_HOST) return by_numa(nics, where.numa_node);
  std::string gpu = where.pci_address;
  auto gpu_path = pci_path(root, gpu);
  if (gpu_path.empty()) return Error{RDMAD_ERR_NOT_FOUND, "no PCI device " + gpu + " in sysfs"};
  std::vector<uint32_t> out;
  size_t best = SIZE_MAX;
  for (uint32_t i = 0; i < nics.size(); ++i) {
    if (nics[i].pci_address.empty()) continue;
    auto nic_path = pci_path(root, nics[i].pci_address);
    if (nic_path.empty()) continue;
    size_t common = 0;
    while (common < gpu_path.size() && common < nic_path.size() && gpu_path[common] == nic_path[common])
      ++common;
    size_t hops = (gpu_path.size() - common) + (nic_path.size() - common);
    if (hops < best) {
      best = hops;
      out.clear();
    }
    if (hops == best) out.push_back(i);
  }
  if (out.empty()) return by_numa(nics, pci_numa_node(root, gpu));
  return out;
}

}  // namespace rdmad::clients
