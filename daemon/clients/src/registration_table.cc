// The registration table: requests, handles, deduplication, quotas, release with the connection.
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
                                         const NicDirectory& inventory, IpcMetrics* metrics)
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

const Quota& RegistrationService::quota_for(const Tenant& tenant) const {
  if (tenant.is_pod()) {
    auto it = config_.pod_quotas.find(tenant.pod_uid);
    return it != config_.pod_quotas.end() ? it->second : config_.default_quota;
  }
  auto it = config_.quotas.find(tenant.uid);
  return it != config_.quotas.end() ? it->second : config_.default_quota;
}

Usage RegistrationService::usage(const Tenant& tenant) const {
  std::lock_guard lock(mu_);
  auto it = usage_.find(tenant);
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

Result<Registered> RegistrationService::register_common(const Peer& peer, int fd, const Request& req,
                                                        uint64_t forced_handle, uint64_t store_seq) {
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
  RegionKey key{peer.tenant(), req.kind,   st.st_dev,    st.st_ino, req.offset,
                req.length, req.access, req.nic_mask, req.iova};
  const Quota& quota = quota_for(peer.tenant());
  const uint64_t aligned = req.offset & ~(page_bytes() - 1);
  const uint64_t pinned = ((req.offset + req.length + page_bytes() - 1) & ~(page_bytes() - 1)) - aligned;
  std::unique_lock lock(mu_);
  Usage& use = usage_[peer.tenant()];
  if (use.registrations + 1 > quota.max_registrations)
    return Error{RDMAD_ERR_QUOTA, "registration-count quota of " + peer.tenant().name() +
                                      " exceeded (" + std::to_string(quota.max_registrations) + " handles)"};
  if (table_share_ != 0 && use.registrations + 1 > table_share_)
    return Error{RDMAD_ERR_QUOTA, peer.tenant().name() + " holds " + std::to_string(table_share_) +
                                      " registrations, its share (nic_table_share_percent) of the NICs' " +
                                      "memory-region tables"};
  Registered out;
  Region* used = nullptr;
  Released duplicate;
  if (auto it = regions_.find(key); it != regions_.end()) {
    used = it->second.get();
    out = add_handle(peer, used, req, true, forced_handle);
  } else {
    if (use.pinned_bytes + pinned > quota.max_pinned_bytes)
      return Error{RDMAD_ERR_QUOTA, "pinned-bytes quota of " + peer.tenant().name() + " exceeded (" +
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
    Usage& again = usage_[peer.tenant()];
    --again.registrations;
    again.pinned_bytes -= pinned;
    if (!made.ok()) {
      if (again.registrations == 0 && again.pinned_bytes == 0) usage_.erase(peer.tenant());
      return made.error();
    }
    if (auto raced = regions_.find(key); raced != regions_.end()) {
      // Another connection of this tenant registered the same range meanwhile: share its region.
      used = raced->second.get();
      out = add_handle(peer, used, req, true, forced_handle);
      duplicate.push_back(std::move(made.value()));
    } else {
      used = made.value().get();
      again.pinned_bytes += used->pinned_bytes;
      if (metrics_ != nullptr) metrics_->region_added(used->kind, used->pinned_bytes);
      regions_.emplace(key, std::move(made.value()));
      out = add_handle(peer, used, req, false, forced_handle);
    }
  }
  // A session's region keeps its descriptor in the store (once, by the first handle that needs it).
  uint64_t seq = 0;
  int keep_fd = -1;
  if (store_ != nullptr && (forced_handle != 0 || store_->has_session(peer.conn_id))) {
    if (used->store_seq == 0) {
      used->store_seq = store_seq != 0 ? store_seq : store_->next_region_seq();
      if (forced_handle == 0) keep_fd = fd;
    }
    seq = used->store_seq;
  }
  lock.unlock();
  release_regions(duplicate);
  // A restored handle is in the state file already.
  if (seq != 0 && forced_handle == 0) record_handle(peer, req, out, seq, keep_fd);
  if (metrics_ != nullptr)
    metrics_->observe_registration_seconds(
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  return out;
}

void RegistrationService::record_handle(const Peer& peer, const Request& req, const Registered& out,
                                        uint64_t seq, int fd) {
  StoredHandle h;
  h.handle = out.handle;
  h.conn_id = peer.conn_id;
  h.region_seq = seq;
  h.kind = req.kind;
  h.access = req.access;
  h.nic_mask = req.nic_mask;
  h.offset = req.offset;
  h.length = req.length;
  h.iova = req.iova;
  h.gpu_pci_address = req.gpu_pci_address;
  store_->handle_added(h, fd);
}

Result<Registered> RegistrationService::restore(const Peer& owner, int fd, const StoredHandle& h) {
  const auto kind = static_cast<rdmad_mem_kind>(h.kind);
  if (kind != RDMAD_MEM_HOST && kind != RDMAD_MEM_GPU)
    return Error{RDMAD_ERR_PROTOCOL, "restored handle of unknown kind " + std::to_string(h.kind)};
  {
    std::lock_guard lock(mu_);
    if (handles_.count(h.handle) != 0)
      return Error{RDMAD_ERR_PROTOCOL, "handle " + std::to_string(h.handle) + " restored twice"};
  }
  auto r = register_common(owner, fd, Request{kind, h.offset, h.length, h.iova, h.access, h.nic_mask, h.gpu_pci_address},
                           h.handle, h.region_seq);
  if (!r.ok() && store_ != nullptr) store_->handle_dropped(h.handle);
  return r;
}

void RegistrationService::reserve_handles(uint64_t handle) {
  std::lock_guard lock(mu_);
  next_handle_ = std::max(next_handle_, handle + 1);
}

void RegistrationService::adopt_connection(uint64_t from, const Peer& to) {
  std::lock_guard lock(mu_);
  auto c = by_conn_.find(from);
  if (c == by_conn_.end()) return;
  std::set<uint64_t> handles = std::move(c->second);
  by_conn_.erase(c);
  for (uint64_t handle : handles) {
    Handle& h = handles_.at(handle);
    h.conn_id = to.conn_id;
    h.pid = to.pid;
  }
  by_conn_[to.conn_id].insert(handles.begin(), handles.end());
}

Result<Registered> RegistrationService::query(uint64_t conn_id, uint64_t handle) const {
  std::lock_guard lock(mu_);
  auto it = handles_.find(handle);
  if (it == handles_.end() || it->second.conn_id != conn_id)
    return Error{RDMAD_ERR_NOT_FOUND, "no registration with handle " + std::to_string(handle) + " on this connection"};
  const Handle& h = it->second;
  return Registered{handle, h.region->iova, h.length, h.region->refs > 1, h.region->keys};
}

Registered RegistrationService::add_handle(const Peer& peer, Region* region, const Request& req,
                                           bool shared, uint64_t forced_handle) {
  uint64_t handle = forced_handle != 0 ? forced_handle : next_handle_++;
  ++region->refs;
  ++usage_[peer.tenant()].registrations;
  handles_.emplace(handle, Handle{peer.conn_id, peer.uid, peer.pid, peer.tenant(), region, req.offset, req.length,
                                  req.access});
  by_conn_[peer.conn_id].insert(handle);
  update_quota_ratio();
  return Registered{handle, region->iova, req.length, shared, region->keys};
}

void RegistrationService::update_quota_ratio() {
  if (metrics_ == nullptr) return;
  double worst = 0;
  for (const auto& [tenant, use] : usage_) {
    const Quota& q = quota_for(tenant);
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
  if (store_ != nullptr) store_->handle_dropped(handle);
  if (auto c = by_conn_.find(h.conn_id); c != by_conn_.end()) {
    c->second.erase(handle);
    if (c->second.empty()) by_conn_.erase(c);
  }
  Usage& use = usage_[h.tenant];
  --use.registrations;
  Region* region = h.region;
  if (--region->refs == 0) {
    use.pinned_bytes -= region->pinned_bytes;
    if (metrics_ != nullptr) metrics_->region_removed(region->kind, region->pinned_bytes);
    auto node = regions_.extract(region->key);
    std::lock_guard pins(pins_mu_);
    if (region->pins > 0) {
      // The flow engine still moves bytes in or out of it: released when the last pin goes.
      region->released = true;
      zombies_.push_back(std::move(node.mapped()));
    } else {
      released.push_back(std::move(node.mapped()));
    }
  }
  if (use.registrations == 0 && use.pinned_bytes == 0) usage_.erase(h.tenant);
  update_quota_ratio();
}

bool RegistrationService::holds_registrations(uint64_t conn_id) const {
  std::lock_guard lock(mu_);
  return by_conn_.count(conn_id) != 0;
}

void RegistrationService::release_connection(uint64_t conn_id) {
  if (store_ != nullptr) store_->session_ended(conn_id);
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
    proto::RegistrationEntry e{id, h.offset, h.length, h.region->pinned_bytes, static_cast<uint32_t>(h.uid),
                               static_cast<int32_t>(h.pid), static_cast<uint32_t>(h.region->kind), h.access, {}};
    proto::copy_cstr(e.owner_pod, h.tenant.pod_uid.c_str());
    out.push_back(e);
  }
  return out;
}

void RegistrationService::release_regions(Released& regions) {
  if (regions.empty()) return;
  for (const auto& r : regions) r->attachments.clear();  // their MRs go before the memory
  for (const auto& r : regions) registrar_.deregister(r->mr_id);
  if (store_ != nullptr)
    for (const auto& r : regions) store_->region_dropped(r->store_seq);
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

size_t RegistrationService::zombie_count() const {
  std::lock_guard lock(pins_mu_);
  return zombies_.size();
}

uint64_t RegistrationService::mr_id_for_test(uint64_t handle) const {
  std::lock_guard lock(mu_);
  auto it = handles_.find(handle);
  return it == handles_.end() ? 0 : it->second.region->mr_id;
}

}  // namespace rdmad::clients
