// Flows: opening (the daemon hands over the ring memfd and two eventfds), exports and imports
// through the socket, and requests and completions through the shared-memory rings.
#include <poll.h>
#include <sys/mman.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <thread>

#include "client_impl.h"
#include "rdmad/flow_ring.h"

using rdmad::client::as_bytes_of;
using rdmad::client::call;
using rdmad::client::fail;
using rdmad::proto::MsgType;
namespace ring = rdmad::ring;

struct rdmad_flow {
  rdmad_client* client = nullptr;
  uint64_t id = 0;
  void* base = nullptr;
  uint64_t bytes = 0;
  int memfd = -1;
  int doorbell_fd = -1;
  int completion_fd = -1;
  ring::Header* header = nullptr;
  ring::Producer<ring::Sqe> sq;
  ring::Consumer<ring::Cqe> cq;
};

namespace {

void release(rdmad_flow* f) {
  if (f->base != nullptr) ::munmap(f->base, f->bytes);
  for (int fd : {f->memfd, f->doorbell_fd, f->completion_fd})
    if (fd >= 0) ::close(fd);
  delete f;
}

template <size_t N>
bool copy_node_id(char (&dst)[N], const char* src) {
  if (src == nullptr || src[0] == '\0' || std::strlen(src) >= N) return false;
  rdmad::proto::copy_cstr(dst, src);
  return true;
}

rdmad_status post(rdmad_flow* flow, const ring::Sqe& e) {
  if (flow == nullptr) return RDMAD_ERR_INVALID_ARGUMENT;
  if (!flow->sq.push(e)) return RDMAD_ERR_NO_RESOURCE;
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

}  // namespace

extern "C" {

rdmad_status rdmad_flow_open(rdmad_client* client, const char* peer_node, const rdmad_flow_attr* attr,
                             rdmad_flow** out) {
  if (client == nullptr || out == nullptr) return RDMAD_ERR_INVALID_ARGUMENT;
  *out = nullptr;
  std::lock_guard lock(client->mu);
  rdmad::proto::FlowOpenRequest req{};
  if (!copy_node_id(req.peer, peer_node)) return fail(client, RDMAD_ERR_INVALID_ARGUMENT, "peer node id: 1..63 bytes");
  if (attr != nullptr) {
    req.channel = attr->channel;
    req.sq_depth = attr->sq_depth;
    req.cq_depth = attr->cq_depth;
  }
  auto r = call(client, MsgType::kFlowOpen, as_bytes_of(req), -1);
  if (r.status != RDMAD_OK) {
    for (int fd : r.fds) ::close(fd);
    return fail(client, r.status, r.error);
  }
  auto* f = new rdmad_flow;
  f->client = client;
  if (r.fds.size() != rdmad::proto::kFlowOpenFds || r.body.size() != sizeof(rdmad::proto::FlowOpenReply)) {
    for (int fd : r.fds) ::close(fd);
    delete f;
    return fail(client, RDMAD_ERR_PROTOCOL, "flow_open reply without its ring and eventfds");
  }
  rdmad::proto::FlowOpenReply rep;
  std::memcpy(&rep, r.body.data(), sizeof(rep));
  f->id = rep.flow_id;
  f->memfd = r.fds[0];
  f->doorbell_fd = r.fds[1];
  f->completion_fd = r.fds[2];
  f->bytes = rep.ring_bytes;
  f->base = ::mmap(nullptr, f->bytes, PROT_READ | PROT_WRITE, MAP_SHARED, f->memfd, 0);
  if (f->base == MAP_FAILED) {
    f->base = nullptr;
    release(f);
    return fail(client, RDMAD_ERR_SYSTEM, "mmap of the flow ring failed");
  }
  if (!ring::header_valid(f->base, f->bytes) || static_cast<ring::Header*>(f->base)->flow_id != rep.flow_id) {
    release(f);
    return fail(client, RDMAD_ERR_PROTOCOL, "the flow ring's header is not one this library understands");
  }
  f->header = static_cast<ring::Header*>(f->base);
  const ring::Layout l = ring::layout_for(f->header->sq_depth, f->header->cq_depth);
  f->sq = ring::Producer<ring::Sqe>(ring::sq_slots(f->base, l), f->header->sq_depth, &f->header->sq_tail,
                                    &f->header->sq_head);
  f->cq = ring::Consumer<ring::Cqe>(ring::cq_slots(f->base, l), f->header->cq_depth, &f->header->cq_tail,
                                    &f->header->cq_head);
  *out = f;
  return RDMAD_OK;
}

void rdmad_flow_close(rdmad_flow* flow) {
  if (flow == nullptr) return;
  {
    std::lock_guard lock(flow->client->mu);
    rdmad::proto::FlowCloseRequest req{flow->id};
    (void)flow->client->channel.transact(MsgType::kFlowClose, as_bytes_of(req), -1);
  }
  release(flow);
}

rdmad_flow_state rdmad_flow_get_state(const rdmad_flow* flow) {
  if (flow == nullptr) return RDMAD_FLOW_FAILED;
  return static_cast<rdmad_flow_state>(flow->header->flow_state.load(std::memory_order_acquire));
}

rdmad_status rdmad_flow_wait_connected(rdmad_flow* flow, int timeout_ms) {
  if (flow == nullptr) return RDMAD_ERR_INVALID_ARGUMENT;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  for (;;) {
    const rdmad_flow_state s = rdmad_flow_get_state(flow);
    if (s == RDMAD_FLOW_CONNECTED) return RDMAD_OK;
    if (s == RDMAD_FLOW_FAILED || (timeout_ms >= 0 && std::chrono::steady_clock::now() >= deadline)) {
      std::lock_guard lock(flow->client->mu);
      return fail(flow->client, RDMAD_ERR_PEER,
                  s == RDMAD_FLOW_FAILED ? "the flow failed (it broke the ring protocol); close it"
                                         : "the peer node is not connected: is its rdmad running, listed in "
                                           "[[peers]] on one side, and sharing the same key_file?");
    }
    // The state is a word in shared memory with no event of its own; connecting takes milliseconds.
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
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
  rdmad_client* client = flow->client;
  std::lock_guard lock(client->mu);
  rdmad::proto::ImportRequest req{};
  req.flow_id = flow->id;
  std::memcpy(req.token, token->bytes, sizeof(req.token));
  auto r = call(client, MsgType::kImport, as_bytes_of(req), -1);
  if (r.status != RDMAD_OK) return fail(client, r.status, r.error);
  if (r.body.size() != sizeof(rdmad::proto::ImportReply)) return fail(client, RDMAD_ERR_PROTOCOL, "bad import reply");
  rdmad::proto::ImportReply rep;
  std::memcpy(&rep, r.body.data(), sizeof(rep));
  *out = rdmad_remote{rep.remote_handle, rep.length, rep.rights};
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
  ring::Cqe c;
  while (n < max && flow->cq.pop(c)) {
    out[n++] = rdmad_completion{c.wr_id, c.length, static_cast<rdmad_status>(c.status), static_cast<rdmad_op>(c.op)};
  }
  if (n > 0) flow->cq.release();
  return n;
}

int rdmad_flow_fd(const rdmad_flow* flow) { return flow != nullptr ? flow->completion_fd : -1; }

int rdmad_flow_arm(rdmad_flow* flow) {
  if (flow == nullptr) return 1;
  return ring::prepare_sleep(flow->header->client_armed, flow->header->cq_tail, flow->cq.head()) ? 1 : 0;
}

rdmad_status rdmad_flow_wait(rdmad_flow* flow, int timeout_ms) {
  if (flow == nullptr) return RDMAD_ERR_INVALID_ARGUMENT;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  for (;;) {
    if (flow->cq.available() != 0) return RDMAD_OK;
    if (rdmad_flow_get_state(flow) == RDMAD_FLOW_FAILED) return RDMAD_ERR_PEER;
    if (rdmad_flow_arm(flow) != 0) return RDMAD_OK;
    int wait_ms = -1;
    if (timeout_ms >= 0) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) return RDMAD_ERR_NO_RESOURCE;
      wait_ms = static_cast<int>(left.count());
    }
    pollfd p{flow->completion_fd, POLLIN, 0};
    if (::poll(&p, 1, wait_ms) > 0) {
      uint64_t v;
      (void)!::read(flow->completion_fd, &v, sizeof(v));
    }
  }
}

}  // extern "C"
