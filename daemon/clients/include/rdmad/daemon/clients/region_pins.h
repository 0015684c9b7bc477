#pragma once
// What the flows need from the client service's registrations, and nothing more: pin a client's
// range while a transfer uses it, keep per-peer-domain attachments (MRs) with a registration,
// reap released regions on the control thread, and read a uid's quota. RegistrationService is the
// implementation; the flow engine and service see only this.
#include <sys/types.h>

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "rdmad/daemon/clients/ipc_config.h"
#include "rdmad/daemon/clients/memory_registrar.h"
#include "rdmad/daemon/clients/result.h"
#include "rdmad/daemon/clients/tenant.h"
#include "rdmad/protocol.h"

namespace rdmad::clients {

// What a registration is, for whoever registers it again in another protection domain (the
// flows' per-peer domains): host memory by the daemon's mapping, device memory by the dma-buf.
struct RegionView {
  rdmad_mem_kind kind = RDMAD_MEM_HOST;
  void* addr = nullptr;      // the daemon's mapping of the first registered byte (host memory, or a
                             // dma-buf the daemon maps for user-space NICs), else nullptr
  uint64_t iova = 0;         // the address the registration's keys answer to for that byte
  uint64_t length = 0;
  int dmabuf_fd = -1;        // device memory: the dma-buf (the region keeps it open)
  uint64_t dmabuf_offset = 0;  // device memory: offset of the first byte in the dma-buf
  uint32_t access = 0;       // RDMAD_ACCESS_* the client asked for (what exports may grant)
  std::vector<uint32_t> nics;  // NIC indexes the registration is on
};

// Something a user of the table keeps with a registration (the flows' MRs of it in a peer's
// protection domain). It is destroyed with the region, before the memory is unmapped, or when
// its domain goes (drop_domain).
class RegionAttachment {
 public:
  virtual ~RegionAttachment() = default;
};

// A registered range resolved for the flow engine, kept mapped and registered until unpin().
struct PinnedRange {
  void* addr = nullptr;  // the daemon's address of the first byte when it maps the memory, else nullptr
  uint64_t iova = 0;     // the address the NIC keys answer to for the first byte
  uint64_t length = 0;
  uint32_t access = 0;   // RDMAD_ACCESS_* of the registration
  rdmad_mem_kind kind = RDMAD_MEM_HOST;
  uint32_t nic_count = 0;
  std::array<NicKeys, proto::kMaxNics> keys{};
  int dmabuf_fd = -1;         // device memory: the dma-buf, valid while pinned
  uint64_t dmabuf_offset = 0;  // device memory: offset of the first byte in the dma-buf
  const void* pin = nullptr;  // for unpin()
  int32_t numa_node = -1;     // host memory: the node of its first page when the kernel tells
  std::array<uint8_t, proto::kMaxNics> locality{};  // clients::Locality of the memory to each NIC
};

class RegionPins {
 public:
  virtual ~RegionPins() = default;

  // Thread-safe (called from the flow engine's thread): resolves [offset, offset+length) of a
  // handle owned by connection conn_id whose access includes `need_access`, and keeps its memory
  // mapped and registered until unpin() even if the client deregisters or disconnects meanwhile.
  virtual Result<PinnedRange> pin(uint64_t conn_id, uint64_t handle, uint64_t offset, uint64_t length,
                                  uint32_t need_access) = 0;
  virtual void unpin(const void* pin) = 0;
  // The attachment for `domain` (a nonzero id the caller chose) of the pinned region, made by
  // `make` the first time (without the table lock). Calls for one domain come from one thread at
  // a time.
  using MakeAttachment = std::function<Result<std::unique_ptr<RegionAttachment>>(const RegionView& region)>;
  virtual Result<RegionAttachment*> attachment(const void* pin, uint64_t domain, const MakeAttachment& make) = 0;
  // Destroys every region's attachment for `domain` (its protection domains are about to go).
  virtual void drop_domain(uint64_t domain) = 0;
  // Called (from any thread) when a released region's last pin goes: the owner then calls reap()
  // on the control thread.
  virtual void set_reaper(std::function<void()> reaper) = 0;
  // Releases released regions whose pins are all gone (control thread).
  virtual void reap() = 0;
  virtual const Quota& quota_for(const Tenant& tenant) const = 0;
};

}  // namespace rdmad::clients
