// Two daemons' peer objects in one process: the peer channel over loopback TCP brings up RC QPs
// between their soft NICs (two NICs each, two QPs per NIC pair), then a real RDMA WRITE over every
// QP lands byte-exact. The peer's loss tears the QPs down; its return brings up fresh ones.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "soft_node.h"

namespace rdmad::peer::test {
namespace {

TEST(PeerQpSession, BringsUpQpsPerNicPairAndWritesByteExact) {
  verbs::BackendRegistry reg;
  verbs::soft::register_backend(reg);
  boost::asio::io_context io;
  Node na(reg), nb(reg);

  auto cb = config("node-b");
  auto b = std::make_unique<PeerChannel>(io, cb);
  auto sb = std::make_unique<PeerSession>(*b, nb.factory());
  base::Status st = b->start();
  ASSERT_TRUE(st.ok()) << st.message();
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
  st = a.start();
  ASSERT_TRUE(st.ok()) << st.message();
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
  st = b->start();
  ASSERT_TRUE(st.ok()) << st.message();
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
  ASSERT_TRUE(ea.ok() && eb.ok());
  ASSERT_EQ(ea->size(), 2 * kQpsPerNic);
  for (const NicEndpoint& e : *ea) {
    EXPECT_LE(e.psn, 0xFFFFFFu);
    EXPECT_EQ(e.gid, *verbs::Gid::from_ip("127.0.0.1"));
    EXPECT_NE(e.udp_port, 0) << "the soft NIC's bound port, not the configured 0";
  }
  ASSERT_TRUE(b->connect(*ea).ok());
  ASSERT_TRUE(a->connect(*eb).ok());
  EXPECT_EQ(a->qps().size(), kQpsPerNic) << "only NIC 0 has a partner";
  for (const auto& q : a->qps()) EXPECT_EQ(q.nic_index, 0);
  EXPECT_EQ(a->qp(1, 0), nullptr);
  EXPECT_NE(a->qp(0, 1), nullptr);
  auto again = a->prepare();
  ASSERT_TRUE(again.ok());
  const verbs::Status st = a->connect({});
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("no NIC pair in common"), std::string::npos) << st.message();
}

// [flow] qps_per_lane: each side offers or answers its own number of QPs per NIC and QP j pairs
// only with the peer's QP j, so a NIC pair ends up with the smaller number on both sides, whoever
// dials, and a rebuild of one NIC (offered by either side) keeps it.
TEST(PeerQpSession, QpsPerNicOfTwoNodesMeetAtTheSmaller) {
  verbs::BackendRegistry reg;
  verbs::soft::register_backend(reg);
  struct Case {
    uint32_t dialler, listener, want;
  };
  for (const Case c : {Case{4, 1, 1}, Case{1, 4, 1}, Case{4, 2, 2}, Case{4, 4, 4}}) {
    SCOPED_TRACE(fmt::format("dialler {} QPs per NIC, listener {}", c.dialler, c.listener));
    boost::asio::io_context io;
    Node na(reg), nb(reg);
    PeerChannel b(io, config("node-b"));
    PeerSession sb(b, nb.factory(c.listener));
    ASSERT_TRUE(b.start().ok());
    auto ca = config("node-a");
    ca.peers.push_back(address_of("node-b", b.listen_port()));
    PeerChannel a(io, ca);
    PeerSession sa(a, na.factory(c.dialler));
    int rebuilt = 0;
    auto count = [&](const std::string&, uint16_t, QpConnector&) { ++rebuilt; };
    sa.set_on_nic_rebuilt(count);
    sb.set_on_nic_rebuilt(count);
    ASSERT_TRUE(a.start().ok());
    ASSERT_TRUE(run_until(io, [&] { return sa.ready("node-b") && sb.ready("node-a"); }));
    auto check = [&](const char* when) {
      QpConnector& qa = *sa.ready("node-b");
      QpConnector& qb = *sb.ready("node-a");
      for (uint16_t n = 0; n < kNics; ++n) {
        const auto lane_a = qa.nic_qps(n);
        const auto lane_b = qb.nic_qps(n);
        ASSERT_EQ(lane_a.size(), c.want) << when << ", nic " << n;
        ASSERT_EQ(lane_b.size(), c.want) << when << ", nic " << n;
        for (uint16_t j = 0; j < c.want; ++j) {
          EXPECT_EQ(lane_a[j], qa.qp(n, j)) << "in QP index order";
          // QP j of one side is connected to QP j of the other, both ways.
          EXPECT_EQ(lane_a[j]->query().dest_qp_num, lane_b[j]->qp_num());
          EXPECT_EQ(lane_b[j]->query().dest_qp_num, lane_a[j]->qp_num());
          EXPECT_EQ(lane_a[j]->query().state, verbs::QpState::kRts);
          EXPECT_EQ(lane_b[j]->query().state, verbs::QpState::kRts);
        }
      }
    };
    check("bring-up");
    // Rebuilt together: every QP of NIC 0 is fresh, NIC 1's are untouched.
    const std::vector<verbs::QueuePair*> before1 = sa.ready("node-b")->nic_qps(1);
    ASSERT_TRUE(sa.rebuild("node-b", 0));
    ASSERT_TRUE(run_until(io, [&] { return rebuilt == 2; }));
    check("rebuild offered by the dialler");
    EXPECT_EQ(sa.ready("node-b")->nic_qps(1), before1);
    ASSERT_TRUE(sb.rebuild("node-a", 1));
    ASSERT_TRUE(run_until(io, [&] { return rebuilt == 4; }));
    check("rebuild offered by the listener");
    EXPECT_EQ(sa.counters().rebuild_failures + sb.counters().rebuild_failures, 0u);
  }
}

TEST(PeerQpConnector, RefusesMoreQpsThanALaneOrAHandshakeHolds) {
  verbs::BackendRegistry reg;
  verbs::soft::register_backend(reg);
  Node one(reg, 1);
  QpConnectorOptions o;
  o.qps_per_nic = kMaxQpsPerNic + 1;
  QpConnector too_many(one.local_nics(), o);
  auto r = too_many.prepare();
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("17 QPs per NIC (1..16)"), std::string::npos) << r.status().message();
  EXPECT_TRUE(too_many.qps().empty());
  // 16 NICs x 16 QPs would not fit the handshake's one-byte count: refused before any is made.
  std::vector<LocalNic> sixteen(16, one.local_nics().front());
  o.qps_per_nic = kMaxQpsPerNic;
  QpConnector over(sixteen, o);
  r = over.prepare();
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("16 NICs x 16 QPs per NIC exceed the 255"), std::string::npos)
      << r.status().message();
  EXPECT_TRUE(over.qps().empty());
}

TEST(PeerQpSession, InconsistentEndpointMessagesCloseTheConnection) {
  verbs::BackendRegistry reg;
  verbs::soft::register_backend(reg);
  boost::asio::io_context io;
  Node nb(reg);
  PeerChannel b(io, config("node-b"));
  PeerSession sb(b, nb.factory());
  base::Status st = b.start();
  ASSERT_TRUE(st.ok()) << st.message();
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
