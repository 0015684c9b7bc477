// Several RC queue pairs per lane ([flow] qps_per_lane): two real daemons with two soft NICs each
// and four QPs per lane move WRITE, READ and SEND byte-exact over every QP of both lanes; a lane
// cut mid-transfer fails over byte-exact and comes back with all four QPs; a node with four and a
// node with one meet at one QP per lane, whichever of them dials.
#include <array>

#include "fabric_pair.h"

namespace rdmad::test {
namespace {

const std::string kFourQps = "[flow]\nqps_per_lane = 4\n";

// Chunks node `n` posted on QP `qp` of its lane on NIC `nic` (its own counter, per lane position).
double qp_chunks(const Node& n, int nic, int qp) {
  return n
      .metric(fmt::format("rdmad_flow_lane_qp_chunks_sent_total{{device=\"{}{}\",lane_qp=\"{}\"}}", n.id(), nic, qp))
      .value_or(-1);
}

double lane_qps(const Node& n, int nic) {
  return n.metric(fmt::format("rdmad_flow_lane_qps{{device=\"{}{}\"}}", n.id(), nic)).value_or(-1);
}

double chunks_on(const Node& n, int nic) {
  return n.metric(fmt::format("rdmad_balancer_chunks_sent_total{{device=\"{}{}\"}}", n.id(), nic)).value_or(-1);
}

// Every QP of the lane on `nic` got at least `share` of the lane's chunks (least-outstanding with
// ties taken in turn spreads them about evenly; a QP left out gets none).
void expect_every_qp_used(const Node& n, int nic, int qps, double share) {
  const double lane = chunks_on(n, nic);
  double sum = 0;
  std::string split;
  for (int j = 0; j < qps; ++j) {
    const double c = qp_chunks(n, nic, j);
    sum += c;
    split += fmt::format(" qp{} {:.0f}", j, c);
    EXPECT_GE(c, share * lane) << n.id() << nic << " lane_qp " << j << " of " << qps << ":" << split;
  }
  std::printf("%s%d: %.0f chunks,%s\n", n.id().c_str(), nic, lane, split.c_str());
  EXPECT_EQ(sum, lane) << "every chunk of the lane counted on exactly one of its QPs";
}

TEST(FlowLanes, FourQpsPerLaneCarryWriteReadAndSendByteExact) {
  Pair pair(two_nic_node("node-a", 11, kFourQps), two_nic_node("node-b", 21, kFourQps));
  ASSERT_TRUE(pair.start());
  Node& a = *pair.a;
  Node& b = *pair.b;
  rdmad_flow* fa = nullptr;
  rdmad_flow* fb = nullptr;
  ASSERT_NO_FATAL_FAILURE(open_both_ways(a, b, &fa, &fb));
  for (Node* n : {&a, &b})
    for (int nic : {0, 1})
      EXPECT_TRUE(eventually([&] { return lane_qps(*n, nic) == 4; }, 10s)) << n->id() << nic << " " << lane_qps(*n, nic);

  write_read_send_byte_exact(a, b, fa, fb, 256u << 20);

  // node-a posted every chunk (WRITE, READ and the SEND's WRITEs): all eight QPs carried some.
  for (int nic : {0, 1}) expect_every_qp_used(a, nic, 4, 0.10);
  EXPECT_EQ(a.metric("rdmad_balancer_failovers_total{device=\"node-a0\"}").value_or(-1), 0.0);
  EXPECT_EQ(a.metric("rdmad_balancer_failovers_total{device=\"node-a1\"}").value_or(-1), 0.0);
  rdmad_flow_close(fa);
  rdmad_flow_close(fb);
}

// Four QPs per lane on NICs of two datapath threads each: the daemon runs (and watches) both threads
// of every NIC, the lanes' QPs are spread over them, and WRITE, READ and SEND stay byte-exact.
TEST(FlowLanes, FourQpsPerLaneOnTwoDatapathThreadsPerNic) {
  NodeSpec sa = two_nic_node("node-a", 11, kFourQps), sb = two_nic_node("node-b", 21, kFourQps);
  for (NodeSpec* s : {&sa, &sb})
    for (NicSpec& nic : s->nics) nic.options = "datapath_threads = 2\n";
  Pair pair(std::move(sa), std::move(sb));
  ASSERT_TRUE(pair.start());
  Node& a = *pair.a;
  Node& b = *pair.b;
  for (Node* n : {&a, &b})
    for (int nic : {0, 1})
      for (const char* thread : {"", ".1"}) {
        const std::string watch =
            fmt::format("rdmad_thread_stalled{{thread=\"datapath:{}{}{}\"}}", n->id(), nic, thread);
        EXPECT_EQ(n->metric(watch).value_or(-1), 0.0) << watch << " not watched";
      }
  rdmad_flow* fa = nullptr;
  rdmad_flow* fb = nullptr;
  ASSERT_NO_FATAL_FAILURE(open_both_ways(a, b, &fa, &fb));
  write_read_send_byte_exact(a, b, fa, fb, 128u << 20);
  for (int nic : {0, 1}) expect_every_qp_used(a, nic, 4, 0.10);
  rdmad_flow_close(fa);
  rdmad_flow_close(fb);
}

// The failover test's cut (failover_test.cc, LinkCutMidTransfer...) with four QPs per lane: the lane
// through the fabric fails over as one — its four QPs go down together — the transfer completes
// byte-exact with exactly one completion, and the rebuilt lane carries chunks on four fresh QPs.
TEST(FlowLanes, LinkCutMidTransferFailsTheWholeLaneOverByteExact) {
  FabricPair fp("0", 14, "1MB", "qps_per_lane = 4\nmin_lane_fraction = 0\n");
  ASSERT_TRUE(fp.start()) << fp.a()->output() << fp.b()->output();
  Node& a = *fp.a();
  EXPECT_TRUE(eventually([&] { return lane_qps(a, 0) == 4 && lane_qps(*fp.b(), 0) == 4; }, 10s));
  const size_t n = 512u << 20;
  Buffer src(a.client(), n, kAllAccess);
  Buffer dst(fp.b()->client(), n, kAllAccess);
  fill(src.data(), n, 45);
  fill(dst.data(), n, 46);
  const rdmad_remote remote = fp.export_to_a(dst, n);
  ASSERT_EQ(rdmad_flow_write(fp.fa, 1, src.mr, 0, &remote, 0, n), RDMAD_OK);
  // Cut once every QP of the lane through the fabric carries traffic.
  ASSERT_TRUE(eventually(
      [&] {
        for (int j = 0; j < 4; ++j)
          if (qp_chunks(a, 0, j) < 2) return false;
        return true;
      },
      60s))
      << a.output();
  fp.fabric->cut();
  auto c = wait_completion(fp.fa, 240s);
  ASSERT_TRUE(c.has_value()) << a.output();
  EXPECT_EQ(c->status, RDMAD_OK);
  EXPECT_EQ(c->wr_id, 1u);
  EXPECT_EQ(first_difference(src.data(), dst.data(), n), -1);
  rdmad_completion extra{};
  EXPECT_EQ(rdmad_flow_poll(fp.fa, &extra, 1), 0) << "one request, one completion";
  // The lane failed over (again after each rejoin while the path stayed cut), never NIC 1's.
  const double failovers = a.metric("rdmad_balancer_failovers_total{device=\"node-a0\"}").value_or(0);
  EXPECT_GE(failovers, 1.0) << a.output();
  EXPECT_EQ(static_cast<double>(Node::occurrences(a.output(), "path failed nic=node-a0 peer=node-b")), failovers)
      << "one failover per lane failure, however many of its QPs reported it\n" << a.output();
  EXPECT_EQ(a.metric("rdmad_balancer_failovers_total{device=\"node-a1\"}").value_or(-1), 0.0);

  // The path comes back: the lane is rebuilt with four QPs, and each of them carries chunks again.
  ASSERT_TRUE(fp.fabric->start());
  std::array<double, 4> before{};
  for (int j = 0; j < 4; ++j) before[static_cast<size_t>(j)] = qp_chunks(a, 0, j);
  uint64_t wr = 100;
  EXPECT_TRUE(eventually(
      [&] {
        fill(src.data(), 8u << 20, wr);
        if (rdmad_flow_write(fp.fa, ++wr, src.mr, 0, &remote, 0, 8u << 20) != RDMAD_OK) return false;
        auto done = wait_completion(fp.fa, 60s);
        if (!done || done->status != RDMAD_OK || std::memcmp(src.data(), dst.data(), 8u << 20) != 0) return false;
        for (int j = 0; j < 4; ++j)
          if (qp_chunks(a, 0, j) <= before[static_cast<size_t>(j)]) return false;
        return true;
      },
      90s))
      << a.output();
  EXPECT_EQ(std::memcmp(src.data(), dst.data(), 8u << 20), 0);
  EXPECT_TRUE(eventually([&] { return lane_qps(a, 0) == 4; }, 10s));
}

// A node with four QPs per lane and one with one (a daemon that predates the key has one): the
// lanes get one QP on both sides, whichever node dials (and so offers its QPs first).
class FlowLanesMixed : public ::testing::TestWithParam<bool> {};

TEST_P(FlowLanesMixed, FourAndOneMeetAtOneQpPerLane) {
  const bool dialler_has_four = GetParam();
  Pair pair(two_nic_node("node-a", 11, dialler_has_four ? kFourQps : ""),
            two_nic_node("node-b", 21, dialler_has_four ? "" : kFourQps));
  ASSERT_TRUE(pair.start());  // node-a dials
  Node& a = *pair.a;
  Node& b = *pair.b;
  Node& four = dialler_has_four ? a : b;
  for (Node* n : {&a, &b})
    for (int nic : {0, 1})
      EXPECT_TRUE(eventually([&] { return lane_qps(*n, nic) == 1; }, 10s)) << n->id() << nic << " " << lane_qps(*n, nic);
  // Traffic both ways: each node posts on its own lanes.
  const size_t n = 64u << 20;
  for (Node* from : {&a, &b}) {
    Node& to = from == &a ? b : a;
    rdmad_flow* f = nullptr;
    ASSERT_EQ(rdmad_flow_open(from->client(), to.id().c_str(), nullptr, &f), RDMAD_OK);
    ASSERT_EQ(rdmad_flow_wait_connected(f, 10000), RDMAD_OK) << from->output();
    Buffer src(from->client(), n, kAllAccess);
    Buffer dst(to.client(), n, kAllAccess);
    fill(src.data(), n, 47);
    fill(dst.data(), n, 48);
    const rdmad_remote remote = export_and_import(to, dst, n, *from, f);
    ASSERT_EQ(rdmad_flow_write(f, 1, src.mr, 0, &remote, 0, n), RDMAD_OK);
    auto c = wait_completion(f, 120s);
    ASSERT_TRUE(c.has_value()) << from->output();
    EXPECT_EQ(c->status, RDMAD_OK);
    EXPECT_EQ(first_difference(src.data(), dst.data(), n), -1) << from->id() << " -> " << to.id();
    rdmad_flow_close(f);
  }
  // The node configured with four exports its four positions, and only the first carried chunks.
  for (int nic : {0, 1}) {
    EXPECT_GT(qp_chunks(four, nic, 0), 0);
    EXPECT_EQ(qp_chunks(four, nic, 0), chunks_on(four, nic));
    for (int j = 1; j < 4; ++j) EXPECT_EQ(qp_chunks(four, nic, j), 0.0) << four.id() << nic << " lane_qp " << j;
  }
}

INSTANTIATE_TEST_SUITE_P(WhoDials, FlowLanesMixed, ::testing::Bool(), [](const ::testing::TestParamInfo<bool>& p) {
  return p.param ? std::string("DiallerHasFour") : std::string("ListenerHasFour");
});

}  // namespace
}  // namespace rdmad::test
