// The state file and the descriptor store behind restarts that keep registrations.
#include "rdmad/daemon/clients/session_store.h"

#include <fcntl.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <systemd/sd-daemon.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "log.h"
#include "rdmad/base/log_fields.h"

namespace rdmad::clients {
namespace {

enum Record : uint8_t {
  kSession = 1,
  kSessionMoved = 2,
  kSessionEnded = 3,
  kHandle = 4,
  kHandleDropped = 5,
  kExport = 6,
  kExportDropped = 7,
  kRegionDropped = 8,
};

constexpr size_t kRecordHeader = 8;
constexpr uint32_t kMaxRecordBytes = 4096;
constexpr uint64_t kCompactFloorBytes = 1 << 20;

uint32_t fnv1a(const uint8_t* p, size_t n) {
  uint32_t h = 2166136261u;
  for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 16777619u;
  return h;
}

std::string fd_name(uint64_t seq) { return kStoredMemoryPrefix + std::to_string(seq); }

class Writer {
 public:
  explicit Writer(Record type) { out_.push_back(type); }
  template <class T>
  Writer& put(T v) {
    const auto* p = reinterpret_cast<const uint8_t*>(&v);
    out_.insert(out_.end(), p, p + sizeof(T));
    return *this;
  }
  Writer& bytes(const std::array<uint8_t, 16>& a) {
    out_.insert(out_.end(), a.begin(), a.end());
    return *this;
  }
  Writer& str(const std::string& s) {
    put<uint16_t>(static_cast<uint16_t>(s.size()));
    out_.insert(out_.end(), s.begin(), s.end());
    return *this;
  }
  std::vector<uint8_t> take() { return std::move(out_); }

 private:
  std::vector<uint8_t> out_;
};

class Reader {
 public:
  Reader(const uint8_t* p, size_t n) : p_(p), n_(n) {}
  template <class T>
  T get() {
    T v{};
    if (n_ - at_ < sizeof(T)) {
      ok_ = false;
      return v;
    }
    std::memcpy(&v, p_ + at_, sizeof(T));
    at_ += sizeof(T);
    return v;
  }
  std::array<uint8_t, 16> bytes() {
    std::array<uint8_t, 16> a{};
    if (n_ - at_ < a.size()) {
      ok_ = false;
      return a;
    }
    std::memcpy(a.data(), p_ + at_, a.size());
    at_ += a.size();
    return a;
  }
  std::string str() {
    const auto len = get<uint16_t>();
    if (!ok_ || n_ - at_ < len) {
      ok_ = false;
      return {};
    }
    std::string s(reinterpret_cast<const char*>(p_ + at_), len);
    at_ += len;
    return s;
  }
  bool ok() const { return ok_ && at_ == n_; }
  bool at_end() const { return at_ == n_; }

 private:
  const uint8_t* p_;
  size_t n_;
  size_t at_ = 0;
  bool ok_ = true;
};

std::vector<uint8_t> encode(const StoredSession& s) {
  return Writer(kSession).put(s.conn_id).put<uint32_t>(s.uid).put<int32_t>(s.pid).bytes(s.token).str(s.pod_uid).take();
}

std::vector<uint8_t> encode(const StoredHandle& h) {
  return Writer(kHandle)
      .put(h.handle)
      .put(h.conn_id)
      .put(h.region_seq)
      .put(h.kind)
      .put(h.access)
      .put(h.nic_mask)
      .put(h.offset)
      .put(h.length)
      .put(h.iova)
      .str(h.gpu_pci_address)
      .take();
}

std::vector<uint8_t> encode(const StoredExport& e) {
  return Writer(kExport)
      .bytes(e.token)
      .put(e.conn_id)
      .put(e.handle)
      .put(e.offset)
      .put(e.length)
      .put(e.rights)
      .str(e.peer)
      .take();
}

std::vector<uint8_t> framed(const std::vector<uint8_t>& payload) {
  std::vector<uint8_t> out(kRecordHeader + payload.size());
  const auto len = static_cast<uint32_t>(payload.size());
  const uint32_t sum = fnv1a(payload.data(), payload.size());
  std::memcpy(out.data(), &len, 4);
  std::memcpy(out.data() + 4, &sum, 4);
  std::memcpy(out.data() + kRecordHeader, payload.data(), payload.size());
  return out;
}

uint64_t record_bytes(const std::vector<uint8_t>& payload) { return kRecordHeader + payload.size(); }

bool write_all(int fd, const std::vector<uint8_t>& bytes) {
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<size_t>(n);
  }
  return true;
}

class SystemdFdKeeper final : public FdKeeper {
 public:
  bool keep(int fd, const std::string& name) override {
    const std::string msg = "FDSTORE=1\nFDNAME=" + name;
    return sd_pid_notify_with_fds(0, 0, msg.c_str(), &fd, 1) > 0;
  }
  void forget(const std::string& name) override {
    const std::string msg = "FDSTOREREMOVE=1\nFDNAME=" + name;
    sd_pid_notify(0, 0, msg.c_str());
  }
};

}  // namespace

std::array<uint8_t, 16> random_token() {
  std::array<uint8_t, 16> t{};
  size_t got = 0;
  while (got < t.size()) {
    const ssize_t n = ::getrandom(t.data() + got, t.size() - got, 0);
    if (n > 0) got += static_cast<size_t>(n);
  }
  return t;
}

std::unique_ptr<FdKeeper> systemd_fd_keeper() { return std::make_unique<SystemdFdKeeper>(); }

std::map<std::string, int> passed_fds(const std::string& prefix) {
  std::map<std::string, int> out;
  char** names = nullptr;
  const int n = sd_listen_fds_with_names(0, &names);
  for (int i = 0; i < n; ++i) {
    const std::string name = names != nullptr && names[i] != nullptr ? names[i] : "";
    if (name.rfind(prefix, 0) == 0) {
      if (auto [it, fresh] = out.emplace(name, SD_LISTEN_FDS_START + i); !fresh)
        ::close(SD_LISTEN_FDS_START + i);  // the same name twice: the first one is used
    }
  }
  if (names != nullptr) {
    for (int i = 0; i < n; ++i) free(names[i]);
    free(names);
  }
  return out;
}

SessionStore::SessionStore(std::string path, std::unique_ptr<FdKeeper> keeper)
    : path_(std::move(path)), keeper_(std::move(keeper)) {}

SessionStore::~SessionStore() {
  if (fd_ >= 0) ::close(fd_);
}

RestoredState SessionStore::replay(std::map<std::string, int> fds) {
  RestoredState out;
  std::vector<uint8_t> data;
  if (int in = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC); in >= 0) {
    uint8_t buf[65536];
    for (;;) {
      ssize_t n = ::read(in, buf, sizeof(buf));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      data.insert(data.end(), buf, buf + n);
    }
    ::close(in);
  }
  std::lock_guard lock(mu_);
  sessions_.clear();
  handles_.clear();
  exports_.clear();
  std::map<uint64_t, std::vector<uint64_t>> handles_by_conn;
  size_t at = 0;
  while (at + kRecordHeader <= data.size()) {
    uint32_t len = 0, sum = 0;
    std::memcpy(&len, data.data() + at, 4);
    std::memcpy(&sum, data.data() + at + 4, 4);
    if (len == 0 || len > kMaxRecordBytes || at + kRecordHeader + len > data.size()) break;
    const uint8_t* p = data.data() + at + kRecordHeader;
    if (fnv1a(p, len) != sum) break;
    Reader r(p + 1, len - 1);
    switch (p[0]) {
      case kSession: {
        StoredSession s;
        s.conn_id = r.get<uint64_t>();
        s.uid = r.get<uint32_t>();
        s.pid = r.get<int32_t>();
        s.token = r.bytes();
        if (!r.at_end()) s.pod_uid = r.str();  // the tenant's pod (absent before pods were tenants)
        if (r.ok()) sessions_[s.conn_id] = s;
        break;
      }
      case kSessionMoved: {
        const auto from = r.get<uint64_t>();
        StoredSession s;
        s.conn_id = r.get<uint64_t>();
        s.uid = r.get<uint32_t>();
        s.pid = r.get<int32_t>();
        s.token = r.bytes();
        if (!r.at_end()) s.pod_uid = r.str();
        if (!r.ok()) break;
        sessions_.erase(from);
        sessions_[s.conn_id] = s;
        for (auto& [id, h] : handles_)
          if (h.conn_id == from) h.conn_id = s.conn_id;
        for (auto& [t, e] : exports_)
          if (e.conn_id == from) e.conn_id = s.conn_id;
        break;
      }
      case kSessionEnded: {
        const auto conn = r.get<uint64_t>();
        if (!r.ok()) break;
        sessions_.erase(conn);
        std::erase_if(handles_, [&](const auto& kv) { return kv.second.conn_id == conn; });
        std::erase_if(exports_, [&](const auto& kv) { return kv.second.conn_id == conn; });
        break;
      }
      case kHandle: {
        StoredHandle h;
        h.handle = r.get<uint64_t>();
        h.conn_id = r.get<uint64_t>();
        h.region_seq = r.get<uint64_t>();
        h.kind = r.get<uint32_t>();
        h.access = r.get<uint32_t>();
        h.nic_mask = r.get<uint32_t>();
        h.offset = r.get<uint64_t>();
        h.length = r.get<uint64_t>();
        h.iova = r.get<uint64_t>();
        h.gpu_pci_address = r.str();
        if (r.ok()) handles_[h.handle] = h;
        break;
      }
      case kHandleDropped: {
        const auto handle = r.get<uint64_t>();
        if (r.ok()) handles_.erase(handle);
        break;
      }
      case kExport: {
        StoredExport e;
        e.token = r.bytes();
        e.conn_id = r.get<uint64_t>();
        e.handle = r.get<uint64_t>();
        e.offset = r.get<uint64_t>();
        e.length = r.get<uint64_t>();
        e.rights = r.get<uint32_t>();
        e.peer = r.str();
        if (r.ok()) exports_[e.token] = e;
        break;
      }
      case kExportDropped: {
        const auto token = r.bytes();
        if (r.ok()) exports_.erase(token);
        break;
      }
      case kRegionDropped:
        break;  // its handles are gone already; the record is for a reader of the file
      default:
        break;
    }
    at += kRecordHeader + len;
  }
  out.torn_bytes = data.size() - at;
  // What can be restored: a session's handles whose descriptor came back, exports of those.
  std::set<uint64_t> seqs_needed;
  for (auto it = handles_.begin(); it != handles_.end();) {
    const auto& h = it->second;
    const bool owned = sessions_.count(h.conn_id) != 0;
    if (!owned || fds.count(fd_name(h.region_seq)) == 0) {
      if (owned) ++out.handles_without_fd;
      it = handles_.erase(it);
      continue;
    }
    seqs_needed.insert(h.region_seq);
    ++it;
  }
  std::erase_if(exports_, [&](const auto& kv) { return handles_.count(kv.second.handle) == 0; });
  std::set<uint64_t> conns_used;
  for (const auto& [id, h] : handles_) conns_used.insert(h.conn_id);
  std::erase_if(sessions_, [&](const auto& kv) { return conns_used.count(kv.first) == 0; });
  for (auto& [name, fd] : fds) {
    uint64_t seq = 0;
    try {
      seq = std::stoull(name.substr(sizeof(kStoredMemoryPrefix) - 1));
    } catch (...) {
      seq = 0;
    }
    out.max_region_seq = std::max(out.max_region_seq, seq);
    if (seq != 0 && seqs_needed.count(seq) != 0) {
      out.region_fds[seq] = fd;
    } else {
      ::close(fd);
      if (keeper_) keeper_->forget(name);
    }
  }
  for (const auto& [id, s] : sessions_) out.sessions.push_back(s);
  for (const auto& [id, h] : handles_) {
    out.handles.push_back(h);
    out.max_handle = std::max(out.max_handle, h.handle);
    out.max_region_seq = std::max(out.max_region_seq, h.region_seq);
  }
  for (const auto& [t, e] : exports_) out.exports.push_back(e);
  for (const auto& [id, s] : sessions_) out.max_conn_id = std::max(out.max_conn_id, id);
  next_seq_ = out.max_region_seq + 1;
  return out;
}

void SessionStore::compact() {
  std::lock_guard lock(mu_);
  if (!frozen_) rewrite();
}

void SessionStore::rewrite() {
  const std::string tmp = path_ + ".new";
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0600);
  if (fd < 0) {
    ipc_log()->warn("cannot write session state path={} error={}", base::q(tmp), base::q(std::strerror(errno)));
    return;
  }
  write_live(fd);
  if (::rename(tmp.c_str(), path_.c_str()) != 0) {
    ipc_log()->warn("cannot replace session state path={} error={}", base::q(path_), base::q(std::strerror(errno)));
    ::close(fd);
    return;
  }
  if (fd_ >= 0) ::close(fd_);
  fd_ = fd;
  struct stat st {};
  file_bytes_ = ::fstat(fd_, &st) == 0 ? static_cast<uint64_t>(st.st_size) : 0;
  live_bytes_ = file_bytes_;
}

void SessionStore::write_live(int fd) const {
  std::vector<uint8_t> all;
  auto add = [&](const std::vector<uint8_t>& payload) {
    auto f = framed(payload);
    all.insert(all.end(), f.begin(), f.end());
  };
  for (const auto& [id, s] : sessions_) add(encode(s));
  for (const auto& [id, h] : handles_) add(encode(h));
  for (const auto& [t, e] : exports_) add(encode(e));
  write_all(fd, all);
}

void SessionStore::append(const std::vector<uint8_t>& payload) {
  if (fd_ < 0) {
    fd_ = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
    if (fd_ < 0) return;
  }
  auto f = framed(payload);
  // One write: a kill between two records leaves whole records; one mid-record, a torn tail.
  if (write_all(fd_, f)) file_bytes_ += f.size();
}

void SessionStore::maybe_compact() {
  if (file_bytes_ >= kCompactFloorBytes && file_bytes_ >= 2 * live_bytes_) rewrite();
}

void SessionStore::session_started(const StoredSession& s) {
  std::lock_guard lock(mu_);
  if (frozen_) return;
  sessions_[s.conn_id] = s;
  auto p = encode(s);
  live_bytes_ += record_bytes(p);
  append(p);
}

void SessionStore::session_moved(uint64_t from_conn, const StoredSession& to) {
  std::lock_guard lock(mu_);
  if (frozen_ || sessions_.count(from_conn) == 0) return;
  live_bytes_ -= record_bytes(encode(sessions_[from_conn]));
  sessions_.erase(from_conn);
  sessions_[to.conn_id] = to;
  live_bytes_ += record_bytes(encode(to));
  for (auto& [id, h] : handles_)
    if (h.conn_id == from_conn) h.conn_id = to.conn_id;
  for (auto& [t, e] : exports_)
    if (e.conn_id == from_conn) e.conn_id = to.conn_id;
  append(Writer(kSessionMoved).put(from_conn).put(to.conn_id).put<uint32_t>(to.uid).put<int32_t>(to.pid).bytes(to.token).str(to.pod_uid).take());
  maybe_compact();
}

void SessionStore::session_ended(uint64_t conn_id) {
  std::lock_guard lock(mu_);
  auto s = sessions_.find(conn_id);
  if (frozen_ || s == sessions_.end()) return;
  live_bytes_ -= record_bytes(encode(s->second));
  sessions_.erase(s);
  std::erase_if(handles_, [&](const auto& kv) {
    if (kv.second.conn_id != conn_id) return false;
    live_bytes_ -= record_bytes(encode(kv.second));
    return true;
  });
  std::erase_if(exports_, [&](const auto& kv) {
    if (kv.second.conn_id != conn_id) return false;
    live_bytes_ -= record_bytes(encode(kv.second));
    return true;
  });
  append(Writer(kSessionEnded).put(conn_id).take());
  maybe_compact();
}

bool SessionStore::has_session(uint64_t conn_id) const {
  std::lock_guard lock(mu_);
  return !frozen_ && sessions_.count(conn_id) != 0;
}

void SessionStore::handle_added(const StoredHandle& h, int fd) {
  std::lock_guard lock(mu_);
  if (frozen_ || sessions_.count(h.conn_id) == 0) return;
  // The descriptor first: a crash between the two leaves a descriptor no record names (dropped
  // at the next start), never a record without its memory.
  if (fd >= 0 && keeper_ && !keeper_->keep(fd, fd_name(h.region_seq))) return;
  handles_[h.handle] = h;
  auto p = encode(h);
  live_bytes_ += record_bytes(p);
  append(p);
}

void SessionStore::handle_dropped(uint64_t handle) {
  std::lock_guard lock(mu_);
  auto it = handles_.find(handle);
  if (frozen_ || it == handles_.end()) return;
  live_bytes_ -= record_bytes(encode(it->second));
  handles_.erase(it);
  append(Writer(kHandleDropped).put(handle).take());
  maybe_compact();
}

void SessionStore::region_dropped(uint64_t region_seq) {
  std::lock_guard lock(mu_);
  if (frozen_ || region_seq == 0) return;
  if (keeper_) keeper_->forget(fd_name(region_seq));
}

void SessionStore::export_added(const StoredExport& e) {
  std::lock_guard lock(mu_);
  if (frozen_ || sessions_.count(e.conn_id) == 0) return;
  exports_[e.token] = e;
  auto p = encode(e);
  live_bytes_ += record_bytes(p);
  append(p);
}

void SessionStore::export_dropped(const ExportToken& token) {
  std::lock_guard lock(mu_);
  auto it = exports_.find(token);
  if (frozen_ || it == exports_.end()) return;
  live_bytes_ -= record_bytes(encode(it->second));
  exports_.erase(it);
  append(Writer(kExportDropped).bytes(token).take());
  maybe_compact();
}

uint64_t SessionStore::next_region_seq() {
  std::lock_guard lock(mu_);
  return next_seq_++;
}

void SessionStore::freeze() {
  std::lock_guard lock(mu_);
  frozen_ = true;
}

bool SessionStore::kept_at_stop(uint64_t conn_id) const {
  std::lock_guard lock(mu_);
  return frozen_ && sessions_.count(conn_id) != 0;
}

uint64_t SessionStore::bytes_written_for_test() const {
  std::lock_guard lock(mu_);
  return file_bytes_;
}

}  // namespace rdmad::clients
