#include "rdmad/daemon/clients/client_service.h"

#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "rdmad/daemon/clients/verbs_mapping.h"

namespace rdmad::daemon {

using clients::to_client_status;
using clients::to_verbs_access;

VerbsRegistrar::VerbsRegistrar(const NicSlots& nics, const verbs::BackendRegistry& backends)
    : nics_(nics), backends_(backends) {}

namespace {

verbs::Result<std::unique_ptr<verbs::ProtectionDomain>> alloc_pd(const Nic& nic) {
  auto pd = nic.device->alloc_pd();
  if (!pd.ok())
    return base::Status::error(
        fmt::format("nic {}: cannot allocate a protection domain: {}", nic.config.name, pd.status().message()));
  return pd;
}

}  // namespace

base::Status VerbsRegistrar::start() {
  std::lock_guard lock(mu_);
  for (const Nic& nic : nics_.nics()) {
    pds_.emplace_back();
    if (!nic.in_service()) continue;  // nic_opened() gives it one
    auto pd = alloc_pd(nic);
    if (!pd.ok()) return pd.status();
    pds_.back() = std::move(pd.value());
  }
  return base::Status::success();
}

base::Status VerbsRegistrar::nic_opened(size_t index) {
  auto pd = alloc_pd(nics_.nics().at(index));
  if (!pd.ok()) return pd.status();
  std::lock_guard lock(mu_);
  pds_.at(index) = std::move(pd.value());
  return base::Status::success();
}

template <class RegisterFn>
clients::Result<clients::MemoryRegion> VerbsRegistrar::register_on(uint32_t nic_mask, const char* what, RegisterFn&& fn) {
  std::vector<std::shared_ptr<verbs::ProtectionDomain>> pds;
  {
    std::lock_guard lock(mu_);
    pds = pds_;
  }
  // The registrations themselves without the lock: other clients' go on meanwhile.
  clients::MemoryRegion region;
  Registration made;
  for (uint32_t i = 0; i < pds.size(); ++i) {
    const bool asked = nic_mask != 0 && (nic_mask & (1u << i)) != 0;
    if (nic_mask != 0 && !asked) continue;
    if (!pds[i]) {
      // Every NIC in service when none is named; a NIC asked for by name must be there.
      if (!asked) continue;
      return clients::Error{RDMAD_ERR_NOT_FOUND, fmt::format("{}: nic {} is out of service: {}", what,
                                                         nics_.nics()[i].config.name,
                                                         nics_.nics()[i].out_of_service)};
    }
    auto mr = fn(*pds[i]);
    if (!mr.ok()) {
      // Nothing is left behind: the MRs already made on other NICs go with `made`.
      return clients::Error{to_client_status(mr.status().code()),
                        fmt::format("{} on nic {} ({}): {}", what, nics_.nics()[i].config.name,
                                    nics_.nics()[i].config.backend, mr.status().message())};
    }
    region.keys.push_back({i, mr.value()->lkey(), mr.value()->rkey()});
    made.mrs.push_back(std::move(mr.value()));
    made.pds.push_back(pds[i]);
  }
  if (made.mrs.empty()) return clients::Error{RDMAD_ERR_INVALID_ARGUMENT, "nic_mask selects no NIC of this node"};
  std::lock_guard lock(mu_);
  region.mr_id = next_id_++;
  regions_.emplace(region.mr_id, std::move(made));
  return region;
}

clients::Result<clients::MemoryRegion> VerbsRegistrar::register_host(void* addr, uint64_t length, uint32_t access,
                                                             uint32_t nic_mask) {
  return register_on(nic_mask, "register host memory", [&](verbs::ProtectionDomain& pd) {
    return pd.reg_mr(addr, length, to_verbs_access(access));
  });
}

clients::Result<clients::MemoryRegion> VerbsRegistrar::register_dmabuf(int fd, uint64_t offset, uint64_t length,
                                                               uint64_t iova, uint32_t access, uint32_t nic_mask) {
  return register_on(nic_mask, "register dma-buf", [&](verbs::ProtectionDomain& pd) {
    return pd.reg_dmabuf_mr(fd, offset, length, iova, to_verbs_access(access));
  });
}

void VerbsRegistrar::deregister(uint64_t mr_id) {
  Registration gone;
  {
    std::lock_guard lock(mu_);
    auto it = regions_.find(mr_id);
    if (it == regions_.end()) return;
    gone = std::move(it->second);
    regions_.erase(it);
  }
  // Deregistered (MRs first, then the domains' references) without the lock.
  gone.mrs.clear();
}

clients::DmabufSupport VerbsRegistrar::probe_dmabuf(uint32_t nic_index) {
  if (nic_index >= nics_.nics().size()) return {false, "no such NIC"};
  const Nic& nic = nics_.nics()[nic_index];
  const verbs::BackendInfo* b = backends_.find(nic.config.backend);
  if (b != nullptr && b->caps.dmabuf_mr) return {true, fmt::format("backend {} registers dma-buf", nic.config.backend)};
  // A user-space NIC reaches a dma-buf through the daemon's mapping of it, which is registered as
  // host memory on every NIC: possible only where no NIC needs the dma-buf itself.
  if (b != nullptr && !b->caps.registration_faults_in_pages)
    return {faults_in_pages() == false,
            faults_in_pages() ? "a soft NIC next to hardware NICs: dma-buf needs every NIC to register it"
                              : "the soft backend maps the dma-buf (an exporter that allows mmap; GPU memory "
                                "needs the rdma_core backend and GPUDirect)"};
  return {false, fmt::format("backend {} cannot register dma-buf on this device", nic.config.backend)};
}

std::string VerbsRegistrar::backend_name() const {
  std::set<std::string> names;
  for (const Nic& n : nics_.nics()) names.insert(n.config.backend);
  return names.empty() ? "none" : fmt::format("{}", fmt::join(names, ","));
}

uint64_t VerbsRegistrar::mr_capacity() const {
  uint64_t least = 0;
  for (const Nic& n : nics_.nics()) {
    const verbs::BackendInfo* b = backends_.find(n.config.backend);
    if (b == nullptr || b->caps.max_mr == 0) continue;
    least = least == 0 ? b->caps.max_mr : std::min<uint64_t>(least, b->caps.max_mr);
  }
  return least;
}

bool VerbsRegistrar::faults_in_pages() const {
  for (const Nic& n : nics_.nics()) {
    const verbs::BackendInfo* b = backends_.find(n.config.backend);
    if (b == nullptr || b->caps.registration_faults_in_pages) return true;
  }
  return false;
}

}  // namespace rdmad::daemon
