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

namespace rdmad::ipc {
namespace {

uint64_t page_bytes() {
  static const uint64_t page = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
  return page;
}

// A NIC whose table is full refuses every user's registrations: said, but not once per request.
base::LogLimiter g_table_log;

std::string range_text(uint64_t offset, uint64_t length) {
  return "[" + std::to_string(offset) + ", " + std::to_string(offset + length) + ")";
}

// The request checks a direct caller could skip (the decoder already applied them to frames).
Result<Ok> validate_request(uint64_t offset, uint64_t length, uint64_t iova, uint32_t access,
                            uint32_t nic_mask, size_t nic_count) {
  if (length == 0) return Error{RDMAD_ERR_INVALID_ARGUMENT, "zero length"};
  if (offset + length < offset || iova + length < iova)
    return Error{RDMAD_ERR_INVALID_ARGUMENT, "offset + length overflows"};
  if (!valid_access(access))
    return Error{RDMAD_ERR_INVALID_ARGUMENT,
                 "invalid access flags (unknown bits, or remote write/atomic "
                 "without local write)"};
  uint64_t all_nics = nic_count >= 32 ? ~uint32_t{0} : (uint32_t{1} << nic_count) - 1;
  if (nic_count == 0) return Error{RDMAD_ERR_NOT_SUPPORTED, "the node has no NIC to register on"};
  if ((nic_mask & ~all_nics) != 0)
    return Error{RDMAD_ERR_INVALID_ARGUMENT,
                 "nic_mask selects NICs that do not exist (the node has " + std::to_string(nic_count) + ")"};
  return Ok{};
}

}  // namespace

RegistrationService::RegistrationService(const IpcConfig& config, MemoryRegistrar& registrar,
                                         const NicInventory& inventory, IpcMetrics* metrics)
    : config_(config),
      registrar_(registrar),
      inventory_(inventory),
      metrics_(metrics),
      locality_nics_(inventory.nics()),
      table_share_(registrar.mr_capacity() * config.nic_table_share_percent / 100) {}

RegistrationService::~RegistrationService() {
  Released released;
  while (!handles_.empty()) drop_handle(handles_.begin(), released);
  // The flow engine has stopped by now: nothing uses these any more.
  for (auto& z : zombies_) released.push_back(std::move(z));
  release_regions(released);
}

const Quota& RegistrationService::quota_for(uid_t uid) const {
  auto it = config_.quotas.find(uid);
  return it != config_.quotas.end() ? it->second : config_.default_quota;
}

Usage RegistrationService::usage(uid_t uid) const {
  std::lock_guard lock(mu_);
  auto it = usage_.find(uid);
  return it != usage_.end() ? it->second : Usage{};
}

Result<Registered> RegistrationService::register_host(const Peer& peer, int fd,
                                                      const proto::RegisterHostRequest& req) {
  return register_common(peer, fd,
                         Request{RDMAD_MEM_HOST, req.offset, req.length, 0, req.access, req.nic_mask, {}});
}

Result<Registered> RegistrationService::register_dmabuf(const Peer& peer, int fd,
                                                        const proto::RegisterDmabufRequest& req) {
  return register_common(peer, fd,
                         Request{RDMAD_MEM_GPU, req.offset, req.length, req.iova, req.access, req.nic_mask,
                                 req.gpu_pci_address});
}

Result<Registered> RegistrationService::register_common(const Peer& peer, int fd, const Request& req) {
  auto start = std::chrono::steady_clock::now();
  auto valid =
      validate_request(req.offset, req.length, req.iova, req.access, req.nic_mask, inventory_.count());
  if (!valid.ok()) return valid.error();
  struct stat st {};
  if (fstat(fd, &st) != 0) return sys_error("fstat", errno);
  if (req.kind == RDMAD_MEM_HOST) {
    if (!S_ISREG(st.st_mode))
      return Error{RDMAD_ERR_INVALID_ARGUMENT, "fd is not a memfd (not a regular file)"};
    // The daemon and the NIC keep using the pages after the call: a client that could shrink the
    // file would turn our accesses into SIGBUS, so the memfd must be sealed against shrinking.
    int seals = fcntl(fd, F_GET_SEALS);
    if (seals < 0) return Error{RDMAD_ERR_INVALID_ARGUMENT, "fd is not a memfd (F_GET_SEALS failed)"};
    if ((seals & F_SEAL_SHRINK) == 0)
      return Error{RDMAD_ERR_INVALID_ARGUMENT,
                   "memfd is not sealed with F_SEAL_SHRINK (rdmad_alloc_host does it)"};
    if (req.offset + req.length > static_cast<uint64_t>(st.st_size))
      return Error{RDMAD_ERR_INVALID_ARGUMENT, "range " + range_text(req.offset, req.length) +
                                                   " extends beyond the file (size " +
                                                   std::to_string(st.st_size) + ")"};
  } else {
    auto dmabuf = check_dmabuf_fd(fd);
    if (!dmabuf.ok()) return dmabuf.error();
  }
  RegionKey key{peer.uid,   req.kind,   st.st_dev,    st.st_ino, req.offset,
                req.length, req.access, req.nic_mask, req.iova};
  const Quota& quota = quota_for(peer.uid);
  const uint64_t aligned = req.offset & ~(page_bytes() - 1);
  const uint64_t pinned = ((req.offset + req.length + page_bytes() - 1) & ~(page_bytes() - 1)) - aligned;
  std::unique_lock lock(mu_);
  Usage& use = usage_[peer.uid];
  if (use.registrations + 1 > quota.max_registrations)
    return Error{RDMAD_ERR_QUOTA, "registration-count quota of uid " + std::to_string(peer.uid) +
                                      " exceeded (" + std::to_string(quota.max_registrations) + " handles)"};
  if (table_share_ != 0 && use.registrations + 1 > table_share_)
    return Error{RDMAD_ERR_QUOTA, "uid " + std::to_string(peer.uid) + " holds " + std::to_string(table_share_) +
                                      " registrations, its share (nic_table_share_percent) of the NICs' " +
                                      "memory-region tables"};
  Registered out;
  if (auto it = regions_.find(key); it != regions_.end()) {
    out = add_handle(peer, it->second.get(), req, true);
  } else {
    if (use.pinned_bytes + pinned > quota.max_pinned_bytes)
      return Error{RDMAD_ERR_QUOTA, "pinned-bytes quota of uid " + std::to_string(peer.uid) + " exceeded (" +
                                        std::to_string(use.pinned_bytes) + " in use + " + std::to_string(pinned) +
                                        " requested > " + std::to_string(quota.max_pinned_bytes) + ")"};
    // Mapping and registering (a hardware registration pins pages, milliseconds per GiB) run
    // without the table lock, so other connections' requests go on meanwhile; the handle and the
    // pinned bytes are reserved first, so the quotas stay exact when clients race.
    ++use.registrations;
    use.pinned_bytes += pinned;
    lock.unlock();
    auto made = make_region(fd, req, key, aligned, pinned);
    if (!made.ok() && made.error().status == RDMAD_ERR_NO_RESOURCE)
      base::log_limited(*ipc_log(), g_table_log, spdlog::level::warn, "registration refused uid={} error={}",
                        peer.uid, base::q(made.error().message));
    lock.lock();
    Usage& again = usage_[peer.uid];
    --again.registrations;
    again.pinned_bytes -= pinned;
    if (!made.ok()) {
      if (again.registrations == 0 && again.pinned_bytes == 0) usage_.erase(peer.uid);
      return made.error();
    }
    Released duplicate;
    if (auto raced = regions_.find(key); raced != regions_.end()) {
      // Another connection of this uid registered the same range meanwhile: share its region.
      out = add_handle(peer, raced->second.get(), req, true);
      duplicate.push_back(std::move(made.value()));
    } else {
      Region* region = made.value().get();
      again.pinned_bytes += region->pinned_bytes;
      if (metrics_ != nullptr) metrics_->region_added(region->kind, region->pinned_bytes);
      regions_.emplace(key, std::move(made.value()));
      out = add_handle(peer, region, req, false);
    }
    lock.unlock();
    release_regions(duplicate);
  }
  if (lock.owns_lock()) lock.unlock();
  if (metrics_ != nullptr)
    metrics_->observe_registration_seconds(
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  return out;
}

namespace {

// Maps the pages of [base, base+bytes) that the file already holds (mincore), so a backend that
// moves data through this mapping (soft NICs) takes no page faults for them on its datapath
// thread: the first transfer of a fresh 1 GiB buffer took ~262k minor faults there, stalling every
// flow on that NIC. Holes stay unmapped: populating them would allocate the client's memory and
// charge it to the daemon's memory cgroup. Best effort: without MADV_POPULATE_* (Linux < 5.14)
// the pages are faulted in on first use as before.
//
// Only for ranges of kMapResidentMinBytes and more: a mapped page also makes munmap at
// deregistration flush other CPUs' TLBs, and for a 4 KiB range that doubled the service's CPU per
// register + deregister pair (22 -> 50 µs, BENCHMARKS.md) to save the datapath one fault.
constexpr uint64_t kMapResidentMinBytes = 1 << 20;

void map_resident_pages(void* base, uint64_t bytes, bool writable) {
  const auto page = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
  const uint64_t pages = (bytes + page - 1) / page;
  std::vector<unsigned char> resident(pages);
  if (mincore(base, bytes, resident.data()) != 0) return;
  const int advice = writable ? MADV_POPULATE_WRITE : MADV_POPULATE_READ;
  auto* p = static_cast<std::byte*>(base);
  for (uint64_t i = 0; i < pages;) {
    if ((resident[i] & 1) == 0) {
      ++i;
      continue;
    }
    uint64_t j = i;
    while (j < pages && (resident[j] & 1) != 0) ++j;
    if (madvise(p + i * page, (j - i) * page, advice) != 0 && errno == EINVAL) return;  // not supported
    i = j;
  }
}

// A client registration carries local access only: what a peer may reach is decided per export
// and per posted receive, by MRs over exactly that range in that peer's own protection domain
// (daemon/flow). An rkey of a registration is refused by every NIC, whoever learns it.
uint32_t local_access_for(uint32_t access) {
  constexpr uint32_t kWrites = RDMAD_ACCESS_LOCAL_WRITE | RDMAD_ACCESS_REMOTE_WRITE | RDMAD_ACCESS_REMOTE_ATOMIC;
  return (access & kWrites) != 0 ? RDMAD_ACCESS_LOCAL_WRITE : 0;
}

}  // namespace

Result<std::unique_ptr<RegistrationService::Region>> RegistrationService::make_region(int fd, const Request& req,
                                                                                      RegionKey key,
                                                                                      uint64_t aligned,
                                                                                      uint64_t pinned) {
  auto region = std::make_unique<Region>();
  region->key = key;
  region->kind = req.kind;
  region->pinned_bytes = pinned;
  region->length = req.length;
  region->file_offset = req.offset;
  region->access = req.access;
  const uint32_t mr_access = local_access_for(req.access);
  Result<MemoryRegion> mr = Error{};
  if (req.kind == RDMAD_MEM_HOST) {
    int prot = PROT_READ;
    if ((req.access & (RDMAD_ACCESS_LOCAL_WRITE | RDMAD_ACCESS_REMOTE_WRITE | RDMAD_ACCESS_REMOTE_ATOMIC)) !=
        0)
      prot |= PROT_WRITE;
    void* base = mmap(nullptr, pinned, prot, MAP_SHARED, fd, static_cast<off_t>(aligned));
    if (base == MAP_FAILED) return sys_error("mmap of the memfd range", errno);
    if (!registrar_.faults_in_pages() && pinned >= kMapResidentMinBytes)
      map_resident_pages(base, pinned, (prot & PROT_WRITE) != 0);
    region->map_base = base;
    region->map_bytes = pinned;
    auto* addr = static_cast<std::byte*>(base) + (req.offset - aligned);
    region->iova = reinterpret_cast<uintptr_t>(addr);
    std::lock_guard registrar_lock(registrar_mu_);
    mr = registrar_.register_host(addr, req.length, mr_access, req.nic_mask);
  } else {
    region->iova = req.iova;
    if (registrar_.maps_dmabuf()) {
      // A user-space NIC reaches memory only through our address space: map the dma-buf and
      // register the mapping, which its keys then answer to (the exporter must allow mmap).
      const int prot = (mr_access & RDMAD_ACCESS_LOCAL_WRITE) != 0 ? PROT_READ | PROT_WRITE : PROT_READ;
      void* base = mmap(nullptr, pinned, prot, MAP_SHARED, fd, static_cast<off_t>(aligned));
      if (base == MAP_FAILED)
        return Error{RDMAD_ERR_NOT_SUPPORTED, std::string("the dma-buf cannot be mapped (") + std::strerror(errno) +
                                                  "): a soft NIC reaches device memory only through a mapping, "
                                                  "which its exporter does not allow; use the rdma_core backend"};
      region->map_base = base;
      region->map_bytes = pinned;
      auto* addr = static_cast<std::byte*>(base) + (req.offset - aligned);
      region->iova = reinterpret_cast<uintptr_t>(addr);
    }
    // Kept so that exports and flows can register exactly their range again in a peer's domain.
    if (fds_ != nullptr && !fds_->take(1))
      return Error{RDMAD_ERR_NO_RESOURCE, "the daemon is out of file descriptors for GPU registrations"};
    region->dmabuf_fd = fcntl(fd, F_DUPFD_CLOEXEC, 0);
    if (region->dmabuf_fd < 0) {
      if (fds_ != nullptr) fds_->give(1);
      return sys_error("dup of the dma-buf fd", errno);
    }
    std::lock_guard registrar_lock(registrar_mu_);
    mr = region->map_base != nullptr
             ? registrar_.register_host(reinterpret_cast<void*>(static_cast<uintptr_t>(region->iova)), req.length,
                                        mr_access, req.nic_mask)
             : registrar_.register_dmabuf(fd, req.offset, req.length, req.iova, mr_access, req.nic_mask);
  }
  if (!mr.ok()) {
    if (region->map_base != nullptr) munmap(region->map_base, region->map_bytes);
    if (region->dmabuf_fd >= 0) {
      ::close(region->dmabuf_fd);
      if (fds_ != nullptr) fds_->give(1);
    }
    return mr.error();
  }
  region->mr_id = mr.value().mr_id;
  // After registering: a hardware registration has faulted the pages in.
  if (region->map_base != nullptr && registrar_.faults_in_pages())
    region->numa_node = page_numa_node(reinterpret_cast<void*>(region->iova));
  for (Locality l : nic_localities(locality_nics_, req.kind, region->numa_node, req.gpu_pci_address,
                                   config_.diagnose_root))
    region->locality.push_back(static_cast<uint8_t>(l));
  region->keys = std::move(mr.value().keys);
  return region;
}

Registered RegistrationService::add_handle(const Peer& peer, Region* region, const Request& req,
                                           bool shared) {
  uint64_t handle = next_handle_++;
  ++region->refs;
  ++usage_[peer.uid].registrations;
  handles_.emplace(handle,
                   Handle{peer.conn_id, peer.uid, peer.pid, region, req.offset, req.length, req.access});
  by_conn_[peer.conn_id].insert(handle);
  update_quota_ratio();
  return Registered{handle, region->iova, req.length, shared, region->keys};
}

void RegistrationService::update_quota_ratio() {
  if (metrics_ == nullptr) return;
  double worst = 0;
  for (const auto& [uid, use] : usage_) {
    const Quota& q = quota_for(uid);
    if (q.max_pinned_bytes > 0)
      worst = std::max(worst, static_cast<double>(use.pinned_bytes) / static_cast<double>(q.max_pinned_bytes));
    if (q.max_registrations > 0)
      worst = std::max(worst, static_cast<double>(use.registrations) / static_cast<double>(q.max_registrations));
  }
  metrics_->set_quota_usage_max_ratio(worst);
}

Result<Ok> RegistrationService::deregister(const Peer& peer, uint64_t handle) {
  Released released;
  {
    std::lock_guard lock(mu_);
    auto it = handles_.find(handle);
    if (it == handles_.end())
      return Error{RDMAD_ERR_NOT_FOUND, "no registration with handle " + std::to_string(handle)};
    if (it->second.conn_id != peer.conn_id)
      return Error{RDMAD_ERR_PERMISSION,
                   "handle " + std::to_string(handle) + " belongs to another connection"};
    drop_handle(it, released);
  }
  release_regions(released);
  return Ok{};
}

void RegistrationService::drop_handle(std::unordered_map<uint64_t, Handle>::iterator it, Released& released) {
  uint64_t handle = it->first;
  Handle h = it->second;
  handles_.erase(it);
  if (auto c = by_conn_.find(h.conn_id); c != by_conn_.end()) {
    c->second.erase(handle);
    if (c->second.empty()) by_conn_.erase(c);
  }
  Usage& use = usage_[h.uid];
  --use.registrations;
  Region* region = h.region;
  if (--region->refs == 0) {
    use.pinned_bytes -= region->pinned_bytes;
    if (metrics_ != nullptr) metrics_->region_removed(region->kind, region->pinned_bytes);
    auto node = regions_.extract(region->key);
    if (region->pins > 0) {
      // The flow engine still moves bytes in or out of it: released when the last pin goes.
      region->released = true;
      zombies_.push_back(std::move(node.mapped()));
    } else {
      released.push_back(std::move(node.mapped()));
    }
  }
  if (use.registrations == 0 && use.pinned_bytes == 0) usage_.erase(h.uid);
  update_quota_ratio();
}

bool RegistrationService::holds_registrations(uint64_t conn_id) const {
  std::lock_guard lock(mu_);
  return by_conn_.count(conn_id) != 0;
}

void RegistrationService::release_connection(uint64_t conn_id) {
  Released released;
  {
    std::lock_guard lock(mu_);
    auto c = by_conn_.find(conn_id);
    if (c == by_conn_.end()) return;
    std::set<uint64_t> handles = std::move(c->second);
    by_conn_.erase(c);
    for (uint64_t handle : handles) {
      auto it = handles_.find(handle);
      if (it != handles_.end()) drop_handle(it, released);
    }
  }
  release_regions(released);
}

std::vector<proto::ListEntry> RegistrationService::list(uint64_t conn_id, uint64_t after,
                                                        uint32_t max_entries, bool* more) const {
  std::vector<proto::ListEntry> out;
  *more = false;
  std::lock_guard lock(mu_);
  auto c = by_conn_.find(conn_id);
  if (c == by_conn_.end()) return out;
  for (auto it = c->second.upper_bound(after); it != c->second.end(); ++it) {
    if (out.size() == max_entries) {
      *more = true;
      break;
    }
    const Handle& h = handles_.at(*it);
    out.push_back({*it, h.offset, h.length, static_cast<uint32_t>(h.region->kind), h.access});
  }
  return out;
}

int32_t page_numa_node(const void* addr) {
  void* page = const_cast<void*>(addr);
  int status = -1;
  // move_pages without target nodes only reports where each page is.
  if (syscall(SYS_move_pages, 0, 1UL, &page, nullptr, &status, 0) != 0 || status < 0) return -1;
  return status;
}

std::vector<proto::RegistrationEntry> RegistrationService::list_all(uint64_t after, uint32_t max_entries,
                                                                    bool* more) const {
  // An admin request, not a hot path: one pass over the table, then the page in handle order.
  std::lock_guard lock(mu_);
  std::vector<uint64_t> ids;
  for (const auto& [id, h] : handles_)
    if (id > after) ids.push_back(id);
  std::sort(ids.begin(), ids.end());
  *more = ids.size() > max_entries;
  if (*more) ids.resize(max_entries);
  std::vector<proto::RegistrationEntry> out;
  for (uint64_t id : ids) {
    const Handle& h = handles_.at(id);
    out.push_back({id, h.offset, h.length, h.region->pinned_bytes, static_cast<uint32_t>(h.uid),
                   static_cast<int32_t>(h.pid), static_cast<uint32_t>(h.region->kind), h.access});
  }
  return out;
}

void RegistrationService::release_regions(Released& regions) {
  if (regions.empty()) return;
  for (const auto& r : regions) r->attachments.clear();  // their MRs go before the memory
  {
    std::lock_guard lock(registrar_mu_);
    for (const auto& r : regions) registrar_.deregister(r->mr_id);
  }
  for (const auto& r : regions) {
    if (r->map_base != nullptr) munmap(r->map_base, r->map_bytes);
    if (r->dmabuf_fd >= 0) {
      ::close(r->dmabuf_fd);
      if (fds_ != nullptr) fds_->give(1);
    }
  }
  regions.clear();
}

size_t RegistrationService::region_count() const {
  std::lock_guard lock(mu_);
  return regions_.size();
}

size_t RegistrationService::handle_count() const {
  std::lock_guard lock(mu_);
  return handles_.size();
}

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
  ++r->pins;
  p.pin = r;
  p.numa_node = r->numa_node;
  for (size_t i = 0; i < r->locality.size() && i < p.locality.size(); ++i) p.locality[i] = r->locality[i];
  return p;
}

void RegistrationService::unpin(const void* pin) {
  if (pin == nullptr) return;
  bool reap_now = false;
  {
    std::lock_guard lock(mu_);
    auto* r = static_cast<Region*>(const_cast<void*>(pin));
    reap_now = --r->pins == 0 && r->released;
  }
  if (reap_now && reaper_) reaper_();
}

void RegistrationService::reap() {
  Released done;
  {
    std::lock_guard lock(mu_);
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
    std::lock_guard lock(mu_);
    for (auto& [d, a] : r->attachments)
      if (d == domain) return a.get();
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
  std::lock_guard lock(mu_);
  r->attachments.emplace_back(domain, std::move(made.value()));
  return r->attachments.back().second.get();
}

void RegistrationService::drop_domain(uint64_t domain) {
  std::vector<std::unique_ptr<RegionAttachment>> gone;
  {
    std::lock_guard lock(mu_);
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
  size_t n = 0;
  auto count = [&](const Region& r) {
    for (const auto& [d, a] : r.attachments) n += d == domain;
  };
  for (const auto& [key, r] : regions_) count(*r);
  for (const auto& r : zombies_) count(*r);
  return n;
}

size_t RegistrationService::zombie_count() const {
  std::lock_guard lock(mu_);
  return zombies_.size();
}

uint64_t RegistrationService::mr_id_for_test(uint64_t handle) const {
  std::lock_guard lock(mu_);
  auto it = handles_.find(handle);
  return it == handles_.end() ? 0 : it->second.region->mr_id;
}

}  // namespace rdmad::ipc
