// The data path: isend, irecv, test, and the progress that takes flow completions.
#include <cstring>

#include "plugin.h"

namespace rdmad::nccl {
namespace {

constexpr size_t kMaxRequestsPerComm = abi::kMaxRequests * kMaxRecvs * 4;  // NCCL's bound, with room
constexpr auto kLivenessInterval = std::chrono::milliseconds(1);
constexpr auto kPeerGoneGrace = std::chrono::seconds(2);

abi::Result result_of(rdmad_status s) {
  switch (s) {
    case RDMAD_OK:
      return abi::kSuccess;
    case RDMAD_ERR_PEER:
    case RDMAD_ERR_REMOTE_ACCESS:
      return abi::kRemoteError;
    case RDMAD_ERR_INVALID_ARGUMENT:
      return abi::kInvalidUsage;  // a send larger than the receive buffer
    default:
      return abi::kSystemError;
  }
}

}  // namespace

Request* Plugin::new_request(Comm& c) {
  for (auto& r : c.requests)
    if (!r->in_use) {
      *r = Request{};
      r->in_use = true;
      r->comm = &c;
      return r.get();
    }
  if (c.requests.size() >= kMaxRequestsPerComm) return nullptr;
  c.requests.push_back(std::make_unique<Request>());
  Request* r = c.requests.back().get();
  r->in_use = true;
  r->comm = &c;
  return r;
}

void Plugin::finish(Request* r) {
  for (int i = 0; i < r->n; ++i) {
    Sub& s = r->subs[static_cast<size_t>(i)];
    staging_->release(s.staging);
    s.staging = nullptr;
  }
  r->in_use = false;
}

bool Plugin::post_now(Comm& c, Sub& s, bool* full) {
  *full = false;
  Request& r = *s.req;
  const MemHandle* m = s.mem;
  rdmad_mr* mr = nullptr;
  uint64_t offset = 0;
  uint64_t length = s.size;
  if (m != nullptr && m->mr != nullptr && s.size > 0) {  // GPU memory, registered: no copy
    mr = m->mr;
    offset = reinterpret_cast<uintptr_t>(s.user) - m->base;
  } else {
    std::string error;
    if (s.staging == nullptr) {
      if (!staging_told_) {
        staging_told_ = true;
        log(abi::kLogInfo,
            "host memory is copied through registered staging buffers (one copy on each side; GPU memory "
            "through dma-buf and host memory a sealed memfd backs are not; docs/nccl.md)");
      }
      s.staging = staging_->acquire(std::max<size_t>(s.size, 1), &error);
      if (s.staging == nullptr) {
        c.failed = error;
        return false;
      }
      if (!r.recv && s.size > 0) std::memcpy(s.staging->data(), s.user, s.size);
    }
    mr = s.staging->mr;
    if (r.recv) length = std::max<size_t>(s.size, 1);  // the daemon refuses empty receives
  }
  const uint64_t wr = reinterpret_cast<uintptr_t>(&s);
  rdmad_status st = r.recv ? rdmad_flow_recv(s.stream->flow, wr, mr, offset, length)
                           : rdmad_flow_send(s.stream->flow, wr, mr, offset, length);
  if (st == RDMAD_ERR_NO_RESOURCE) {
    *full = true;
    return true;
  }
  if (st != RDMAD_OK) {
    c.failed = std::string(r.recv ? "posting a receive" : "posting a send") + " to node " + c.peer + ": " +
               rdmad_last_error(client_);
    return false;
  }
  s.posted = true;
  return true;
}

bool Plugin::post(Comm& c, Sub& s) {
  if (!s.stream->unposted.empty()) {
    s.stream->unposted.push_back(&s);
    return true;
  }
  bool full = false;
  if (!post_now(c, s, &full)) return false;
  if (full) s.stream->unposted.push_back(&s);
  return true;
}

void Plugin::progress(Comm& c) {
  rdmad_completion cs[32];
  for (auto& [tag, st] : c.streams) {
    for (;;) {
      const size_t n = rdmad_flow_poll(st->flow, cs, 32);
      for (size_t i = 0; i < n; ++i) {
        auto* s = reinterpret_cast<Sub*>(static_cast<uintptr_t>(cs[i].wr_id));
        s->complete = true;
        s->status = cs[i].status;
        s->bytes = cs[i].length;
        Request* r = s->req;
        if (--r->remaining == 0 && r->abandoned) finish(r);
      }
      if (n < 32) break;
    }
    while (!st->unposted.empty() && c.failed.empty()) {
      bool full = false;
      if (!post_now(c, *st->unposted.front(), &full) || full) break;
      st->unposted.pop_front();
    }
  }
  // The other rank's process: its end of the rendezvous connection closes when it exits.
  const auto now = Clock::now();
  // A rank that finished may exit while our last completions are still on their way from our
  // daemon (its receive completed when our send's data was placed; our send completes just
  // after): requests get kPeerGoneGrace to complete before they fail.
  if (c.failed.empty() && c.socket >= 0 && now >= c.next_liveness) {
    c.next_liveness = now + kLivenessInterval;
    if (c.peer_gone == Clock::time_point{} && peer_closed(c.socket)) c.peer_gone = now;
    if (c.peer_gone != Clock::time_point{} && now - c.peer_gone > kPeerGoneGrace)
      c.failed = "the rank on node " + c.peer + " closed its connection (its process ended?)";
  }
}

abi::Result Plugin::isend(void* send_comm, void* data, size_t size, int tag, void* mhandle, void** request) {
  std::lock_guard lock(mu_);
  *request = nullptr;
  auto* c = static_cast<Comm*>(send_comm);
  if (!c->failed.empty()) return fail(abi::kRemoteError, "isend: " + c->failed);
  if (size > (size_t{1} << 30)) return fail(abi::kInvalidUsage, "isend: " + std::to_string(size) + " bytes is over maxP2pBytes");
  Stream* st = nullptr;
  if (abi::Result r = open_stream(*c, tag, &st); r != abi::kSuccess) return r;
  Request* r = new_request(*c);
  if (r == nullptr) return fail(abi::kInternalError, "isend: more requests in flight than NCCL ever has");
  r->n = 1;
  r->remaining = 1;
  Sub& s = r->subs[0];
  s.req = r;
  s.stream = st;
  s.user = static_cast<uint8_t*>(data);
  s.size = size;
  s.mem = static_cast<const MemHandle*>(mhandle);
  if (!post(*c, s)) {
    finish(r);
    return fail(abi::kSystemError, "isend: " + c->failed);
  }
  *request = r;
  return abi::kSuccess;
}

abi::Result Plugin::irecv(void* recv_comm, int n, void** data, const size_t* sizes, const int* tags, void** mhandles,
                          void** request) {
  std::lock_guard lock(mu_);
  *request = nullptr;
  auto* c = static_cast<Comm*>(recv_comm);
  if (!c->failed.empty()) return fail(abi::kRemoteError, "irecv: " + c->failed);
  if (n < 1 || n > kMaxRecvs) return fail(abi::kInternalError, "irecv: " + std::to_string(n) + " receives (maxRecvs is 8)");
  Stream* streams[kMaxRecvs];
  for (int i = 0; i < n; ++i) {
    for (int j = 0; j < i; ++j)
      if (tags[j] == tags[i]) return fail(abi::kInternalError, "irecv: tag " + std::to_string(tags[i]) + " twice in one multi-receive");
    if (abi::Result r = open_stream(*c, tags[i], &streams[i]); r != abi::kSuccess) return r;
  }
  Request* r = new_request(*c);
  if (r == nullptr) return fail(abi::kInternalError, "irecv: more requests in flight than NCCL ever has");
  r->recv = true;
  r->n = n;
  r->remaining = n;
  for (int i = 0; i < n; ++i) {
    Sub& s = r->subs[static_cast<size_t>(i)];
    s.req = r;
    s.stream = streams[i];
    s.user = static_cast<uint8_t*>(data[i]);
    s.size = sizes[i];
    s.mem = static_cast<const MemHandle*>(mhandles != nullptr ? mhandles[i] : nullptr);
    if (!post(*c, s)) {
      // Earlier buffers of this request may be posted already: it can only be given up.
      r->remaining -= n - i;
      r->abandoned = true;
      if (r->remaining == 0) finish(r);
      return fail(abi::kSystemError, "irecv: " + c->failed);
    }
  }
  *request = r;
  return abi::kSuccess;
}

abi::Result Plugin::iflush(void*, int, void**, int*, void**, void** request) {
  // Nothing to flush: staged receives are copied by the CPU before test() reports them, and a GPU
  // receive completes only after the peer's WRITEs were acknowledged and its send-done arrived
  // through the daemons (docs/nccl.md, "Flush").
  *request = nullptr;
  return abi::kSuccess;
}

abi::Result Plugin::request_error(Request* r) {
  Comm& c = *r->comm;
  for (int i = 0; i < r->n; ++i) {
    const Sub& s = r->subs[static_cast<size_t>(i)];
    if (s.complete && s.status != RDMAD_OK) {
      std::string why = std::string(r->recv ? "receive" : "send") + " from/to node " + c.peer + " failed: " +
                        rdmad_strerror(s.status);
      if (s.status == RDMAD_ERR_INVALID_ARGUMENT) why += " (a send larger than the receive buffer?)";
      if (c.failed.empty()) c.failed = why;
      return fail(result_of(s.status), "test: " + why);
    }
  }
  for (int i = 0; r->recv && i < r->n; ++i) {
    const Sub& s = r->subs[static_cast<size_t>(i)];
    if (s.complete && s.bytes > s.size) {  // only a zero-size receive can be overrun (it is posted as 1 byte)
      if (c.failed.empty()) c.failed = "a send of " + std::to_string(s.bytes) + " bytes into a receive of " + std::to_string(s.size);
      return fail(abi::kInvalidUsage, "test: " + c.failed);
    }
  }
  if (!c.failed.empty()) return fail(abi::kRemoteError, "test: " + c.failed);
  return abi::kSuccess;
}

abi::Result Plugin::test(void* request, int* done, int* sizes) {
  std::lock_guard lock(mu_);
  *done = 0;
  auto* r = static_cast<Request*>(request);
  Comm& c = *r->comm;
  progress(c);
  // A request whose parts all completed well is done, even when the other rank exited since.
  bool all_ok = r->remaining == 0;
  for (int i = 0; all_ok && i < r->n; ++i) all_ok = r->subs[static_cast<size_t>(i)].status == RDMAD_OK;
  if (!all_ok) {
    if (abi::Result e = request_error(r); e != abi::kSuccess) {
      r->abandoned = true;  // freed when its last part completes, or with the comm
      if (r->remaining == 0) finish(r);
      return e;
    }
    return abi::kSuccess;
  }
  for (int i = 0; i < r->n; ++i) {
    Sub& s = r->subs[static_cast<size_t>(i)];
    size_t bytes = r->recv ? std::min(s.bytes, s.size) : s.size;
    if (r->recv && s.staging != nullptr && bytes > 0) std::memcpy(s.user, s.staging->data(), bytes);
    if (sizes != nullptr) sizes[i] = static_cast<int>(bytes);
    ++c.messages;
    c.bytes += bytes;
    if (s.staging != nullptr) c.staged_bytes += bytes;
  }
  finish(r);
  *done = 1;
  return abi::kSuccess;
}

}  // namespace rdmad::nccl
