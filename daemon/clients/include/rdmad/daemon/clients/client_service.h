#pragma once
// Connects the Unix-socket client service to the node's NICs: memory registrations go through the
// transport interface on every NIC slot the client asks for. (The NIC list is NodeNics, an
// clients::NicDirectory.)
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "rdmad/base/status.h"
#include "rdmad/daemon/clients/memory_registrar.h"
#include "rdmad/daemon/nics/nic_slots.h"
#include "rdmad/verbs/registry.h"

namespace rdmad::daemon {

// clients::MemoryRegistrar over verbs devices: one protection domain per NIC for client registrations
// (no QP lives in it: flows use a domain per peer, daemon/flow), one verbs MR per NIC per
// registration. Thread-safe: the client-service workers and the control thread call it at once; a
// registration runs without the lock (which guards only the tables), so one client's slow
// registration does not hold up another's.
class VerbsRegistrar final : public clients::MemoryRegistrar {
 public:
  VerbsRegistrar(const NicSlots& nics, const verbs::BackendRegistry& backends);
  // Allocates the protection domains of the NICs in service; an error names the NIC that refused.
  base::Status start();
  // A NIC came into service (NicSlots::retry): its protection domain. Control thread.
  base::Status nic_opened(size_t index);

  clients::Result<clients::MemoryRegion> register_host(void* addr, uint64_t length, uint32_t access,
                                               uint32_t nic_mask) override;
  clients::Result<clients::MemoryRegion> register_dmabuf(int fd, uint64_t offset, uint64_t length, uint64_t iova,
                                                 uint32_t access, uint32_t nic_mask) override;
  void deregister(uint64_t mr_id) override;
  clients::DmabufSupport probe_dmabuf(uint32_t nic_index) override;
  std::string backend_name() const override;
  // False when no NIC's registration faults pages in (user-space NICs such as soft pin nothing).
  bool faults_in_pages() const override;
  uint64_t mr_capacity() const override;
  // Every NIC is a user-space one: dma-buf memory is mapped and registered as host memory.
  bool maps_dmabuf() const override { return !faults_in_pages(); }

 private:
  template <class RegisterFn>
  clients::Result<clients::MemoryRegion> register_on(uint32_t nic_mask, const char* what, RegisterFn&& fn);

  const NicSlots& nics_;
  const verbs::BackendRegistry& backends_;
  // One registration's MRs, and the domains they were made in (which outlive them: declared first).
  struct Registration {
    std::vector<std::shared_ptr<verbs::ProtectionDomain>> pds;
    std::vector<std::unique_ptr<verbs::MemoryRegion>> mrs;
  };
  std::mutex mu_;  // pds_, regions_, next_id_ (the NICs that come into service are added from the control thread)
  std::vector<std::shared_ptr<verbs::ProtectionDomain>> pds_;  // index = NIC index; null: out of service
  std::map<uint64_t, Registration> regions_;
  uint64_t next_id_ = 1;
};

}  // namespace rdmad::daemon
