// Flows between two real daemons over dpdk NICs (backend = "dpdk": the RoCEv2 engine over DPDK
// ports): two rails per node, joined by net_memif (one shared-memory link per rail; node-b, which
// starts first, is the server: a memif client cannot start its port without its server), WRITE, READ and SEND byte-exact with two QPs per lane; and, as root, two
// rails of net_af_packet ports on veth pairs, one of which is cut mid-transfer (ip link set down):
// the lane fails over, the transfer completes byte-exact, and the rail carries chunks again once
// its link is back.
#include <map>

#include "fabric_pair.h"
#include "unit/verbs/veth_net.h"

namespace rdmad::test {
namespace {

using verbs::test::run_ip;
using verbs::test::VethPair;

// Rail `i` of node `side` (0: a, 1: b): 10.79.<i>.<side + 1> on `devargs`.
NicSpec dpdk_nic(int rail, int side, const std::string& devargs) {
  NicSpec n{fmt::format("10.79.{}.{}", rail, side + 1), 0, ""};
  n.backend = "dpdk";
  // memif has no MTU and af_packet reports 1500 whatever the veth carries: both links take 9000.
  n.options = fmt::format("devargs = \"{}\"\nmtu = 9000\nmbufs = 8191\n", devargs);
  return n;
}

NodeSpec dpdk_node(const std::string& id, std::vector<NicSpec> nics, const std::string& extra) {
  NodeSpec s = two_nic_node(id, id == "node-a" ? 11 : 21, extra);
  s.nics = std::move(nics);
  return s;
}

bool dpdk_built() {
  // The daemon's own answer: a build without DPDK refuses the backend in --check-config.
  TempDir dir;
  const std::string config = dir.write("c.toml", "[[nic]]\nname = \"x\"\nbackend = \"dpdk\"\naddress = \"10.0.0.1\"\n"
                                                 "devargs = \"net_null0\"\n");
  Subprocess p({binary("daemon/rdmad"), "--check-config", config});
  p.wait_exit(std::chrono::seconds(20));
  return p.output().find("invalid value \"dpdk\"") == std::string::npos;
}

double nic_tx_bytes(const Node& n, int nic) {
  return n.metric(fmt::format("rdmad_balancer_bytes_sent_total{{device=\"{}{}\"}}", n.id(), nic)).value_or(-1);
}

TEST(DpdkFlows, TwoDaemonsOverMemifMoveWriteReadSendByteExact) {
  if (!dpdk_built()) GTEST_SKIP() << "this build has no dpdk backend (RDMAD_WITH_DPDK off)";
  TempDir links;
  std::vector<NicSpec> a_nics, b_nics;
  for (int rail = 0; rail < 2; ++rail) {
    // No bsize or rsize: the backend's memif defaults (one 4352-byte slot per frame, 4096 slots; with
    // memif's own, three slots per frame and 1024 of them, the datapath lost packets by the hundred).
    const std::string socket = fmt::format(",socket={}/rail{}.sock,socket-abstract=no,id=0", links.path(), rail);
    a_nics.push_back(dpdk_nic(rail, 0, fmt::format("net_memif{},role=client{}", rail, socket)));
    b_nics.push_back(dpdk_nic(rail, 1, fmt::format("net_memif{},role=server{}", rail, socket)));
  }
  const std::string two_qps = "[flow]\nqps_per_lane = 2\n";
  Pair pair(dpdk_node("node-a", a_nics, two_qps), dpdk_node("node-b", b_nics, two_qps));
  ASSERT_TRUE(pair.start()) << pair.a->output() << pair.b->output();
  Node& a = *pair.a;
  Node& b = *pair.b;
  rdmad_flow* fa = nullptr;
  rdmad_flow* fb = nullptr;
  ASSERT_NO_FATAL_FAILURE(open_both_ways(a, b, &fa, &fb, 20000));
  // Every lane has passed its first path check (a zero-length WRITE per QP the moment the session
  // is ready; on a memif link just up, that first packet was now and then sent twice, 4 runs in
  // about 40): what follows is the data phase.
  auto retransmitted = [](const Node& n, int nic) {
    return n.metric(fmt::format("rdmad_retransmitted_packets_total{{device=\"{}{}\",port=\"1\"}}", n.id(), nic))
        .value_or(-1);
  };
  std::map<std::string, double> before;
  for (Node* n : {&a, &b})
    for (int nic : {0, 1}) {
      const std::string ok =
          fmt::format("rdmad_balancer_rejoin_checks_total{{device=\"{}{}\",result=\"ok\"}}", n->id(), nic);
      ASSERT_TRUE(eventually([&] { return n->metric(ok).value_or(0) >= 1; }, 10s)) << ok << "\n" << n->output();
      before[n->id() + std::to_string(nic)] = retransmitted(*n, nic);
    }
  write_read_send_byte_exact(a, b, fa, fb, 64u << 20);
  // A shared-memory link loses nothing while its rings hold the windows in flight.
  for (Node* n : {&a, &b})
    for (int nic : {0, 1})
      EXPECT_EQ(retransmitted(*n, nic), before[n->id() + std::to_string(nic)]) << n->id() << nic;
  // Both rails carried data, on ports whose links are up (state 4: ACTIVE).
  for (int nic : {0, 1}) {
    EXPECT_GT(nic_tx_bytes(a, nic), 0.0) << a.output();
    EXPECT_EQ(b.metric(fmt::format("rdmad_state_id{{device=\"node-b{}\",port=\"1\"}}", nic)).value_or(-1), 4.0);
  }
  rdmad_flow_close(fa);
  rdmad_flow_close(fb);
}

TEST(DpdkFlows, RailCutOverAfPacketFailsOverByteExactAndComesBack) {
  if (!dpdk_built()) GTEST_SKIP() << "this build has no dpdk backend (RDMAD_WITH_DPDK off)";
  std::string why;
  std::vector<std::unique_ptr<VethPair>> rails;
  for (int rail = 0; rail < 2; ++rail) {
    auto v = VethPair::create(&why);
    if (!v) GTEST_SKIP() << why;
    rails.push_back(std::move(v));
  }
  std::vector<NicSpec> a_nics, b_nics;
  for (int rail = 0; rail < 2; ++rail) {
    const std::string frames = ",framesz=4352,blocksz=69632,framecnt=512";
    a_nics.push_back(dpdk_nic(rail, 0, fmt::format("net_af_packet{},iface={}{}", rail, rails[rail]->a(), frames)));
    b_nics.push_back(dpdk_nic(rail, 1, fmt::format("net_af_packet{},iface={}{}", rail, rails[rail]->b(), frames)));
  }
  // A short QP timeout, so that the cut is noticed in a second (as the fabric failover tests do).
  const std::string flow = kFastRecovery + "min_lane_fraction = 0\n";
  NodeSpec sa = dpdk_node("node-a", a_nics, flow), sb = dpdk_node("node-b", b_nics, flow);
  sa.qp_timeout = sb.qp_timeout = 14;
  Pair pair(std::move(sa), std::move(sb));
  ASSERT_TRUE(pair.start()) << pair.a->output() << pair.b->output();
  Node& a = *pair.a;
  Node& b = *pair.b;
  rdmad_flow* fa = nullptr;
  ASSERT_EQ(rdmad_flow_open(a.client(), "node-b", nullptr, &fa), RDMAD_OK) << rdmad_last_error(a.client());
  ASSERT_EQ(rdmad_flow_wait_connected(fa, 20000), RDMAD_OK) << a.output() << b.output();
  const size_t n = 256u << 20;
  Buffer src(a.client(), n, kAllAccess);
  Buffer dst(b.client(), n, kAllAccess);
  fill(src.data(), n, 51);
  fill(dst.data(), n, 52);
  const rdmad_remote remote = export_and_import(b, dst, n, a, fa);
  ASSERT_EQ(rdmad_flow_write(fa, 1, src.mr, 0, &remote, 0, n), RDMAD_OK);
  // Cut rail 1 once it carries data: its veth goes down, frames stop both ways.
  ASSERT_TRUE(eventually([&] { return nic_tx_bytes(a, 1) > (8 << 20); }, 60s)) << a.output();
  ASSERT_TRUE(run_ip("link set " + rails[1]->a() + " down"));
  auto c = wait_completion(fa, 240s);
  ASSERT_TRUE(c.has_value()) << a.output();
  EXPECT_EQ(c->status, RDMAD_OK);
  EXPECT_EQ(first_difference(src.data(), dst.data(), n), -1);
  rdmad_completion extra{};
  EXPECT_EQ(rdmad_flow_poll(fa, &extra, 1), 0) << "one request, one completion";
  EXPECT_GE(a.metric("rdmad_balancer_failovers_total{device=\"node-a1\"}").value_or(0), 1.0) << a.output();
  EXPECT_EQ(a.metric("rdmad_balancer_failovers_total{device=\"node-a0\"}").value_or(-1), 0.0);

  // The cable is back: the lane is rebuilt and carries chunks again, byte-exact.
  ASSERT_TRUE(run_ip("link set " + rails[1]->a() + " up"));
  const double before = nic_tx_bytes(a, 1);
  uint64_t wr = 100;
  EXPECT_TRUE(eventually(
      [&] {
        fill(src.data(), 16u << 20, wr);
        if (rdmad_flow_write(fa, ++wr, src.mr, 0, &remote, 0, 16u << 20) != RDMAD_OK) return false;
        auto done = wait_completion(fa, 60s);
        if (!done || done->status != RDMAD_OK || std::memcmp(src.data(), dst.data(), 16u << 20) != 0) return false;
        return nic_tx_bytes(a, 1) > before;
      },
      120s))
      << a.output();
  EXPECT_EQ(std::memcmp(src.data(), dst.data(), 16u << 20), 0);
  rdmad_flow_close(fa);
}

}  // namespace
}  // namespace rdmad::test
