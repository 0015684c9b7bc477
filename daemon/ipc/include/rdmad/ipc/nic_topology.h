// Which NICs are nearest to a buffer: for GPU memory by distance in the PCI tree (sysfs device
// paths under `sysfs_root`), falling back to the GPU's NUMA node; for host memory by NUMA node.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "rdmad/ipc/memory_registrar.h"
#include "rdmad/ipc/result.h"
#include "rdmad/protocol.h"

namespace rdmad::ipc {

// Indexes (into nics) of the nearest NICs, all tied at the smallest distance, ascending.
Result<std::vector<uint32_t>> nearest_nics(const std::vector<NicDescriptor>& nics,
                                           const proto::NearestNicsRequest& where, const std::string& root);

}  // namespace rdmad::ipc
