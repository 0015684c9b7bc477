// Pins and attachments: what the flows hold on a registration while a transfer uses it
// (RegionPins), and the reaping of released regions once their last pin goes.
#include "rdmad/daemon/clients/registration_service.h"

#include "rdmad/daemon/clients/nic_topology.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstddef>
#include <vector>

#include "log.h"
#include "rdmad/base/log_fields.h"
#include "rdmad/base/log_limiter.h"
#include "rdmad/daemon/clients/dmabuf.h"
#include "rdmad/daemon/clients/request_decoder.h"

namespace rdmad::clients {

Result<PinnedRange> RegistrationService::pin(uint64_t conn_id, uint64_t handle, uint64_t offset, uint64_t length,
                                             uint32_t need_access) {
  std::lock_guard lock(mu_);
  auto it = handles_.find(handle);
  if (it == handles_.end()) return Error{RDMAD_ERR_NOT_FOUND, "no registration with handle " + std::to_string(handle)};
  const Handle& h = it->second;
  if (h.conn_id != conn_id)
    return Error{RDMAD_ERR_PERMISSION, "registration " + std::to_string(handle) + " belongs to another connection"};
  if (offset > h.length || length > h.length - offset)
    return Error{RDMAD_ERR_INVALID_ARGUMENT, "range [" + std::to_string(offset) + ", +" + std::to_string(length) +
                                                 ") lies outside registration " + std::to_string(handle) + " of " +
                                                 std::to_string(h.length) + " bytes"};
  if ((h.access & need_access) != need_access)
    return Error{RDMAD_ERR_PERMISSION, "registration " + std::to_string(handle) + " lacks the access this needs"};
  Region* r = h.region;
  PinnedRange p;
  p.addr = r->map_base != nullptr ? reinterpret_cast<void*>(static_cast<uintptr_t>(r->iova + offset)) : nullptr;
  p.iova = r->iova + offset;
  p.length = length;
  p.access = h.access;
  p.kind = r->kind;
  p.nic_count = static_cast<uint32_t>(std::min<size_t>(r->keys.size(), p.keys.size()));
  for (uint32_t i = 0; i < p.nic_count; ++i) p.keys[i] = r->keys[i];
  p.dmabuf_fd = r->dmabuf_fd;
  p.dmabuf_offset = r->file_offset + offset;
  {
    std::lock_guard pins(pins_mu_);
    ++r->pins;
  }
  p.pin = r;
  p.numa_node = r->numa_node;
  for (size_t i = 0; i < r->locality.size() && i < p.locality.size(); ++i) p.locality[i] = r->locality[i];
  return p;
}

void RegistrationService::unpin(const void* pin) {
  if (pin == nullptr) return;
  bool reap_now = false;
  {
    std::lock_guard lock(pins_mu_);
    auto* r = static_cast<Region*>(const_cast<void*>(pin));
    reap_now = --r->pins == 0 && r->released;
  }
  if (reap_now && reaper_) reaper_();
}

void RegistrationService::reap() {
  Released done;
  {
    std::lock_guard lock(pins_mu_);
    for (auto it = zombies_.begin(); it != zombies_.end();) {
      if ((*it)->pins == 0) {
        done.push_back(std::move(*it));
        it = zombies_.erase(it);
      } else {
        ++it;
      }
    }
  }
  release_regions(done);
}

Result<RegionAttachment*> RegistrationService::attachment(const void* pin, uint64_t domain,
                                                           const MakeAttachment& make) {
  auto* r = static_cast<Region*>(const_cast<void*>(pin));
  RegionView view;
  {
    std::lock_guard lock(pins_mu_);
    for (auto& [d, a] : r->attachments)
      if (d == domain) return a.get();
    // The rest of the region is fixed from its registration on; the pin keeps it.
    view.kind = r->kind;
    view.addr = r->map_base != nullptr ? reinterpret_cast<void*>(static_cast<uintptr_t>(r->iova)) : nullptr;
    view.iova = r->iova;
    view.length = r->length;
    view.dmabuf_fd = r->dmabuf_fd;
    view.dmabuf_offset = r->file_offset;
    view.access = r->access;
    for (const NicKeys& k : r->keys) view.nics.push_back(k.nic_index);
  }
  // Registering takes a while on hardware (pages are pinned): not under the table lock. The pin
  // keeps the region, and the caller is the only one making attachments for this domain.
  auto made = make(view);
  if (!made.ok()) return made.error();
  std::lock_guard lock(pins_mu_);
  r->attachments.emplace_back(domain, std::move(made.value()));
  return r->attachments.back().second.get();
}

void RegistrationService::drop_domain(uint64_t domain) {
  std::vector<std::unique_ptr<RegionAttachment>> gone;
  {
    std::lock_guard lock(mu_);
    std::lock_guard pins(pins_mu_);
    auto take = [&](Region& r) {
      for (auto it = r.attachments.begin(); it != r.attachments.end();) {
        if (it->first == domain) {
          gone.push_back(std::move(it->second));
          it = r.attachments.erase(it);
        } else {
          ++it;
        }
      }
    };
    for (auto& [key, r] : regions_) take(*r);
    for (auto& r : zombies_) take(*r);
  }
  gone.clear();  // deregistered without the table lock
}

size_t RegistrationService::attachment_count_for_test(uint64_t domain) const {
  std::lock_guard lock(mu_);
  std::lock_guard pins(pins_mu_);
  size_t n = 0;
  auto count = [&](const Region& r) {
    for (const auto& [d, a] : r.attachments) n += d == domain;
  };
  for (const auto& [key, r] : regions_) count(*r);
  for (const auto& r : zombies_) count(*r);
  return n;
}

}  // namespace rdmad::clients
