// GPUDirect RDMA diagnosis: why registering GPU memory works or not on this node, one line per
// check ("<ok|warn|fail|info> <check>: <detail>"). All paths are read under `root` so tests can
// point it at a fake /proc + /sys tree.
#pragma once

#include <string>
#include <vector>

#include "rdmad/daemon/clients/memory_registrar.h"
#include "rdmad/daemon/nics/nic_directory.h"

namespace rdmad::clients {

std::string diagnose_gpudirect(const std::string& root, const std::vector<NicDescriptor>& nics,
                               MemoryRegistrar& registrar);

}  // namespace rdmad::clients
