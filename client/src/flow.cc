// Flows: opening (the daemon hands over the ring memfd and two eventfds), exports and imports
// through the socket, and requests and completions through the shared-memory rings.
//
// A daemon that stops or dies writes nothing more into the rings, so each flow also holds its own
// descriptor of the connection it was opened on (a dup of the socket): the kernel reports a
// hang-up on it when the daemon closes the connection or its process ends (SIGTERM, a crash,
// SIGKILL alike). From then on the library completes the flow's outstanding requests itself.
//
// A flow outlives its daemon: once the daemon is gone, the next post (or rdmad_flow_wait_connected)
// rebinds it to the daemon that answers now — the client reconnects (and takes its session back),
// the flow is opened again with the same peer and settings, waits for the peer, and every token it
// imported is imported again. The application keeps its rdmad_flow and rdmad_remote values: the
// library maps the remote handles it gave out to the new daemon's. Completions taken from the old
// ring and the old daemon's unfinished requests (RDMAD_ERR_DAEMON_GONE) are still delivered,
// before the new ring's.
#include <fcntl.h>
#include <poll.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <deque>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "client_impl.h"
#include "outstanding.h"
#include "rdmad/flow_ring.h"

using rdmad::client::as_bytes_of;
using rdmad::client::call;
using rdmad::client::fail;
using rdmad::proto::MsgType;
namespace ring = rdmad::ring;

struct rdmad_flow {
  rdmad_client* client = nullptr;
  uint64_t id = 0;
  uint32_t nic_mask = 0;  // the NICs it was opened on (rdmad_flow_open_nics); 0: every NIC
  rdmad::proto::FlowOpenRequest request{};  // what it was opened with (a rebind opens it again)
  void* base = nullptr;
  uint64_t bytes = 0;
  int memfd = -1;
  int doorbell_fd = -1;
  int completion_fd = -1;     // the number stays across rebinds (rdmad_flow_fd)
  int control_fd = -1;        // our own descriptor of the connection the flow was opened on
  ino_t control_ino = 0;      // its socket's identity, to tell whether the client still uses it
  ring::Header* header = nullptr;
  ring::Producer<ring::Sqe> sq;
  ring::Consumer<ring::Cqe> cq;
  rdmad::client::Outstanding outstanding;
  // Set once the connection hung up. Completions the daemon published before (up to gone_cq_tail)
  // are still taken; the rest of `outstanding` is completed by the library.
  mutable bool gone = false;
  mutable uint32_t gone_cq_tail = 0;
  std::chrono::steady_clock::time_point next_check{};  // rdmad_flow_poll's look at the connection
  // Completions of a previous daemon's ring, delivered before the current ring's (rebind).
  std::deque<rdmad_completion> carried;
  // Tokens imported on it: the handle the application holds, and the current daemon's.
  struct Imported {
    rdmad_token token;
    uint64_t app_handle;
    uint64_t handle;
  };
  std::vector<Imported> imported;
  std::unordered_map<uint64_t, uint64_t> remap;  // app handle -> current handle, where they differ
};

namespace {

// Unmaps the ring and closes the descriptors of the daemon it came from (the completion fd too
// unless `keep_completion_fd`).
void drop_ring(rdmad_flow* f, bool keep_completion_fd) {
  if (f->base != nullptr) ::munmap(f->base, f->bytes);
  f->base = nullptr;
  f->header = nullptr;
  for (int* fd : {&f->memfd, &f->doorbell_fd, &f->control_fd}) {
    if (*fd >= 0) ::close(*fd);
    *fd = -1;
  }
  if (!keep_completion_fd && f->completion_fd >= 0) {
    ::close(f->completion_fd);
    f->completion_fd = -1;
  }
}

void release(rdmad_flow* f) {
  drop_ring(f, false);
  delete f;
}

constexpr short kHangup = POLLHUP | POLLERR | POLLRDHUP | POLLNVAL;

// Records that the daemon is gone (its connection hung up), once.
void mark_gone(const rdmad_flow* f) {
  if (f->gone) return;
  f->gone = true;
  f->gone_cq_tail = f->header != nullptr ? f->header->cq_tail.load(std::memory_order_acquire) : 0;
}

// Looks at the flow's connection without waiting; true when the daemon is gone.
bool daemon_gone(const rdmad_flow* f) {
  if (f->gone || f->control_fd < 0) {
    f->gone = true;
    return true;
  }
  pollfd p{f->control_fd, POLLRDHUP, 0};
  if (::poll(&p, 1, 0) > 0 && (p.revents & kHangup) != 0) mark_gone(f);
  return f->gone;
}

// Completions the daemon published that the client has not taken (none past the hang-up).
uint32_t daemon_completions(rdmad_flow* f) {
  if (f->header == nullptr) return 0;  // a rebind that found no daemon left no ring
  const uint32_t n = f->cq.available();
  if (n == UINT32_MAX) return 0;  // a broken index: the daemon fails the flow
  if (!f->gone) return n;
  return std::min(n, f->gone_cq_tail - f->cq.head());
}

// Whether rdmad_flow_poll has something to return.
bool ready(rdmad_flow* f) {
  return !f->carried.empty() || daemon_completions(f) != 0 || (f->gone && f->outstanding.size() != 0);
}

// rdmad_last_error of a flow's client, under its lock (another thread may be in a call).
rdmad_status flow_fail(rdmad_flow* f, rdmad_status status, std::string message) {
  std::lock_guard lock(f->client->mu);
  return fail(f->client, status, std::move(message));
}

constexpr const char* kGoneMessage =
    "the daemon of this flow stopped or died (its connection closed); its requests completed with "
    "RDMAD_ERR_DAEMON_GONE: the next post, import or rdmad_flow_wait_connected rebinds the flow to the "
    "daemon that answers then (within the reconnect timeout)";

template <size_t N>
bool copy_node_id(char (&dst)[N], const char* src) {
  if (src == nullptr || src[0] == '\0' || std::strlen(src) >= N) return false;
  rdmad::proto::copy_cstr(dst, src);
  return true;
}

rdmad_status rebind(rdmad_flow* f, std::chrono::steady_clock::time_point deadline);

std::chrono::milliseconds reconnect_timeout(rdmad_flow* f) {
  std::lock_guard lock(f->client->mu);
  return std::chrono::milliseconds(f->client->reconnect_timeout_ms);
}

rdmad_status post(rdmad_flow* flow, ring::Sqe e) {
  if (flow == nullptr) return RDMAD_ERR_INVALID_ARGUMENT;
  // No system call here while the daemon lives: a busy flow learns of a dead one in
  // rdmad_flow_poll / _wait. Then the post rebinds the flow (bounded by the reconnect timeout).
  if (flow->gone) {
    const rdmad_status s = rebind(flow, std::chrono::steady_clock::now() + reconnect_timeout(flow));
    if (s != RDMAD_OK) return s;
  }
  if (!flow->remap.empty() && e.remote_handle != 0) {
    if (auto it = flow->remap.find(e.remote_handle); it != flow->remap.end()) e.remote_handle = it->second;
  }
  if (flow->outstanding.full() || !flow->sq.push(e)) return RDMAD_ERR_NO_RESOURCE;
  flow->outstanding.add(e.op, e.wr_id);
  // Only a sleeping daemon needs the doorbell: a busy one finds the entry on its next pass.
  if (ring::needs_doorbell(flow->header->daemon_idle)) {
    uint64_t one = 1;
    (void)!::write(flow->doorbell_fd, &one, sizeof(one));
  }
  return RDMAD_OK;
}

ring::Sqe make_sqe(ring::Op op, uint64_t wr_id, const rdmad_mr* local, uint64_t local_offset, uint64_t remote_handle,
                   uint64_t remote_offset, uint64_t length) {
  ring::Sqe e{};
  e.op = static_cast<uint8_t>(op);
  e.wr_id = wr_id;
  e.local_handle = local != nullptr ? local->handle : 0;
  e.local_offset = local_offset;
  e.remote_handle = remote_handle;
  e.remote_offset = remote_offset;
  e.length = length;
  return e;
}

// Opens the flow on the client's current connection (f->request) and maps its ring. On a rebind
// the new completion eventfd takes the number of the old one. Caller holds the client's lock.
rdmad_status open_ring(rdmad_flow* f) {
  rdmad_client* client = f->client;
  // An unpinned flow sends the request every daemon version reads; only a mask needs version 3.
  std::span<const std::byte> body = as_bytes_of(f->request);
  if (f->request.nic_mask == 0) {
    body = body.first(sizeof(rdmad::proto::FlowOpenRequestV1));
  } else if (client->channel.is_open() && client->channel.version() < rdmad::proto::kVersionFlowNics) {
    return fail(client, RDMAD_ERR_NOT_SUPPORTED,
                "the daemon speaks protocol version " + std::to_string(client->channel.version()) +
                    ": flows pinned to NICs need version 3 (a newer rdmad)");
  }
  auto r = call(client, MsgType::kFlowOpen, body, -1);
  if (r.status != RDMAD_OK) {
    for (int fd : r.fds) ::close(fd);
    return fail(client, r.status, r.error);
  }
  if (r.fds.size() != rdmad::proto::kFlowOpenFds || r.body.size() != sizeof(rdmad::proto::FlowOpenReply)) {
    for (int fd : r.fds) ::close(fd);
    return fail(client, RDMAD_ERR_PROTOCOL, "flow_open reply without its ring and eventfds");
  }
  rdmad::proto::FlowOpenReply rep;
  std::memcpy(&rep, r.body.data(), sizeof(rep));
  const bool again = f->completion_fd >= 0;
  drop_ring(f, true);
  f->id = rep.flow_id;
  f->memfd = r.fds[0];
  f->doorbell_fd = r.fds[1];
  if (again) {
    // The application may hold the number (rdmad_flow_fd): the new eventfd takes it.
    if (::dup3(r.fds[2], f->completion_fd, O_CLOEXEC) < 0) {
      const int err = errno;
      ::close(r.fds[2]);
      return fail(client, RDMAD_ERR_SYSTEM, std::string("dup3 of the completion eventfd: ") + std::strerror(err));
    }
    ::close(r.fds[2]);
  } else {
    f->completion_fd = r.fds[2];
  }
  // Anything below that fails leaves an open flow on the daemon: close it there.
  auto refuse = [&](rdmad_status status, std::string message) {
    rdmad::proto::FlowCloseRequest close_req{f->id};
    (void)client->channel.transact(MsgType::kFlowClose, as_bytes_of(close_req), -1);
    drop_ring(f, true);
    return fail(client, status, std::move(message));
  };
  f->bytes = rep.ring_bytes;
  f->base = ::mmap(nullptr, f->bytes, PROT_READ | PROT_WRITE, MAP_SHARED, f->memfd, 0);
  if (f->base == MAP_FAILED) {
    f->base = nullptr;
    return refuse(RDMAD_ERR_SYSTEM, "mmap of the flow ring failed");
  }
  if (!ring::header_valid(f->base, f->bytes) || static_cast<ring::Header*>(f->base)->flow_id != rep.flow_id)
    return refuse(RDMAD_ERR_PROTOCOL, "the flow ring's header is not one this library understands");
  f->header = static_cast<ring::Header*>(f->base);
  struct stat st {};
  f->control_fd = ::fcntl(client->channel.fd(), F_DUPFD_CLOEXEC, 0);
  if (f->control_fd < 0 || ::fstat(f->control_fd, &st) != 0) {
    // Without it the flow could not notice a dead daemon: refuse it rather than risk a hang.
    return refuse(RDMAD_ERR_SYSTEM, std::string("dup of the daemon connection: ") + std::strerror(errno));
  }
  f->control_ino = st.st_ino;
  const ring::Layout l = ring::layout_for(f->header->sq_depth, f->header->cq_depth);
  f->sq = ring::Producer<ring::Sqe>(ring::sq_slots(f->base, l), f->header->sq_depth, &f->header->sq_tail,
                                    &f->header->sq_head);
  f->cq = ring::Consumer<ring::Cqe>(ring::cq_slots(f->base, l), f->header->cq_depth, &f->header->cq_tail,
                                    &f->header->cq_head);
  f->outstanding.reset(f->header->sq_depth + f->header->cq_depth, static_cast<uint8_t>(ring::Op::kRecv));
  f->gone = false;
  f->gone_cq_tail = 0;
  return RDMAD_OK;
}

// Imports `token` on the flow's current daemon; its handle there in *handle. Caller holds the lock.
rdmad_status import_once(rdmad_flow* f, const rdmad_token& token, rdmad_remote* out) {
  rdmad_client* client = f->client;
  rdmad::proto::ImportRequest req{};
  req.flow_id = f->id;
  std::memcpy(req.token, token.bytes, sizeof(req.token));
  auto r = call(client, MsgType::kImport, as_bytes_of(req), -1);
  if (r.status != RDMAD_OK) return fail(client, r.status, r.error);
  if (r.body.size() != sizeof(rdmad::proto::ImportReply)) return fail(client, RDMAD_ERR_PROTOCOL, "bad import reply");
  rdmad::proto::ImportReply rep;
  std::memcpy(&rep, r.body.data(), sizeof(rep));
  *out = rdmad_remote{rep.remote_handle, rep.length, rep.rights};
  return RDMAD_OK;
}

// Handles the application never saw from a daemon: for an import after a rebind whose daemon
// handle is one the application already holds for another token.
constexpr uint64_t kSyntheticHandle = uint64_t{1} << 63;

// Records an import; returns the handle the application gets for it.
uint64_t remember_import(rdmad_flow* f, const rdmad_token& token, uint64_t handle) {
  for (auto& i : f->imported)
    if (std::memcmp(i.token.bytes, token.bytes, sizeof(token.bytes)) == 0) {
      i.handle = handle;
      if (i.app_handle != handle) f->remap[i.app_handle] = handle;
      else f->remap.erase(i.app_handle);
      return i.app_handle;
    }
  uint64_t app = handle;
  const bool taken = f->remap.count(app) != 0 ||
                     std::any_of(f->imported.begin(), f->imported.end(), [&](const auto& i) { return i.app_handle == app; });
  if (taken) {
    app = kSyntheticHandle | f->imported.size();
    f->remap[app] = handle;
  }
  f->imported.push_back({token, app, handle});
  return app;
}

// Waits (bounded) for the flow's peer to be connected, watching the daemon's connection.
bool wait_state_connected(rdmad_flow* f, std::chrono::steady_clock::time_point deadline) {
  for (;;) {
    if (daemon_gone(f)) return false;
    if (f->header->flow_state.load(std::memory_order_acquire) == static_cast<uint32_t>(ring::FlowState::kConnected))
      return true;
    if (std::chrono::steady_clock::now() >= deadline) return false;
    // The state is a word in shared memory with no event of its own: look again in 1 ms.
    pollfd p{f->control_fd, POLLRDHUP, 0};
    if (::poll(&p, 1, 1) > 0 && (p.revents & kHangup) != 0) mark_gone(f);
  }
}

rdmad_status rebind(rdmad_flow* f, std::chrono::steady_clock::time_point deadline) {
  {
    std::lock_guard lock(f->client->mu);
    // What the old daemon published and the rest of its requests are still the application's.
    if (f->header != nullptr) {
      uint32_t published = daemon_completions(f);
      ring::Cqe c;
      while (published > 0 && f->cq.pop(c)) {
        --published;
        f->carried.push_back(
            rdmad_completion{c.wr_id, c.length, static_cast<rdmad_status>(c.status), static_cast<rdmad_op>(c.op)});
        f->outstanding.complete(c.op, c.wr_id);
      }
      rdmad::client::Outstanding::Entry e;
      while (f->outstanding.pop_oldest(&e))
        f->carried.push_back(rdmad_completion{e.wr_id, 0, RDMAD_ERR_DAEMON_GONE, static_cast<rdmad_op>(e.op)});
    }
    const rdmad_status s = open_ring(f);
    if (s != RDMAD_OK) {
      f->gone = true;  // still: a later post or wait tries again
      return s == RDMAD_ERR_CONNECTION ? RDMAD_ERR_DAEMON_GONE : s;
    }
  }
  // The waits below hold no lock: the client's other threads go on meanwhile.
  if (!wait_state_connected(f, deadline))
    return flow_fail(f, f->gone ? RDMAD_ERR_DAEMON_GONE : RDMAD_ERR_PEER,
                     f->gone ? kGoneMessage : "rebound to the restarted daemon; the peer node is not connected yet");
  // Each token again, as soon as the peer has granted it again (it does once its session is up).
  for (size_t k = 0; k < f->imported.size(); ++k) {
    const rdmad_token token = f->imported[k].token;
    rdmad_remote r{};
    rdmad_status s;
    for (;;) {
      {
        std::lock_guard lock(f->client->mu);
        s = import_once(f, token, &r);
      }
      if (s != RDMAD_ERR_NOT_FOUND || std::chrono::steady_clock::now() >= deadline) break;
      pollfd p{f->control_fd, POLLRDHUP, 0};
      if (::poll(&p, 1, 2) > 0 && (p.revents & kHangup) != 0) {
        mark_gone(f);
        return flow_fail(f, RDMAD_ERR_DAEMON_GONE, kGoneMessage);
      }
    }
    // Not granted again in time (its export ended with the restart): handle 0, which no daemon
    // gives out, so a request on it fails RDMAD_ERR_NOT_FOUND as on a revoked export.
    remember_import(f, token, s == RDMAD_OK ? r.handle : 0);
  }
  return RDMAD_OK;
}

}  // namespace

extern "C" {

rdmad_status rdmad_flow_open(rdmad_client* client, const char* peer_node, const rdmad_flow_attr* attr,
                             rdmad_flow** out) {
  return rdmad_flow_open_nics(client, peer_node, attr, 0, out);
}

rdmad_status rdmad_flow_open_nics(rdmad_client* client, const char* peer_node, const rdmad_flow_attr* attr,
                                  uint32_t nic_mask, rdmad_flow** out) {
  if (client == nullptr || out == nullptr) return RDMAD_ERR_INVALID_ARGUMENT;
  *out = nullptr;
  std::lock_guard lock(client->mu);
  auto* f = new rdmad_flow;
  f->client = client;
  if (!copy_node_id(f->request.peer, peer_node)) {
    delete f;
    return fail(client, RDMAD_ERR_INVALID_ARGUMENT, "peer node id: 1..63 bytes");
  }
  if (attr != nullptr) {
    f->request.channel = attr->channel;
    f->request.sq_depth = attr->sq_depth;
    f->request.cq_depth = attr->cq_depth;
  }
  f->request.nic_mask = nic_mask;
  f->nic_mask = nic_mask;
  const rdmad_status s = open_ring(f);
  if (s != RDMAD_OK) {
    release(f);
    return s;
  }
  *out = f;
  return RDMAD_OK;
}

uint32_t rdmad_flow_nic_mask(const rdmad_flow* flow) { return flow != nullptr ? flow->nic_mask : 0; }

void rdmad_flow_close(rdmad_flow* flow) {
  if (flow == nullptr) return;
  if (!daemon_gone(flow)) {
    std::lock_guard lock(flow->client->mu);
    // Only on the connection the flow belongs to: after a reconnect the flow id means nothing to
    // the daemon there (the old connection ends when its last flow drops its descriptor).
    struct stat st {};
    rdmad::client::Channel& ch = flow->client->channel;
    if (ch.is_open() && ::fstat(ch.fd(), &st) == 0 && st.st_ino == flow->control_ino) {
      rdmad::proto::FlowCloseRequest req{flow->id};
      (void)ch.transact(MsgType::kFlowClose, as_bytes_of(req), -1);
    }
  }
  release(flow);
}

rdmad_flow_state rdmad_flow_get_state(const rdmad_flow* flow) {
  if (flow == nullptr) return RDMAD_FLOW_FAILED;
  if (daemon_gone(flow)) return RDMAD_FLOW_DISCONNECTED;  // the next post or wait rebinds it
  return static_cast<rdmad_flow_state>(flow->header->flow_state.load(std::memory_order_acquire));
}

rdmad_status rdmad_flow_wait_connected(rdmad_flow* flow, int timeout_ms) {
  if (flow == nullptr) return RDMAD_ERR_INVALID_ARGUMENT;
  const auto now = std::chrono::steady_clock::now();
  const auto deadline = timeout_ms >= 0 ? now + std::chrono::milliseconds(timeout_ms)
                                        : std::chrono::steady_clock::time_point::max();
  if (daemon_gone(flow)) {
    // Its daemon went away: rebind to the one that answers now (reconnect, open, import again).
    const rdmad_status s = rebind(flow, timeout_ms >= 0 ? deadline : now + reconnect_timeout(flow));
    if (s != RDMAD_OK) return s;
  }
  for (;;) {
    const rdmad_flow_state s = rdmad_flow_get_state(flow);
    if (s == RDMAD_FLOW_CONNECTED) return RDMAD_OK;
    if (flow->gone) return flow_fail(flow, RDMAD_ERR_DAEMON_GONE, kGoneMessage);
    if (s == RDMAD_FLOW_FAILED || (timeout_ms >= 0 && std::chrono::steady_clock::now() >= deadline)) {
      return flow_fail(flow, RDMAD_ERR_PEER,
                       s == RDMAD_FLOW_FAILED ? "the flow failed (it broke the ring protocol); close it"
                                              : "the peer node is not connected: is its rdmad running, listed in "
                                                "[[peers]] on one side, and sharing the same key_file?");
    }
    // The state is a word in shared memory with no event of its own; connecting takes
    // milliseconds. Waiting on the connection instead of sleeping notices a dead daemon at once.
    pollfd p{flow->control_fd, POLLRDHUP, 0};
    if (::poll(&p, 1, 1) > 0 && (p.revents & kHangup) != 0) mark_gone(flow);
  }
}

rdmad_status rdmad_export(rdmad_client* client, const rdmad_mr* mr, uint64_t offset, uint64_t length,
                          const char* peer_node, uint32_t rights, rdmad_token* out) {
  if (client == nullptr || mr == nullptr || out == nullptr) return RDMAD_ERR_INVALID_ARGUMENT;
  std::lock_guard lock(client->mu);
  rdmad::proto::ExportRequest req{};
  req.handle = mr->handle;
  req.offset = offset;
  req.length = length;
  req.rights = rights;
  if (!copy_node_id(req.peer, peer_node)) return fail(client, RDMAD_ERR_INVALID_ARGUMENT, "peer node id: 1..63 bytes");
  auto r = call(client, MsgType::kExport, as_bytes_of(req), -1);
  if (r.status != RDMAD_OK) return fail(client, r.status, r.error);
  if (r.body.size() != sizeof(rdmad::proto::ExportReply)) return fail(client, RDMAD_ERR_PROTOCOL, "bad export reply");
  std::memcpy(out->bytes, r.body.data(), sizeof(out->bytes));
  return RDMAD_OK;
}

rdmad_status rdmad_revoke(rdmad_client* client, const rdmad_token* token) {
  if (client == nullptr || token == nullptr) return RDMAD_ERR_INVALID_ARGUMENT;
  std::lock_guard lock(client->mu);
  rdmad::proto::RevokeRequest req{};
  std::memcpy(req.token, token->bytes, sizeof(req.token));
  auto r = call(client, MsgType::kRevoke, as_bytes_of(req), -1);
  return r.status == RDMAD_OK ? RDMAD_OK : fail(client, r.status, r.error);
}

rdmad_status rdmad_flow_import(rdmad_flow* flow, const rdmad_token* token, rdmad_remote* out) {
  if (flow == nullptr || token == nullptr || out == nullptr) return RDMAD_ERR_INVALID_ARGUMENT;
  if (daemon_gone(flow)) {
    const rdmad_status s = rebind(flow, std::chrono::steady_clock::now() + reconnect_timeout(flow));
    if (s != RDMAD_OK) return s;
  }
  std::lock_guard lock(flow->client->mu);
  rdmad_remote r{};
  const rdmad_status s = import_once(flow, *token, &r);
  if (s != RDMAD_OK) return s;
  r.handle = remember_import(flow, *token, r.handle);
  *out = r;
  return RDMAD_OK;
}

void rdmad_token_to_string(const rdmad_token* token, char out[RDMAD_TOKEN_STRING_BYTES]) {
  for (size_t i = 0; i < sizeof(token->bytes); ++i) std::snprintf(out + 2 * i, 3, "%02x", token->bytes[i]);
}

rdmad_status rdmad_token_from_string(const char* text, rdmad_token* out) {
  if (text == nullptr || out == nullptr || std::strlen(text) != 2 * sizeof(out->bytes)) return RDMAD_ERR_INVALID_ARGUMENT;
  for (size_t i = 0; i < sizeof(out->bytes); ++i) {
    unsigned v = 0;
    for (int k = 0; k < 2; ++k) {
      const char c = text[2 * i + static_cast<size_t>(k)];
      unsigned d = c >= '0' && c <= '9' ? static_cast<unsigned>(c - '0')
                   : c >= 'a' && c <= 'f' ? static_cast<unsigned>(c - 'a' + 10)
                   : c >= 'A' && c <= 'F' ? static_cast<unsigned>(c - 'A' + 10)
                                          : 16u;
      if (d == 16) return RDMAD_ERR_INVALID_ARGUMENT;
      v = v * 16 + d;
    }
    out->bytes[i] = static_cast<uint8_t>(v);
  }
  return RDMAD_OK;
}

rdmad_status rdmad_flow_write(rdmad_flow* flow, uint64_t wr_id, const rdmad_mr* local, uint64_t local_offset,
                              const rdmad_remote* remote, uint64_t remote_offset, uint64_t length) {
  if (local == nullptr || remote == nullptr) return RDMAD_ERR_INVALID_ARGUMENT;
  return post(flow, make_sqe(ring::Op::kWrite, wr_id, local, local_offset, remote->handle, remote_offset, length));
}

rdmad_status rdmad_flow_read(rdmad_flow* flow, uint64_t wr_id, const rdmad_mr* local, uint64_t local_offset,
                             const rdmad_remote* remote, uint64_t remote_offset, uint64_t length) {
  if (local == nullptr || remote == nullptr) return RDMAD_ERR_INVALID_ARGUMENT;
  return post(flow, make_sqe(ring::Op::kRead, wr_id, local, local_offset, remote->handle, remote_offset, length));
}

rdmad_status rdmad_flow_send(rdmad_flow* flow, uint64_t wr_id, const rdmad_mr* local, uint64_t offset,
                             uint64_t length) {
  if (local == nullptr) return RDMAD_ERR_INVALID_ARGUMENT;
  return post(flow, make_sqe(ring::Op::kSend, wr_id, local, offset, 0, 0, length));
}

rdmad_status rdmad_flow_recv(rdmad_flow* flow, uint64_t wr_id, const rdmad_mr* local, uint64_t offset,
                             uint64_t length) {
  if (local == nullptr) return RDMAD_ERR_INVALID_ARGUMENT;
  return post(flow, make_sqe(ring::Op::kRecv, wr_id, local, offset, 0, 0, length));
}

size_t rdmad_flow_poll(rdmad_flow* flow, rdmad_completion* out, size_t max) {
  if (flow == nullptr || out == nullptr) return 0;
  size_t n = 0;
  while (n < max && !flow->carried.empty()) {  // a previous daemon's, first
    out[n++] = flow->carried.front();
    flow->carried.pop_front();
  }
  ring::Cqe c;
  uint32_t published = daemon_completions(flow);
  if (published == 0 && !flow->gone && flow->outstanding.size() != 0) {
    // Requests outstanding and nothing completing: is the daemon still there? A clock read per
    // empty poll, a system call at most once a millisecond, so busy pollers stay cheap.
    const auto now = std::chrono::steady_clock::now();
    if (now >= flow->next_check) {
      flow->next_check = now + std::chrono::milliseconds(1);
      if (daemon_gone(flow)) published = daemon_completions(flow);
    }
  }
  size_t taken = 0;
  while (n < max && published > 0 && flow->cq.pop(c)) {
    --published;
    ++taken;
    out[n++] = rdmad_completion{c.wr_id, c.length, static_cast<rdmad_status>(c.status), static_cast<rdmad_op>(c.op)};
    flow->outstanding.complete(c.op, c.wr_id);
  }
  if (taken > 0) flow->cq.release();
  // The daemon is gone and has published everything it ever will: the rest fails here.
  rdmad::client::Outstanding::Entry e;
  while (flow->gone && published == 0 && n < max && flow->outstanding.pop_oldest(&e))
    out[n++] = rdmad_completion{e.wr_id, 0, RDMAD_ERR_DAEMON_GONE, static_cast<rdmad_op>(e.op)};
  return n;
}

int rdmad_flow_fd(const rdmad_flow* flow) { return flow != nullptr ? flow->completion_fd : -1; }

int rdmad_flow_arm(rdmad_flow* flow) {
  if (flow == nullptr) return 1;
  // Called before sleeping, so one look at the connection costs nothing that matters.
  if ((flow->outstanding.size() != 0 && daemon_gone(flow)) || ready(flow)) return 1;
  if (flow->header == nullptr) return 0;  // no daemon and nothing left: the next post rebinds
  return ring::prepare_sleep(flow->header->client_armed, flow->header->cq_tail, flow->cq.head()) ? 1 : 0;
}

rdmad_status rdmad_flow_wait(rdmad_flow* flow, int timeout_ms) {
  if (flow == nullptr) return RDMAD_ERR_INVALID_ARGUMENT;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  for (;;) {
    if (ready(flow)) return RDMAD_OK;
    if (flow->gone) return flow_fail(flow, RDMAD_ERR_DAEMON_GONE, kGoneMessage);
    if (flow->header->flow_state.load(std::memory_order_acquire) == static_cast<uint32_t>(ring::FlowState::kFailed))
      return RDMAD_ERR_PEER;
    if (ring::prepare_sleep(flow->header->client_armed, flow->header->cq_tail, flow->cq.head())) return RDMAD_OK;
    int wait_ms = -1;
    if (timeout_ms >= 0) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) return RDMAD_ERR_NO_RESOURCE;
      wait_ms = static_cast<int>(left.count());
    }
    // The completion fd only ever fires for the daemon's completions; the connection tells when
    // there will be none (POLLHUP, whatever the daemon's end: exit, crash or SIGKILL).
    pollfd p[2] = {{flow->completion_fd, POLLIN, 0}, {flow->control_fd, POLLRDHUP, 0}};
    if (::poll(p, 2, wait_ms) > 0) {
      if ((p[1].revents & kHangup) != 0) mark_gone(flow);
      if ((p[0].revents & POLLIN) != 0) {
        uint64_t v;
        (void)!::read(flow->completion_fd, &v, sizeof(v));
      }
    }
  }
}

}  // extern "C"
