// Test doubles of the client service's transport interfaces. SoftRegistrar: host memory is already
// mapped by the service, so a registration records the range and hands out per-NIC lkey/rkey
// pairs; dma-buf is refused. StaticNicDirectory: a fixed list of NICs.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <span>
#include <utility>
#include <vector>

#include "rdmad/daemon/clients/memory_registrar.h"
#include "rdmad/daemon/nics/nic_directory.h"

namespace rdmad::clients {

class SoftRegistrar final : public MemoryRegistrar {
 public:
  explicit SoftRegistrar(uint32_t nic_count);

  Result<MemoryRegion> register_host(void* addr, uint64_t length, uint32_t access,
                                     uint32_t nic_mask) override;
  Result<MemoryRegion> register_dmabuf(int fd, uint64_t offset, uint64_t length, uint64_t iova,
                                       uint32_t access, uint32_t nic_mask) override;
  void deregister(uint64_t mr_id) override;
  DmabufSupport probe_dmabuf(uint32_t nic_index) override;
  std::string backend_name() const override { return "soft"; }
  bool faults_in_pages() const override { return false; }

  // Called with each host registration's length before it is made, on the calling thread and
  // without the double's lock (tests block or record registrations with it).
  void set_register_hook(std::function<void(uint64_t length)> hook) {
    std::lock_guard lock(mu_);
    hook_ = std::move(hook);
  }
  size_t live_regions() const {
    std::lock_guard lock(mu_);
    return regions_.size();
  }
  // The bytes a registration covers, as the backend would read them.
  std::span<const std::byte> region_for_test(uint64_t mr_id) const;

 private:
  struct Region {
    void* addr;
    uint64_t length;
  };
  uint32_t nic_count_;
  mutable std::mutex mu_;  // thread-safe, as the interface asks
  uint64_t next_id_ = 1;
  uint32_t next_key_ = 0x100;
  std::map<uint64_t, Region> regions_;
  std::function<void(uint64_t)> hook_;
};

class StaticNicDirectory final : public NicDirectory {
 public:
  explicit StaticNicDirectory(std::vector<NicDescriptor> nics) : nics_(std::move(nics)) {}
  std::vector<NicDescriptor> nics() const override { return nics_; }
  size_t count() const override { return nics_.size(); }

 private:
  std::vector<NicDescriptor> nics_;
};

}  // namespace rdmad::clients
