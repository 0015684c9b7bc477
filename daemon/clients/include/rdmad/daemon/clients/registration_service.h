// The registration table of the client service: validates ranges, maps memfds, deduplicates
// identical registrations of one uid, enforces per-uid quotas and ties every handle to the
// connection that created it. Transport-free (the socket server feeds it). Thread-safe: the
// server's workers, the control thread and the flow engine call it concurrently; one mutex guards
// the table (a request holds it for a lookup, or while a new region is mapped and registered, so
// deduplication and quotas see every uid's registrations at once); the registrar is called without
// it, by several threads at once.
#pragma once

#include <sys/types.h>

#include <array>
#include <cstdint>
#include <functional>
#include <mutex>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "rdmad/daemon/clients/client_peer.h"
#include "rdmad/daemon/clients/fd_budget.h"
#include "rdmad/daemon/clients/ipc_config.h"
#include "rdmad/daemon/clients/ipc_metrics.h"
#include "rdmad/daemon/clients/memory_registrar.h"
#include "rdmad/daemon/nics/nic_directory.h"
#include "rdmad/daemon/clients/region_pins.h"
#include "rdmad/daemon/clients/result.h"
#include "rdmad/daemon/clients/session_store.h"
#include "rdmad/protocol.h"

namespace rdmad::clients {

struct Registered {
  uint64_t handle = 0;
  uint64_t iova = 0;  // address remote peers use with the rkeys
  uint64_t length = 0;
  bool shared = false;  // deduplicated with an existing region of the same uid
  std::vector<NicKeys> keys;
};

// NUMA node of the page at addr (-1 when unknown: not faulted in yet, or no NUMA support).
int32_t page_numa_node(const void* addr);

struct Usage {
  uint64_t pinned_bytes = 0;
  uint32_t registrations = 0;
};

class RegistrationService final : public RegionPins {
 public:
  // metrics may be null (tests of the table alone).
  RegistrationService(const IpcConfig& config, MemoryRegistrar& registrar, const NicDirectory& inventory,
                      IpcMetrics* metrics);
  ~RegistrationService();
  RegistrationService(const RegistrationService&) = delete;
  RegistrationService& operator=(const RegistrationService&) = delete;

  // fd stays owned by the caller (it may close it right after: the mapping keeps the file).
  Result<Registered> register_host(const Peer& peer, int fd, const proto::RegisterHostRequest& req);
  Result<Registered> register_dmabuf(const Peer& peer, int fd, const proto::RegisterDmabufRequest& req);
  Result<Ok> deregister(const Peer& peer, uint64_t handle);
  // Handles of connection conn_id above `after`, ascending; *more tells whether some were left out.
  std::vector<proto::ListEntry> list(uint64_t conn_id, uint64_t after, uint32_t max_entries,
                                     bool* more) const;
  // Every connection's handles above `after`, ascending, with their owners (operators' view).
  std::vector<proto::RegistrationEntry> list_all(uint64_t after, uint32_t max_entries, bool* more) const;
  // Records every handle of a connection with a session (SessionStore::session_started) there, and
  // keeps its region's descriptor, so the next start can restore it. Set before serving.
  void set_session_store(SessionStore* store) { store_ = store; }
  // Registers a handle a previous run recorded (SessionStore::replay), under the same handle
  // number, owned by connection owner.conn_id. fd: the region's kept descriptor (stays the caller's).
  Result<Registered> restore(const Peer& owner, int fd, const StoredHandle& h);
  // Handles are numbered above `handle` from now on (restored ones keep theirs).
  void reserve_handles(uint64_t handle);
  // The handles of connection `from` now belong to connection `to` (a resumed session).
  void adopt_connection(uint64_t from, const Peer& to);
  // The registration behind one of conn_id's handles, with its keys.
  Result<Registered> query(uint64_t conn_id, uint64_t handle) const;
  // GPU registrations keep their dma-buf open: one descriptor each, taken from `budget`.
  void set_fd_budget(FdBudget* budget) { fds_ = budget; }
  // Whether connection conn_id holds a registration.
  bool holds_registrations(uint64_t conn_id) const;
  // Releases every handle of a connection (disconnect, crash).
  void release_connection(uint64_t conn_id);

  // Thread-safe (called from the flow engine's thread): resolves [offset, offset+length) of a
  // handle owned by connection conn_id whose access includes `need_access`, and keeps its memory
  // mapped and registered until unpin() even if the client deregisters or disconnects meanwhile.
  Result<PinnedRange> pin(uint64_t conn_id, uint64_t handle, uint64_t offset, uint64_t length,
                          uint32_t need_access) override;
  void unpin(const void* pin) override;
  // The attachment for `domain` (a nonzero id the caller chose) of the pinned region, made by
  // `make` the first time (without the table lock; null from make fails with `error`). Calls for
  // one domain come from one thread at a time.
  Result<RegionAttachment*> attachment(const void* pin, uint64_t domain, const MakeAttachment& make) override;
  // Destroys every region's attachment for `domain` (its protection domains are about to go).
  void drop_domain(uint64_t domain) override;
  size_t attachment_count_for_test(uint64_t domain) const;
  // Called (from any thread) when a released region's last pin goes: the owner then calls reap()
  // on the control thread. Without one, reap() runs on the next release.
  void set_reaper(std::function<void()> reaper) override { reaper_ = std::move(reaper); }
  // Releases released regions whose pins are all gone (control thread).
  void reap() override;
  size_t zombie_count() const;

  Usage usage(const Tenant& tenant) const;
  // The quota of a tenant: its [[quota]] (by pod_uid for a pod, by uid otherwise), else the default.
  const Quota& quota_for(const Tenant& tenant) const override;
  size_t region_count() const;
  size_t handle_count() const;
  // The registrar's id of the region behind `handle` (0 if none).
  uint64_t mr_id_for_test(uint64_t handle) const;
  // Holds the table's lock (the one the ipc workers take) until the lock is dropped.
  std::unique_lock<std::mutex> lock_table_for_test() const { return std::unique_lock(mu_); }

 private:
  using RegionKey =
      std::tuple<Tenant, uint32_t /*kind*/, dev_t, ino_t, uint64_t /*offset*/, uint64_t /*length*/,
                 uint32_t /*access*/, uint32_t /*nic_mask*/, uint64_t /*iova*/>;
  struct Region {
    RegionKey key;
    rdmad_mem_kind kind;
    uint64_t mr_id = 0;
    void* map_base = nullptr;  // host: our MAP_SHARED mapping of the memfd
    int32_t numa_node = -1;
    std::vector<uint8_t> locality;  // to each NIC (clients::Locality)
    uint64_t map_bytes = 0;
    uint64_t iova = 0;
    uint64_t length = 0;        // bytes registered
    uint64_t file_offset = 0;   // offset of the first registered byte in the memfd or dma-buf
    uint32_t access = 0;        // RDMAD_ACCESS_* of the request (the MRs carry local access only)
    int dmabuf_fd = -1;         // device memory: our dup of the dma-buf, for registrations in peer domains
    uint64_t store_seq = 0;     // its descriptor in the session store ("mem-<seq>"); 0: not kept
    std::vector<std::pair<uint64_t, std::unique_ptr<RegionAttachment>>> attachments;  // by domain (pins_mu_)
    uint64_t pinned_bytes = 0;
    uint32_t refs = 0;
    uint32_t pins = 0;     // flow engine uses (guarded by pins_mu_)
    bool released = false;  // no handle left; waits for its pins (guarded by pins_mu_)
    std::vector<NicKeys> keys;
  };
  using Released = std::vector<std::unique_ptr<Region>>;
  // Without mu_: drops their attachments, unregisters and unmaps regions no handle or pin uses any
  // more.
  void release_regions(Released& regions);
  struct Handle {
    uint64_t conn_id;
    uid_t uid;
    pid_t pid;
    Tenant tenant;
    Region* region;
    uint64_t offset;
    uint64_t length;
    uint32_t access;
  };
  struct Request {
    rdmad_mem_kind kind;
    uint64_t offset, length, iova;
    uint32_t access, nic_mask;
    std::string gpu_pci_address;
  };

  // forced_handle != 0: a restored handle keeps its number (and store_seq its region's descriptor).
  Result<Registered> register_common(const Peer& peer, int fd, const Request& req, uint64_t forced_handle = 0,
                                     uint64_t store_seq = 0);
  // Without mu_: the session store's record of a new handle (and its region's descriptor).
  void record_handle(const Peer& peer, const Request& req, const Registered& out, uint64_t seq, int fd);
  // Without mu_: maps the range (host memory) and registers it with the registrar.
  Result<std::unique_ptr<Region>> make_region(int fd, const Request& req, RegionKey key, uint64_t aligned,
                                              uint64_t pinned);
  // The rest run under mu_.
  Registered add_handle(const Peer& peer, Region* region, const Request& req, bool shared,
                        uint64_t forced_handle = 0);
  // Regions left without handle or pin are appended to `released`.
  void drop_handle(std::unordered_map<uint64_t, Handle>::iterator it, Released& released);
  // Recomputes rdmad_quota_usage_max_ratio (O(uids with registrations), per request, not per packet).
  void update_quota_ratio();

  const IpcConfig& config_;
  MemoryRegistrar& registrar_;
  const NicDirectory& inventory_;
  IpcMetrics* metrics_;
  // The NICs' NUMA nodes and PCI addresses for locality, read once: they do not change while the
  // daemon runs, and listing the NICs queries every port.
  const std::vector<NicDescriptor> locality_nics_;
  // Registrations one uid may hold so that it fills at most its share of the smallest NIC's
  // memory-region table (0: no such limit).
  const uint64_t table_share_;
  uint64_t next_handle_ = 1;
  std::map<RegionKey, std::unique_ptr<Region>> regions_;
  std::unordered_map<uint64_t, Handle> handles_;
  std::unordered_map<uint64_t, std::set<uint64_t>> by_conn_;
  std::map<Tenant, Usage> usage_;
  // Guards everything above and below but the registrar (thread-safe, never called with mu_
  // held) and the pins.
  mutable std::mutex mu_;
  // The pins' own lock: every Region's pins, released and attachments, and zombies_. Taken after
  // mu_ where both are held (pin, dropping a handle, dropping a domain) and alone by unpin(),
  // attachment() and reap(), so the flows never wait behind the ipc workers' table lock.
  mutable std::mutex pins_mu_;
  std::vector<std::unique_ptr<Region>> zombies_;
  std::function<void()> reaper_;
  FdBudget* fds_ = nullptr;
  SessionStore* store_ = nullptr;
};

}  // namespace rdmad::clients
