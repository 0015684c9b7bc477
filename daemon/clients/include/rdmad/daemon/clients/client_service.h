#pragma once
// Connects the Unix-socket client service (daemon/ipc) to the node's NICs: memory registrations
// go through the transport interface on every NIC the client asks for, and the NIC list comes from
// the NicInventory (with PCI address and NUMA node from HardwareNics for hardware ports).
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "rdmad/daemon/nics/hardware_nics.h"
#include "rdmad/daemon/nics/nic_inventory.h"
#include "rdmad/daemon/clients/memory_registrar.h"
#include "rdmad/verbs/registry.h"

namespace rdmad::daemon {

// ipc::MemoryRegistrar over verbs devices: one protection domain per NIC for client registrations
// (no QP lives in it: flows use a domain per peer, daemon/flow), one verbs MR per NIC per
// registration. Called by one thread at a time (the client service serialises its calls), from the
// control thread or a client-service worker.
class VerbsRegistrar final : public ipc::MemoryRegistrar {
 public:
  VerbsRegistrar(const NicInventory& nics, const verbs::BackendRegistry& backends);
  // Allocates the protection domains of the NICs in service; false (and `error`) when a NIC refuses.
  bool start(std::string& error);
  // A NIC came into service (NicInventory::retry): its protection domain. Control thread.
  bool nic_opened(size_t index, std::string& error);

  ipc::Result<ipc::MemoryRegion> register_host(void* addr, uint64_t length, uint32_t access,
                                               uint32_t nic_mask) override;
  ipc::Result<ipc::MemoryRegion> register_dmabuf(int fd, uint64_t offset, uint64_t length, uint64_t iova,
                                                 uint32_t access, uint32_t nic_mask) override;
  void deregister(uint64_t mr_id) override;
  ipc::DmabufSupport probe_dmabuf(uint32_t nic_index) override;
  std::string backend_name() const override;
  // False when no NIC's registration faults pages in (user-space NICs such as soft pin nothing).
  bool faults_in_pages() const override;
  uint64_t mr_capacity() const override;
  // Every NIC is a user-space one: dma-buf memory is mapped and registered as host memory.
  bool maps_dmabuf() const override { return !faults_in_pages(); }

 private:
  template <class RegisterFn>
  ipc::Result<ipc::MemoryRegion> register_on(uint32_t nic_mask, const char* what, RegisterFn&& fn);

  const NicInventory& nics_;
  const verbs::BackendRegistry& backends_;
  std::mutex mu_;  // pds_ and regions_: the NICs that come into service are added from the control thread
  std::vector<std::unique_ptr<verbs::ProtectionDomain>> pds_;  // index = NIC index; null: out of service
  std::map<uint64_t, std::vector<std::unique_ptr<verbs::MemoryRegion>>> regions_;
  uint64_t next_id_ = 1;
};

// ipc::NicInventory listing the daemon's NICs in [[nic]] order (the protocol's NIC index).
class ClientNicList final : public ipc::NicInventory {
 public:
  // (Inside this class `NicInventory` names the ipc base; the daemon's is spelled out.)
  ClientNicList(const daemon::NicInventory& inventory, const HardwareNics& hardware)
      : inventory_(inventory), hardware_(hardware) {}
  std::vector<ipc::NicDescriptor> nics() const override;
  size_t count() const override { return inventory_.nics().size(); }

 private:
  const daemon::NicInventory& inventory_;
  const HardwareNics& hardware_;
};

}  // namespace rdmad::daemon
