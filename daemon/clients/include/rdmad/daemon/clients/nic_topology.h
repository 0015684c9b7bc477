// Which NICs are nearest to a buffer: for GPU memory by distance in the PCI tree (sysfs device
// paths under `sysfs_root`), falling back to the GPU's NUMA node; for host memory by NUMA node.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "rdmad/daemon/nics/nic_directory.h"
#include "rdmad/daemon/clients/result.h"
#include "rdmad/protocol.h"

namespace rdmad::clients {

// Indexes (into nics) of the nearest NICs, all tied at the smallest distance, ascending.
Result<std::vector<uint32_t>> nearest_nics(const std::vector<NicDescriptor>& nics,
                                           const proto::NearestNicsRequest& where, const std::string& root);

// Locality classes of a buffer to a NIC, nearer is smaller (NCCL's PIX/PXB, PHB, SYS).
// The numbering is the balancer's PciDistance (balancer/), which the flow engine feeds with it.
enum class Locality : uint8_t { kSameSwitch = 0, kHostBridge = 1, kCrossSocket = 2 };

// The locality of a buffer to each NIC (indexed like nics). GPU memory: by the PCI tree under
// `root` (sharing a bridge below the root complex: same switch; the root complex only: host
// bridge; else by NUMA node); host memory: by NUMA node. Unknown counts as host bridge: nothing is
// known to be far.
std::vector<Locality> nic_localities(const std::vector<NicDescriptor>& nics, rdmad_mem_kind kind, int32_t numa_node,
                                     const std::string& gpu_pci_address, const std::string& root);

}  // namespace rdmad::clients
