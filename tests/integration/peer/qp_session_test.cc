// Two daemons' peer objects in one process: the peer channel over loopback TCP brings up RC QPs
// between their soft NICs (two NICs each, two QPs per NIC pair), then a real RDMA WRITE over every
// QP lands byte-exact. The peer's loss tears the QPs down; its return brings up fresh ones.
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <thread>
#include <vector>

#include "peer_test_util.h"
#include "rdmad/peer/peer_session.h"
#include "rdmad/verbs/soft/soft_backend.h"
#include "unit/verbs/verbs_test_util.h"

namespace rdmad::peer::test {
namespace {

constexpr size_t kNics = 2;
constexpr uint32_t kQpsPerNic = 2;
constexpr size_t kSlice = 1 << 20;
constexpr size_t kGuard = 64;

// One node's NICs: soft devices on 127.0.0.1 with ephemeral UDP ports, a PD and CQs each.
struct Node {
  struct NicObjects {
    std::unique_ptr<verbs::Device> dev;
    std::unique_ptr<verbs::ProtectionDomain> pd;
    std::unique_ptr<verbs::CompletionQueue> scq;
    std::unique_ptr<verbs::CompletionQueue> rcq;
  };
  std::vector<NicObjects> nics;

  explicit Node(const verbs::BackendRegistry& reg, size_t nic_count = kNics) {
    for (size_t i = 0; i < nic_count; ++i) {
      verbs::DeviceConfig dc;
      dc.name = "soft" + std::to_string(i);
      dc.address = "127.0.0.1";
      dc.udp_port = 0;
      dc.cc_enabled = false;
      NicObjects n;
      n.dev = std::move(reg.open("soft", dc).value());
      n.pd = std::move(n.dev->alloc_pd().value());
      n.scq = std::move(n.dev->create_cq(1024).value());
      n.rcq = std::move(n.dev->create_cq(1024).value());
      nics.push_back(std::move(n));
    }
  }
  ~Node() {  // CQ → PD → device
    for (auto& n : nics) {
      n.scq.reset();
      n.rcq.reset();
      n.pd.reset();
      n.dev.reset();
    }
  }
  PeerSession::ConnectorFactory factory() {
    return [this](const std::string&) {
      std::vector<LocalNic> local;
      for (auto& n : nics) local.push_back({n.dev->info().name, n.dev.get(), n.pd.get(), n.scq.get(), n.rcq.get(), 1});
      QpConnectorOptions o;
      o.qps_per_nic = kQpsPerNic;
      o.timeout = 12;
      return std::make_unique<QpConnector>(std::move(local), o);
    };
  }
};

// Writes slice k of src into dst over every QP of `qps` (slice k on the k-th QP) and waits for
// every completion. dst_mrs[i] is dst registered on the peer's NIC i.
void write_everything(boost::asio::io_context& io, Node& node, QpConnector& qps, std::vector<uint8_t>& src,
                      const std::vector<std::unique_ptr<verbs::MemoryRegion>>& src_mrs, std::vector<uint8_t>& dst,
                      const std::vector<std::unique_ptr<verbs::MemoryRegion>>& dst_mrs) {
  ASSERT_EQ(qps.qps().size(), kNics * kQpsPerNic);
  size_t k = 0;
  for (const QpConnector::Qp& q : qps.qps()) {
    ASSERT_TRUE(q.connected);
    verbs::SendWr w;
    w.wr_id = k;
    w.opcode = verbs::WrOpcode::kRdmaWrite;
    w.sge = {reinterpret_cast<uint64_t>(src.data() + k * kSlice), kSlice, src_mrs[q.nic_index]->lkey()};
    w.remote_addr = reinterpret_cast<uint64_t>(dst.data() + k * kSlice);
    w.rkey = dst_mrs[q.remote.nic_index]->rkey();
    ASSERT_TRUE(q.qp->post_send({&w, 1}).is_ok());
    ++k;
  }
  std::vector<bool> done(k, false);
  size_t got = 0;
  const bool ok = run_until(io, [&] {
    for (auto& n : node.nics) {
      verbs::WorkCompletion wc[16];
      const size_t m = n.scq->poll(wc);
      for (size_t i = 0; i < m; ++i) {
        EXPECT_EQ(wc[i].status, verbs::WcStatus::kSuccess) << verbs::to_string(wc[i].status);
        EXPECT_LT(wc[i].wr_id, k);
        EXPECT_FALSE(done[wc[i].wr_id]) << "completed twice";
        done[wc[i].wr_id] = true;
        ++got;
      }
    }
    if (got < k) std::this_thread::yield();
    return got >= k;
  }, std::chrono::milliseconds(30000));
  ASSERT_TRUE(ok) << got << " of " << k << " writes completed";
  ASSERT_TRUE(std::equal(src.begin(), src.end(), dst.begin())) << "payload differs";
  for (size_t i = src.size(); i < dst.size(); ++i) ASSERT_EQ(dst[i], 0xEE) << "written past the end at " << i;
}

TEST(PeerQpSession, BringsUpQpsPerNicPairAndWritesByteExact) {
  verbs::BackendRegistry reg;
  verbs::soft::register_backend(reg);
  boost::asio::io_context io;
  Node na(reg), nb(reg);

  auto cb = config("node-b");
  auto b = std::make_unique<PeerChannel>(io, cb);
  auto sb = std::make_unique<PeerSession>(*b, nb.factory());
  std::string err;
  ASSERT_TRUE(b->start(err)) << err;
  const uint16_t b_port = b->listen_port();
  auto ca = config("node-a");
  ca.peers.push_back(address_of("node-b", b_port));
  PeerChannel a(io, ca);
  PeerSession sa(a, na.factory());
  int lost = 0;
  sa.set_on_lost([&](const std::string& p) {
    EXPECT_EQ(p, "node-b");
    ++lost;
  });
  ASSERT_TRUE(a.start(err)) << err;
  ASSERT_TRUE(run_until(io, [&] { return sa.ready("node-b") && sb->ready("node-a"); }));

  // Each side's QPs point at the other's: QPN and PSN of the pair match both ways.
  QpConnector& qa = *sa.ready("node-b");
  QpConnector& qb = *sb->ready("node-a");
  ASSERT_EQ(qa.qps().size(), kNics * kQpsPerNic);
  ASSERT_EQ(qb.qps().size(), kNics * kQpsPerNic);
  for (const QpConnector::Qp& q : qa.qps()) {
    EXPECT_EQ(q.remote.nic_index, q.nic_index) << "rail i pairs with rail i";
    const auto* peer = qb.qp(q.remote.nic_index, q.remote.qp_index);
    ASSERT_NE(peer, nullptr);
    EXPECT_EQ(peer->qp_num(), q.remote.qpn);
    EXPECT_EQ(peer->query().dest_qp_num, q.qp->qp_num());
    EXPECT_EQ(peer->query().rq_psn, q.local.psn);
    EXPECT_EQ(q.qp->query().state, verbs::QpState::kRts);
  }

  const size_t total = kNics * kQpsPerNic * kSlice;
  std::vector<uint8_t> src(total), dst(total + kGuard, 0xEE);
  verbs::test::fill_pattern(src, 1);
  std::vector<std::unique_ptr<verbs::MemoryRegion>> src_mrs, dst_mrs;
  for (size_t i = 0; i < kNics; ++i) {
    src_mrs.push_back(std::move(na.nics[i].pd->reg_mr(src.data(), src.size(), verbs::kAccessLocalWrite).value()));
    dst_mrs.push_back(std::move(
        nb.nics[i].pd->reg_mr(dst.data(), dst.size(), verbs::kAccessLocalWrite | verbs::kAccessRemoteWrite).value()));
  }
  write_everything(io, na, qa, src, src_mrs, dst, dst_mrs);
  EXPECT_EQ(sa.counters().sessions_ready, 1u);
  EXPECT_EQ(sb->counters().sessions_ready, 1u);

  // node-b's daemon goes away: node-a tears its QPs down ...
  dst_mrs.clear();
  sb.reset();
  b.reset();
  ASSERT_TRUE(run_until(io, [&] { return lost == 1; }));
  EXPECT_EQ(sa.ready("node-b"), nullptr);
  // ... and when it is back, fresh QPs carry a fresh write.
  cb.listen_port = b_port;
  b = std::make_unique<PeerChannel>(io, cb);
  sb = std::make_unique<PeerSession>(*b, nb.factory());
  ASSERT_TRUE(b->start(err)) << err;
  ASSERT_TRUE(run_until(io, [&] { return sa.ready("node-b") && sb->ready("node-a"); }));
  EXPECT_EQ(sa.counters().sessions_ready, 2u);
  std::fill(dst.begin(), dst.end(), 0xEE);
  verbs::test::fill_pattern(src, 2);
  for (size_t i = 0; i < kNics; ++i) {
    dst_mrs.push_back(std::move(
        nb.nics[i].pd->reg_mr(dst.data(), dst.size(), verbs::kAccessLocalWrite | verbs::kAccessRemoteWrite).value()));
  }
  write_everything(io, na, *sa.ready("node-b"), src, src_mrs, dst, dst_mrs);
  // The MRs go before the sessions' QPs and the nodes' PDs.
  src_mrs.clear();
  dst_mrs.clear();
}

TEST(PeerQpSession, QpsWithoutAPartnerNicAreDropped) {
  verbs::BackendRegistry reg;
  verbs::soft::register_backend(reg);
  Node two(reg, 2), one(reg, 1);
  auto a = two.factory()("node-b");
  auto b = one.factory()("node-a");
  auto ea = a->prepare();
  auto eb = b->prepare();
  ASSERT_TRUE(ea.is_ok() && eb.is_ok());
  ASSERT_EQ(ea->size(), 2 * kQpsPerNic);
  for (const NicEndpoint& e : *ea) {
    EXPECT_LE(e.psn, 0xFFFFFFu);
    EXPECT_EQ(e.gid, *verbs::Gid::from_ip("127.0.0.1"));
    EXPECT_NE(e.udp_port, 0) << "the soft NIC's bound port, not the configured 0";
  }
  ASSERT_TRUE(b->connect(*ea).is_ok());
  ASSERT_TRUE(a->connect(*eb).is_ok());
  EXPECT_EQ(a->qps().size(), kQpsPerNic) << "only NIC 0 has a partner";
  for (const auto& q : a->qps()) EXPECT_EQ(q.nic_index, 0);
  EXPECT_EQ(a->qp(1, 0), nullptr);
  EXPECT_NE(a->qp(0, 1), nullptr);
  auto again = a->prepare();
  ASSERT_TRUE(again.is_ok());
  const verbs::Status st = a->connect({});
  EXPECT_FALSE(st.is_ok());
  EXPECT_NE(st.message().find("no NIC pair in common"), std::string::npos) << st.message();
}

TEST(PeerQpSession, InconsistentEndpointMessagesCloseTheConnection) {
  verbs::BackendRegistry reg;
  verbs::soft::register_backend(reg);
  boost::asio::io_context io;
  Node nb(reg);
  PeerChannel b(io, config("node-b"));
  PeerSession sb(b, nb.factory());
  std::string err;
  ASSERT_TRUE(b.start(err)) << err;
  const std::vector<std::vector<uint8_t>> bad = {
      {9, 0, 0, 0, 1, 0},  // unknown kind
      encode(Endpoints{.kind = EndpointsKind::kAnswer, .session = 5, .endpoints = {}}),  // no offer made
      encode(Endpoints{.kind = EndpointsKind::kAck, .session = 5, .endpoints = {}}),     // nothing answered
  };
  uint64_t failures = 0;
  for (const auto& payload : bad) {
    boost::asio::ip::tcp::socket s(io);
    s.connect({boost::asio::ip::make_address("127.0.0.1"), b.listen_port()});
    Hello h;
    h.node_id = "node-x";
    write_frame(s, MessageType::kHello, encode(h));
    write_frame(s, MessageType::kReady, {});
    ASSERT_TRUE(run_until(io, [&] { return b.connected("node-x"); }));
    write_frame(s, MessageType::kEndpoints, payload);
    ASSERT_TRUE(run_until(io, [&] { return !b.connected("node-x"); }));
    EXPECT_EQ(sb.counters().setup_failures, ++failures);
    EXPECT_EQ(sb.ready("node-x"), nullptr);
  }
}

}  // namespace
}  // namespace rdmad::peer::test
