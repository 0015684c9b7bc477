// What a client session must survive a daemon restart with (docs/operations.md, "Restarts that
// keep registrations"): an append-only state file in the runtime directory (sessions, handles,
// exports) and the registered memory's file descriptors, kept by systemd's file-descriptor store
// (sd_pid_notify_with_fds FDSTORE=1, FDNAME=mem-<seq>; FileDescriptorStoreMax= in the unit) or by any
// supervisor that speaks the same protocol. The daemon writes a record per client operation and
// nothing while it stops; the next start replays the file with the descriptors systemd passes back
// (LISTEN_FDS, LISTEN_FDNAMES) and serves the sessions again under the same handles and tokens.
//
// The file is a sequence of records: u32 payload length, u32 FNV-1a of the payload, payload (first
// byte: the record type). A record is written with one write(2); a torn or corrupt tail (a crash
// mid-write) ends the replay there. The file is rewritten (only what is live) after a replay and
// whenever it has grown to twice what is live. Thread-safe (one mutex).
#pragma once

#include <sys/types.h>

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

namespace rdmad::clients {

using SessionToken = std::array<uint8_t, 16>;
// 16 bytes from getrandom(2): session tokens and export tokens.
std::array<uint8_t, 16> random_token();
// A kept descriptor's name: this prefix and its region's sequence number.
inline constexpr char kStoredMemoryPrefix[] = "mem-";
using ExportToken = std::array<uint8_t, 16>;

// Where the registered memory's descriptors are kept between two runs of the daemon.
class FdKeeper {
 public:
  virtual ~FdKeeper() = default;
  // Keeps a copy of fd under `name` (the caller keeps its own fd). False when it could not be sent.
  virtual bool keep(int fd, const std::string& name) = 0;
  virtual void forget(const std::string& name) = 0;
};

// systemd's file-descriptor store through $NOTIFY_SOCKET (sd_pid_notify_with_fds).
std::unique_ptr<FdKeeper> systemd_fd_keeper();
// The descriptors systemd passed at start (LISTEN_FDS, LISTEN_FDNAMES) whose names start with
// `prefix`, by name; they are removed from what sd_listen_fds callers see only by name.
std::map<std::string, int> passed_fds(const std::string& prefix);

struct StoredSession {
  uint64_t conn_id = 0;
  uid_t uid = 0;
  pid_t pid = 0;
  SessionToken token{};
  std::string pod_uid{};  // its tenant's pod; empty: the uid is the tenant
};

struct StoredHandle {
  uint64_t handle = 0;
  uint64_t conn_id = 0;
  uint64_t region_seq = 0;  // the kept descriptor is "mem-<region_seq>"
  uint32_t kind = 0;        // rdmad_mem_kind
  uint32_t access = 0;
  uint32_t nic_mask = 0;
  uint64_t offset = 0;
  uint64_t length = 0;
  uint64_t iova = 0;
  std::string gpu_pci_address;
};

struct StoredExport {
  ExportToken token{};
  uint64_t conn_id = 0;
  uint64_t handle = 0;
  uint64_t offset = 0;
  uint64_t length = 0;
  uint32_t rights = 0;
  std::string peer;
};

// What a replay found: live sessions with their handles and exports, and the kept descriptors
// their regions need (name "mem-<seq>" → fd, owned by the caller). Handles whose descriptor did not
// come back (a stopped unit's store is emptied; a record without its descriptor) are left out and
// counted, as is a session left with nothing.
struct RestoredState {
  std::vector<StoredSession> sessions;
  std::vector<StoredHandle> handles;  // in the order they were made
  std::vector<StoredExport> exports;
  std::map<uint64_t, int> region_fds;  // seq → fd
  uint64_t max_handle = 0;
  uint64_t max_conn_id = 0;
  uint64_t max_region_seq = 0;
  size_t handles_without_fd = 0;
  size_t torn_bytes = 0;  // a torn or corrupt tail that was dropped
};

class SessionStore {
 public:
  // path: the state file. keeper may be null (nothing is kept: records are still written, so a
  // test can read them). Does not touch the file until replay().
  SessionStore(std::string path, std::unique_ptr<FdKeeper> keeper);
  ~SessionStore();
  SessionStore(const SessionStore&) = delete;
  SessionStore& operator=(const SessionStore&) = delete;

  // Reads the file left by the previous run with the descriptors passed back (name → fd, ownership
  // taken: those no live handle needs are closed and forgotten by the keeper), then rewrites the
  // file with what is live. An unreadable or missing file is an empty state.
  RestoredState replay(std::map<std::string, int> fds);
  // Rewrites the file with what is live now (after the restored sessions are served again, or
  // dropped). Called by replay() and by the writers when the file has grown.
  void compact();

  // Records; each is a no-op for a connection without a session record, and after freeze().
  void session_started(const StoredSession& s);
  // A session's connection changed (it was resumed by a new connection).
  void session_moved(uint64_t from_conn, const StoredSession& to);
  // Everything of the session is gone (the client disconnected, or its grace ran out).
  void session_ended(uint64_t conn_id);
  bool has_session(uint64_t conn_id) const;
  // A new handle. fd >= 0 when its region is new: the descriptor is kept as "mem-<region_seq>".
  void handle_added(const StoredHandle& h, int fd);
  void handle_dropped(uint64_t handle);
  // The region's descriptor is no longer needed (its last handle and pin are gone).
  void region_dropped(uint64_t region_seq);
  void export_added(const StoredExport& e);
  void export_dropped(const ExportToken& token);
  // A new region's sequence number (its descriptor's name).
  uint64_t next_region_seq();
  // The daemon is stopping: from now on nothing is recorded, so what the state file says is what
  // the next start restores. Idempotent.
  void freeze();
  // Frozen, with the session of conn_id in the file: the next start restores it (with its exports).
  bool kept_at_stop(uint64_t conn_id) const;

  const std::string& path() const { return path_; }
  uint64_t bytes_written_for_test() const;

 private:
  void append(const std::vector<uint8_t>& payload);  // mu_ held
  void write_live(int fd) const;                       // mu_ held
  void maybe_compact();                                // mu_ held
  void rewrite();                                      // mu_ held

  const std::string path_;
  std::unique_ptr<FdKeeper> keeper_;
  mutable std::mutex mu_;
  int fd_ = -1;
  bool frozen_ = false;
  uint64_t file_bytes_ = 0;
  uint64_t live_bytes_ = 0;  // what a rewrite would write
  uint64_t next_seq_ = 1;
  std::map<uint64_t, StoredSession> sessions_;
  std::map<uint64_t, StoredHandle> handles_;
  std::map<ExportToken, StoredExport> exports_;
};

}  // namespace rdmad::clients
