#include "peer.h"

#include <poll.h>

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <thread>

#include "channel.h"

namespace rdmad::vm {
namespace {

using verbs::Status;
using verbs::WcOpcode;
using verbs::WcStatus;
using verbs::WrOpcode;
using Time = std::chrono::steady_clock::time_point;

constexpr uint8_t kGuard = 0xEE;
constexpr uint32_t kQueueDepth = 64;

uint64_t wr_seed(uint64_t seed, uint32_t k) { return seed ^ (uint64_t{k} << 40); }

bool writes_target(WrOpcode op) { return op != WrOpcode::kRdmaRead; }
bool needs_receive(WrOpcode op) {
  return op == WrOpcode::kSend || op == WrOpcode::kSendWithImm || op == WrOpcode::kRdmaWriteWithImm;
}
bool has_imm(WrOpcode op) { return op == WrOpcode::kSendWithImm || op == WrOpcode::kRdmaWriteWithImm; }

std::string describe(const Case& c) {
  return std::string(op_name(c.op)) + " " + std::to_string(c.count) + "x" + std::to_string(c.size) + " B";
}

}  // namespace

void fill_pattern(uint8_t* p, size_t n, uint64_t seed) {
  uint64_t x = seed * 0x9E3779B97F4A7C15ull + 0x632BE59BD9B4E019ull;
  for (size_t i = 0; i < n; i += 8) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    std::memcpy(p + i, &x, std::min<size_t>(8, n - i));
  }
}

std::string QpInfo::to_line() const {
  char gid_hex[33];
  for (int i = 0; i < 16; ++i) std::snprintf(gid_hex + 2 * i, 3, "%02x", gid.raw[static_cast<size_t>(i)]);
  return "qp " + std::to_string(qpn) + " " + std::to_string(psn) + " " + gid_hex + " " +
         std::to_string(udp_port);
}

bool QpInfo::parse(const std::string& line, QpInfo* out) {
  const auto w = words(line);
  if (w.size() != 5 || w[0] != "qp" || w[3].size() != 32) return false;
  out->qpn = static_cast<uint32_t>(std::stoul(w[1]));
  out->psn = static_cast<uint32_t>(std::stoul(w[2]));
  for (size_t i = 0; i < 16; ++i)
    out->gid.raw[i] = static_cast<uint8_t>(std::stoul(w[3].substr(2 * i, 2), nullptr, 16));
  out->udp_port = static_cast<uint16_t>(std::stoul(w[4]));
  return true;
}

Status Peer::open(const verbs::BackendRegistry& registry, const std::string& backend,
                  const verbs::DeviceConfig& config) {
  auto dev = registry.open(backend, config);
  if (!dev.ok()) return Status::error("open " + backend + " device: " + dev.status().message());
  dev_ = std::move(dev.value());
  auto port = dev_->query_port(1);
  if (!port.ok()) return Status::error("query_port: " + port.status().message());
  port_ = port.value();
  auto pd = dev_->alloc_pd();
  if (!pd.ok()) return Status::error("alloc_pd: " + pd.status().message());
  pd_ = std::move(pd.value());
  auto scq = dev_->create_cq(4 * kQueueDepth);
  auto rcq = dev_->create_cq(4 * kQueueDepth);
  if (!scq.ok() || !rcq.ok()) return Status::error("create_cq failed");
  scq_ = std::move(scq.value());
  rcq_ = std::move(rcq.value());
  buf_ = std::make_unique<uint8_t[]>(2 * kAreaBytes);
  auto mr = pd_->reg_mr(buf_.get(), 2 * kAreaBytes,
                        verbs::kAccessLocalWrite | verbs::kAccessRemoteWrite | verbs::kAccessRemoteRead);
  if (!mr.ok()) return Status::error("reg_mr: " + mr.status().message());
  mr_ = std::move(mr.value());
  return Status::success();
}

Peer::~Peer() {  // QP -> CQ -> MR -> PD -> device
  qp_.reset();
  scq_.reset();
  rcq_.reset();
  mr_.reset();
  pd_.reset();
  dev_.reset();
}

RegionInfo Peer::region() const { return {reinterpret_cast<uint64_t>(buf_.get()), mr_->rkey()}; }

Status Peer::create_qp(uint32_t psn) {
  qp_.reset();
  verbs::QpInitAttr ia;
  ia.max_send_wr = kQueueDepth;
  ia.max_recv_wr = kQueueDepth;
  ia.send_cq = scq_.get();
  ia.recv_cq = rcq_.get();
  auto qp = pd_->create_qp(ia);
  if (!qp.ok()) return Status::error("create_qp: " + qp.status().message());
  qp_ = std::move(qp.value());
  psn_ = psn & 0xFFFFFF;
  return Status::success();
}

QpInfo Peer::local() const { return {qp_->qp_num(), psn_, port_.gid, port_.udp_port}; }

Status Peer::connect(const QpInfo& remote, uint32_t mtu, uint8_t timeout) {
  using namespace verbs;
  QpAttr a;
  a.state = QpState::kInit;
  a.access_flags = kAccessRemoteWrite | kAccessRemoteRead;
  Status st = qp_->modify(a, kQpState | kQpAccessFlags);
  if (!st.ok()) return Status::error("modify to INIT: " + st.message());
  a.state = QpState::kRtr;
  a.path_mtu_bytes = mtu;
  a.dest_qp_num = remote.qpn;
  a.rq_psn = remote.psn;
  a.dest_gid = remote.gid;
  a.dest_udp_port = remote.udp_port;
  a.min_rnr_timer = 12;
  a.max_dest_rd_atomic = 16;
  st = qp_->modify(
      a, kQpState | kQpPathMtu | kQpDestQpn | kQpRqPsn | kQpAv | kQpMinRnrTimer | kQpMaxDestRdAtomic);
  if (!st.ok()) return Status::error("modify to RTR (mtu " + std::to_string(mtu) + "): " + st.message());
  a.state = QpState::kRts;
  a.sq_psn = psn_;
  a.timeout = timeout;
  a.retry_cnt = 7;
  a.rnr_retry = 7;
  a.max_rd_atomic = 16;
  st = qp_->modify(a, kQpState | kQpSqPsn | kQpTimeout | kQpRetryCnt | kQpRnrRetry | kQpMaxRdAtomic);
  if (!st.ok()) return Status::error("modify to RTS: " + st.message());
  return Status::success();
}

Status Peer::initiate(const Case& c, uint64_t seed, const RegionInfo& remote, Time deadline) {
  const size_t stride = slot_stride(c.size);
  std::vector<verbs::SendWr> wrs(c.count);
  for (uint32_t k = 0; k < c.count; ++k) {
    const size_t at = k * stride + kSlotGuardBytes;
    verbs::SendWr& wr = wrs[k];
    wr.wr_id = k;
    wr.opcode = c.op;
    wr.imm_data = imm_of(seed, k);
    if (c.op == WrOpcode::kRdmaRead) {
      // READ the remote source into the local destination, between guard bytes.
      std::memset(dst() + k * stride, kGuard, stride);
      wr.sge = {reinterpret_cast<uint64_t>(dst() + at), c.size, mr_->lkey()};
      wr.remote_addr = remote.addr + at;
    } else {
      fill_pattern(src() + at, c.size, wr_seed(seed, k));
      wr.sge = {reinterpret_cast<uint64_t>(src() + at), c.size, mr_->lkey()};
      wr.remote_addr = remote.addr + kAreaBytes + at;  // the remote destination area
    }
    wr.rkey = remote.rkey;
  }
  size_t posted = 0;
  Status st = qp_->post_send(wrs, &posted);
  if (!st.ok()) return Status::error("post_send " + describe(c) + ": " + st.message());
  st = wait(*scq_, c.count, false, c, seed, deadline);
  if (!st.ok() || c.op != WrOpcode::kRdmaRead) return st;
  return check_area(dst(), c, seed, "read into the initiator");
}

Status Peer::prepare(const Case& c, uint64_t seed) {
  const size_t stride = slot_stride(c.size);
  std::vector<verbs::RecvWr> recvs;
  for (uint32_t k = 0; k < c.count; ++k) {
    const size_t at = k * stride + kSlotGuardBytes;
    if (c.op == WrOpcode::kRdmaRead) {
      fill_pattern(src() + at, c.size, wr_seed(seed, k));
    } else {
      std::memset(dst() + k * stride, kGuard, stride);
    }
    if (needs_receive(c.op)) {
      verbs::RecvWr r;
      r.wr_id = k;
      // A SEND lands in the receive's buffer: exactly its slot's data bytes, guards around them.
      if (c.op != WrOpcode::kRdmaWriteWithImm)
        r.sge = {reinterpret_cast<uint64_t>(dst() + at), c.size, mr_->lkey()};
      recvs.push_back(r);
    }
  }
  if (recvs.empty()) return Status::success();
  Status st = qp_->post_recv(recvs);
  if (!st.ok()) return Status::error("post_recv " + describe(c) + ": " + st.message());
  return Status::success();
}

Status Peer::check(const Case& c, uint64_t seed, Time deadline) {
  if (needs_receive(c.op)) {
    Status st = wait(*rcq_, c.count, true, c, seed, deadline);
    if (!st.ok()) return st;
  }
  if (!writes_target(c.op)) return Status::success();
  return check_area(dst(), c, seed, "written into the target");
}

Status Peer::wait(verbs::CompletionQueue& cq, uint32_t n, bool recv, const Case& c, uint64_t seed,
                  Time deadline) {
  uint32_t got = 0;
  verbs::WorkCompletion wc[16];
  // Sleeps on the completion channel rather than spinning: a guest has one vCPU, which rxe's
  // kernel work needs more than a spinning poller does.
  bool can_sleep = cq.notify_fd() >= 0;
  bool armed = false;
  while (got < n) {
    const size_t m = cq.poll(wc);
    if (m == 0 && can_sleep && !armed) {
      armed = can_sleep = cq.request_notify().ok();
      continue;  // poll once more after arming: a completion that came first raises no event
    }
    for (size_t i = 0; i < m; ++i, ++got) {
      const verbs::WorkCompletion& w = wc[i];
      const std::string where = describe(c) + (recv ? ": receive " : ": work request ") + std::to_string(got);
      if (w.status != WcStatus::kSuccess)
        return Status::error(where + " completed with " + std::string(to_string(w.status)));
      if (w.wr_id != got)
        return Status::error(where + " completed out of order (wr_id " + std::to_string(w.wr_id) + ")");
      if (!recv) continue;
      const WcOpcode want =
          c.op == WrOpcode::kRdmaWriteWithImm ? WcOpcode::kRecvRdmaWithImm : WcOpcode::kRecv;
      if (w.opcode != want) return Status::error(where + ": wrong completion opcode");
      if (w.byte_len != c.size) {
        return Status::error(where + ": byte_len " + std::to_string(w.byte_len) + ", sent " +
                             std::to_string(c.size));
      }
      if (w.has_imm != has_imm(c.op))
        return Status::error(where + ": immediate flag " + std::to_string(w.has_imm));
      if (w.has_imm && w.imm_data != imm_of(seed, got)) return Status::error(where + ": wrong immediate");
    }
    if (m == 0) {
      const auto left =
          std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) {
        return Status::error(describe(c) + ": " + std::to_string(got) + " of " + std::to_string(n) +
                             (recv ? " receives" : " work requests") + " completed before the deadline");
      }
      if (armed) {
        pollfd p{cq.notify_fd(), POLLIN, 0};
        poll(&p, 1, static_cast<int>(std::min<long long>(left.count(), 100)));
        cq.ack_notify();
        armed = false;
      } else {
        std::this_thread::yield();
      }
    }
  }
  return Status::success();
}

Status Peer::check_area(const uint8_t* area, const Case& c, uint64_t seed, const char* what) const {
  const size_t stride = slot_stride(c.size);
  std::vector<uint8_t> want(c.size);
  for (uint32_t k = 0; k < c.count; ++k) {
    const uint8_t* slot = area + k * stride;
    fill_pattern(want.data(), c.size, wr_seed(seed, k));
    const uint8_t* data = slot + kSlotGuardBytes;
    if (std::memcmp(data, want.data(), c.size) != 0) {
      size_t at = 0;
      while (data[at] == want[at]) ++at;
      return Status::error(describe(c) + " " + what + ": work request " + std::to_string(k) +
                           " differs at byte " + std::to_string(at));
    }
    for (size_t i = 0; i < stride; ++i) {
      if (i >= kSlotGuardBytes && i < kSlotGuardBytes + c.size) continue;
      if (slot[i] != kGuard) {
        return Status::error(describe(c) + " " + what + ": work request " + std::to_string(k) +
                             " wrote outside its bytes (offset " +
                             std::to_string(static_cast<long>(i) - static_cast<long>(kSlotGuardBytes)) + ")");
      }
    }
  }
  return Status::success();
}

}  // namespace rdmad::vm
