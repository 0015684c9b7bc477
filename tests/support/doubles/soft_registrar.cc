#include "support/doubles/soft_registrar.h"

namespace rdmad::clients {

SoftRegistrar::SoftRegistrar(uint32_t nic_count) : nic_count_(nic_count) {}

Result<MemoryRegion> SoftRegistrar::register_host(void* addr, uint64_t length, uint32_t /*access*/,
                                                  uint32_t nic_mask) {
  std::function<void(uint64_t)> hook;
  {
    std::lock_guard lock(mu_);
    hook = hook_;
  }
  if (hook) hook(length);
  std::lock_guard lock(mu_);
  MemoryRegion region{next_id_++, {}};
  for (uint32_t i = 0; i < nic_count_; ++i) {
    if (nic_mask != 0 && (nic_mask & (1u << i)) == 0) continue;
    // Keys only need to be unique per NIC; distinct lkey/rkey catch callers that mix them up.
    uint32_t key = next_key_;
    next_key_ += 2;
    region.keys.push_back({i, key, key + 1});
  }
  if (region.keys.empty())
    return Error{RDMAD_ERR_INVALID_ARGUMENT, "nic_mask selects no NIC of backend soft"};
  regions_.emplace(region.mr_id, Region{addr, length});
  return region;
}

Result<MemoryRegion> SoftRegistrar::register_dmabuf(int /*fd*/, uint64_t /*offset*/, uint64_t /*length*/,
                                                    uint64_t /*iova*/, uint32_t /*access*/,
                                                    uint32_t /*nic_mask*/) {
  return Error{RDMAD_ERR_NOT_SUPPORTED, "not supported by backend soft: " + probe_dmabuf(0).reason};
}

void SoftRegistrar::deregister(uint64_t mr_id) {
  std::lock_guard lock(mu_);
  regions_.erase(mr_id);
}

DmabufSupport SoftRegistrar::probe_dmabuf(uint32_t /*nic_index*/) {
  return {false, "a user-space NIC cannot reach device memory; dma-buf needs the rdma_core backend"};
}

std::span<const std::byte> SoftRegistrar::region_for_test(uint64_t mr_id) const {
  std::lock_guard lock(mu_);
  auto it = regions_.find(mr_id);
  if (it == regions_.end()) return {};
  return {static_cast<const std::byte*>(it->second.addr), it->second.length};
}

}  // namespace rdmad::clients
