// Failover recovery: the QPs of one NIC to a peer are rebuilt while the session and the other
// NIC's QPs stay up, and data moves byte-exact over every QP afterwards. Also the connector's
// per-NIC calls, advertised addresses, and rebuild messages that do not fit the session.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "soft_node.h"

namespace rdmad::peer::test {
namespace {

using verbs::QpState;

class PeerRebuildTest : public ::testing::Test {
 protected:
  void SetUp() override {
    verbs::soft::register_backend(reg_);
    na_ = std::make_unique<Node>(reg_);
    nb_ = std::make_unique<Node>(reg_, b_nic_count());
    b_ = std::make_unique<PeerChannel>(io_, config("node-b"));
    sb_ = std::make_unique<PeerSession>(*b_, nb_->factory());
    base::Status st = b_->start();
    ASSERT_TRUE(st.ok()) << st.message();
    auto ca = config("node-a");
    ca.peers.push_back(address_of("node-b", b_->listen_port()));
    a_ = std::make_unique<PeerChannel>(io_, ca);
    sa_ = std::make_unique<PeerSession>(*a_, na_->factory());
    record(*sa_, "a");
    record(*sb_, "b");
    st = a_->start();
    ASSERT_TRUE(st.ok()) << st.message();
    ASSERT_TRUE(run_until(io_, [&] { return sa_->ready("node-b") && sb_->ready("node-a"); }));
    src_.resize(kNics * kQpsPerNic * kSlice);
    dst_.assign(src_.size() + kGuard, 0xEE);
    verbs::test::fill_pattern(src_, 7);
    for (size_t i = 0; i < nb_->nics.size(); ++i) {
      src_mrs_.push_back(
          std::move(na_->nics[i].pd->reg_mr(src_.data(), src_.size(), verbs::kAccessLocalWrite).value()));
      dst_mrs_.push_back(std::move(
          nb_->nics[i]
              .pd->reg_mr(dst_.data(), dst_.size(), verbs::kAccessLocalWrite | verbs::kAccessRemoteWrite)
              .value()));
    }
  }

  virtual size_t b_nic_count() const { return kNics; }

  void record(PeerSession& s, const std::string& side) {
    s.set_on_nic_replacing([this, side](const std::string&, uint16_t nic, RebuildCause) {
      events_.push_back(side + " replacing " + std::to_string(nic));
    });
    s.set_on_nic_rebuilt([this, side](const std::string&, uint16_t nic, QpConnector& qps) {
      events_.push_back(side + " rebuilt " + std::to_string(nic));
      for (const auto& q : qps.qps()) {
        if (q.nic_index == nic) {
          EXPECT_EQ(q.qp->query().state, QpState::kRts) << side;
        }
      }
    });
  }
  int count(const std::string& event) const {
    return static_cast<int>(std::count(events_.begin(), events_.end(), event));
  }
  QpConnector& qa() { return *sa_->ready("node-b"); }
  QpConnector& qb() { return *sb_->ready("node-a"); }
  void write_all(uint8_t seed) {
    std::fill(dst_.begin(), dst_.end(), 0xEE);
    verbs::test::fill_pattern(src_, seed);
    write_everything(io_, *na_, qa(), src_, src_mrs_, dst_, dst_mrs_);
  }
  void send_endpoints(EndpointsKind kind, uint32_t session, uint16_t nic, std::vector<NicEndpoint> eps) {
    ASSERT_TRUE(
        a_->send("node-b", MessageType::kEndpoints,
                 encode(Endpoints{.kind = kind, .session = session, .nic_index = nic, .endpoints = eps})));
  }

  // Destroyed bottom-up: MRs, then sessions (QPs) and channels, then the nodes' PDs and CQs.
  verbs::BackendRegistry reg_;
  boost::asio::io_context io_;
  std::unique_ptr<Node> na_, nb_;
  std::unique_ptr<PeerChannel> b_;
  std::unique_ptr<PeerSession> sb_;
  std::unique_ptr<PeerChannel> a_;
  std::unique_ptr<PeerSession> sa_;
  std::vector<std::string> events_;
  std::vector<uint8_t> src_, dst_;
  std::vector<std::unique_ptr<verbs::MemoryRegion>> src_mrs_, dst_mrs_;
};

TEST_F(PeerRebuildTest, RebuildsOneNicAndLeavesTheOtherAlone) {
  std::vector<verbs::QueuePair*> a0, b0;
  for (uint16_t j = 0; j < kQpsPerNic; ++j) {
    a0.push_back(qa().qp(0, j));
    b0.push_back(qb().qp(0, j));
  }
  verbs::QueuePair* b1_old = qb().qp(1, 0);
  // NIC 1's path fails: node-a's QPs on it go to ERR.
  for (uint16_t j = 0; j < kQpsPerNic; ++j) {
    verbs::QpAttr e;
    e.state = QpState::kError;
    ASSERT_TRUE(qa().qp(1, j)->modify(e, verbs::kQpState).ok());
  }
  // The answering side is told before its old QPs go, and why the offerer rebuilds.
  std::vector<RebuildCause> b_causes;
  sb_->set_on_nic_replacing([&](const std::string& peer, uint16_t nic, RebuildCause cause) {
    EXPECT_EQ(peer, "node-a");
    EXPECT_EQ(nic, 1);
    EXPECT_EQ(qb().qp(1, 0), b1_old) << "still the old QP";
    b_causes.push_back(cause);
    events_.push_back("b replacing " + std::to_string(nic));
  });

  ASSERT_TRUE(sa_->rebuild("node-b", 1));
  EXPECT_FALSE(sa_->rebuild("node-b", 1)) << "a rebuild of NIC 1 is already running";
  EXPECT_EQ(qa().qp(1, 0), nullptr) << "fresh QPs are not connected before the answer";
  ASSERT_TRUE(run_until(io_, [&] { return count("b rebuilt 1") == 1; }));
  EXPECT_EQ(events_,
            (std::vector<std::string>{"a replacing 1", "b replacing 1", "a rebuilt 1", "b rebuilt 1"}));

  for (uint16_t j = 0; j < kQpsPerNic; ++j) {
    EXPECT_EQ(qa().qp(0, j), a0[j]) << "NIC 0's QPs are untouched";
    EXPECT_EQ(qb().qp(0, j), b0[j]);
    verbs::QueuePair* fresh_a = qa().qp(1, j);
    verbs::QueuePair* fresh_b = qb().qp(1, j);
    ASSERT_NE(fresh_a, nullptr);
    ASSERT_NE(fresh_b, nullptr);
    EXPECT_EQ(fresh_a->query().state, QpState::kRts);
    EXPECT_EQ(fresh_b->query().dest_qp_num, fresh_a->qp_num()) << "the fresh QPs are paired";
    EXPECT_EQ(fresh_a->query().dest_qp_num, fresh_b->qp_num());
  }
  write_all(3);  // every QP, both NICs, byte-exact
  EXPECT_EQ(sa_->counters().rebuilds, 1u);
  EXPECT_EQ(sb_->counters().rebuilds, 1u);
  EXPECT_EQ(sa_->counters().rebuilds_request_refused + sb_->counters().rebuilds_request_refused, 0u);
  EXPECT_EQ(sa_->counters().rebuild_failures + sb_->counters().rebuild_failures, 0u);
  EXPECT_EQ(sa_->counters().sessions_ready, 1u) << "the session itself stayed up";
  EXPECT_EQ(sa_->ready_peers(), std::vector<std::string>{"node-b"});
  EXPECT_EQ(sb_->ready_peers(), std::vector<std::string>{"node-a"});
  // A second rebuild of the same NIC works as well; this one after a refused request, and the
  // answering side hears so.
  b1_old = qb().qp(1, 0);
  ASSERT_TRUE(sa_->rebuild("node-b", 1, RebuildCause::kRequestRefused));
  ASSERT_TRUE(run_until(io_, [&] { return count("b rebuilt 1") == 2; }));
  EXPECT_EQ(b_causes, (std::vector<RebuildCause>{RebuildCause::kPathFault, RebuildCause::kRequestRefused}));
  EXPECT_EQ(sa_->counters().rebuilds_request_refused, 1u);
  EXPECT_EQ(sb_->counters().rebuilds_request_refused, 1u);
  write_all(4);
}

TEST_F(PeerRebuildTest, BothSidesRebuildingTheSameNicAgreeOnOneExchange) {
  ASSERT_TRUE(sa_->rebuild("node-b", 1));
  ASSERT_TRUE(sb_->rebuild("node-a", 1));
  ASSERT_TRUE(run_until(io_, [&] { return count("a rebuilt 1") == 1 && count("b rebuilt 1") == 1; }));
  run_for(io_, std::chrono::milliseconds(100));
  EXPECT_EQ(count("a rebuilt 1"), 1);
  EXPECT_EQ(count("b rebuilt 1"), 1);
  EXPECT_EQ(sa_->counters().rebuild_failures + sb_->counters().rebuild_failures, 0u);
  write_all(5);
}

TEST_F(PeerRebuildTest, RebuildRefusals) {
  EXPECT_FALSE(sa_->rebuild("node-z", 0)) << "no such peer";
  EXPECT_FALSE(sa_->rebuild("node-b", kNics)) << "no such NIC";
  EXPECT_TRUE(events_.empty()) << "nothing replaced";
  write_all(6);
}

TEST_F(PeerRebuildTest, StaleOrInconsistentRebuildMessagesLeaveTheSessionUp) {
  NicEndpoint ep = qa().qps().back().local;  // a well-formed endpoint of NIC 1
  ASSERT_EQ(ep.nic_index, 1);
  const uint32_t session = sa_->session_of("node-b");
  ASSERT_NE(session, 0u);
  EXPECT_EQ(sb_->session_of("node-a"), session) << "both sides know the session by one number";
  send_endpoints(EndpointsKind::kRebuildOffer, session + 1, 1, {ep});
  ASSERT_TRUE(run_until(io_, [&] { return sb_->counters().rebuild_stale == 1; }));
  // The current session: an offer for NIC 0 that carries a NIC 1 endpoint is refused; node-b
  // answers "failed", which node-a did not ask for.
  send_endpoints(EndpointsKind::kRebuildOffer, session, 0, {ep});
  ASSERT_TRUE(run_until(io_, [&] { return sa_->counters().rebuild_failures == 1; }));
  EXPECT_EQ(sb_->counters().rebuild_failures, 1u);
  send_endpoints(EndpointsKind::kRebuildAck, session, 1, {ep});  // nothing was answered
  ASSERT_TRUE(run_until(io_, [&] { return sb_->counters().rebuild_failures == 2; }));
  EXPECT_TRUE(events_.empty()) << "no QP was replaced";
  EXPECT_TRUE(a_->connected("node-b"));
  EXPECT_EQ(sa_->counters().setup_failures + sb_->counters().setup_failures, 0u);
  write_all(8);
}

TEST_F(PeerRebuildTest, FlowFramesReachTheOwner) {
  std::vector<std::pair<MessageType, std::vector<uint8_t>>> got;
  sb_->set_on_message([&](const std::string& peer, MessageType t, std::span<const uint8_t> p) {
    EXPECT_EQ(peer, "node-a");
    got.emplace_back(t, std::vector<uint8_t>(p.begin(), p.end()));
  });
  Grant g{.token = {1, 2, 3},
          .iova = 4096,
          .length = 8192,
          .rights = verbs::kAccessRemoteWrite,
          .keys = {{0, 11}, {1, 22}}};
  ASSERT_TRUE(a_->send("node-b", MessageType::kGrant, encode(g)));
  ASSERT_TRUE(
      a_->send("node-b", MessageType::kSendDone, encode(SendDone{.channel = 1, .recv_id = 2, .bytes = 3})));
  ASSERT_TRUE(run_until(io_, [&] { return got.size() == 2; }));
  EXPECT_EQ(got[0].first, MessageType::kGrant);
  EXPECT_EQ(decode_grant(got[0].second), g);
  EXPECT_EQ(got[1].first, MessageType::kSendDone);
  EXPECT_EQ(decode_send_done(got[1].second)->bytes, 3u);
}

// node-b has one NIC: NIC 1 of node-a has no partner, so node-b cannot answer a rebuild of it.
class PeerRebuildOneNicPeerTest : public PeerRebuildTest {
 protected:
  size_t b_nic_count() const override { return 1; }
};

TEST_F(PeerRebuildOneNicPeerTest, AFailedAnswerAbandonsTheRebuildOnBothSides) {
  ASSERT_EQ(qa().qps().size(), kQpsPerNic) << "only NIC 0 paired";
  verbs::QueuePair* a00 = qa().qp(0, 0);
  ASSERT_TRUE(sa_->rebuild("node-b", 1));
  ASSERT_TRUE(run_until(io_, [&] { return sa_->counters().rebuild_failures == 1; }));
  EXPECT_EQ(sb_->counters().rebuild_failures, 1u);
  EXPECT_EQ(count("a rebuilt 1"), 0);
  EXPECT_EQ(events_, std::vector<std::string>{"a replacing 1"}) << "node-b replaced nothing";
  EXPECT_TRUE(sa_->rebuild("node-b", 1)) << "the failed rebuild is no longer running";
  ASSERT_TRUE(run_until(io_, [&] { return sa_->counters().rebuild_failures == 2; }));
  EXPECT_EQ(qa().qp(0, 0), a00);
  EXPECT_NE(sa_->ready("node-b"), nullptr) << "the session stays ready";
  EXPECT_TRUE(a_->connected("node-b"));
}

TEST(PeerQpConnector, PrepareNicReplacesOnlyThatNicAndAdvertisesTheConfiguredAddress) {
  verbs::BackendRegistry reg;
  verbs::soft::register_backend(reg);
  Node na(reg), nb(reg);
  const auto relay = *verbs::Gid::from_ip("10.9.8.7");
  auto nics = na.local_nics();
  nics[1].advertise_gid = relay;
  nics[1].advertise_udp_port = 5555;
  QpConnectorOptions o;
  o.qps_per_nic = kQpsPerNic;
  QpConnector a(std::move(nics), o);
  auto b = nb.factory()("node-a");
  auto ea = a.prepare();
  auto eb = b->prepare();
  ASSERT_TRUE(ea.ok() && eb.ok());
  for (const NicEndpoint& e : *ea) {
    EXPECT_EQ(e.gid == relay, e.nic_index == 1) << "only NIC 1 advertises the relay";
    EXPECT_EQ(e.udp_port == 5555, e.nic_index == 1);
  }
  ASSERT_TRUE(a.connect(*eb).ok());
  ASSERT_TRUE(b->connect(*ea).ok());
  verbs::QueuePair* a00 = a.qp(0, 0);

  auto fresh = a.prepare_nic(1);
  ASSERT_TRUE(fresh.ok()) << fresh.status().message();
  ASSERT_EQ(fresh->size(), kQpsPerNic);
  for (const NicEndpoint& e : *fresh) {
    EXPECT_EQ(e.nic_index, 1);
    EXPECT_EQ(e.gid, relay);
    EXPECT_EQ(e.udp_port, 5555);
  }
  for (const auto& q : a.qps()) {
    if (q.nic_index == 1) {
      EXPECT_FALSE(q.connected);
      EXPECT_EQ(q.qp->query().state, QpState::kInit) << "fresh QPs wait in INIT";
    }
  }
  EXPECT_EQ(a.qp(0, 0), a00);
  EXPECT_EQ(a.qp(1, 0), nullptr);
  ASSERT_EQ(a.qps().size(), kNics * kQpsPerNic);
  for (size_t i = 1; i < a.qps().size(); ++i)
    EXPECT_LE(a.qps()[i - 1].nic_index, a.qps()[i].nic_index) << "ordered";
  auto fresh_b = b->prepare_nic(1);
  ASSERT_TRUE(fresh_b.ok());
  ASSERT_TRUE(b->connect_nic(1, *fresh).ok());
  // Endpoints of other NICs are ignored: with only NIC 0's, nothing pairs and the fresh QPs go.
  const std::vector<NicEndpoint> only_nic0(eb->begin(), eb->begin() + kQpsPerNic);
  EXPECT_FALSE(a.connect_nic(1, only_nic0).ok());
  EXPECT_EQ(a.qp(0, 0), a00) << "NIC 0 untouched by a failed connect_nic";
  ASSERT_TRUE(a.prepare_nic(1).ok());
  ASSERT_TRUE(a.connect_nic(1, *fresh_b).ok());
  EXPECT_EQ(a.qp(1, 1)->query().dest_qp_num, b->qp(1, 1)->qp_num());
  EXPECT_EQ(a.qp(0, 0), a00);
  EXPECT_FALSE(a.prepare_nic(kNics).ok());
  EXPECT_FALSE(a.connect_nic(kNics, *fresh_b).ok());
}

}  // namespace
}  // namespace rdmad::peer::test
