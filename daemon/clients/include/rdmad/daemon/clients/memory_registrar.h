// What the client service needs from the transport layer: registering memory on NICs (the NICs
// themselves it sees through clients::NicDirectory, rdmad/daemon/nics/nic_directory.h). The daemon
// adapts its verbs backends to this interface; the tests' doubles are in tests/support/doubles/.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "rdmad/daemon/clients/result.h"
#include "rdmad/rdmad.h"

namespace rdmad::clients {

struct NicKeys {
  uint32_t nic_index;
  uint32_t lkey;
  uint32_t rkey;
};

struct MemoryRegion {
  uint64_t mr_id = 0;  // registrar-private identity passed back to deregister()
  std::vector<NicKeys> keys;
};

struct DmabufSupport {
  bool supported = false;
  std::string reason;  // why not, or how (e.g. "ibv_reg_dmabuf_mr probe returned EBADF")
};

// Thread-safe: the client service's workers register and deregister concurrently, each call
// without a lock shared with other clients' (a hardware registration pins pages for milliseconds).
class MemoryRegistrar {
 public:
  virtual ~MemoryRegistrar() = default;
  // Registers mapped host memory [addr, addr+length) on the NICs in nic_mask (0: all).
  virtual Result<MemoryRegion> register_host(void* addr, uint64_t length, uint32_t access,
                                             uint32_t nic_mask) = 0;
  // Registers [offset, offset+length) of a dma-buf (ibv_reg_dmabuf_mr). The fd may be closed after.
  virtual Result<MemoryRegion> register_dmabuf(int fd, uint64_t offset, uint64_t length, uint64_t iova,
                                               uint32_t access, uint32_t nic_mask) = 0;
  // Releases a region from register_host/register_dmabuf. Never fails from the caller's view.
  virtual void deregister(uint64_t mr_id) = 0;
  // Whether register_host() faults the pages in (hardware pins them). Then the service neither
  // maps them itself nor skips asking for their NUMA node (a syscall; soft NICs have none).
  virtual bool faults_in_pages() const { return true; }
  // Whether dma-buf memory is registered through a mapping of the dma-buf in the daemon
  // (register_host on the mapped pages) instead of register_dmabuf: user-space NICs (soft), which
  // reach memory only through the daemon's address space. Needs an exporter that allows mmap.
  virtual bool maps_dmabuf() const { return false; }
  // Memory regions the smallest NIC's table holds (0: unknown, no limit from it). Every user's
  // registrations, exports and flows share it, so one uid may fill only a share of it.
  virtual uint64_t mr_capacity() const { return 0; }
  // Whether NIC `nic_index` can register dma-buf memory.
  virtual DmabufSupport probe_dmabuf(uint32_t nic_index) = 0;
  virtual std::string backend_name() const = 0;
};

}  // namespace rdmad::clients
