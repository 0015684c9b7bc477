// The health verdict of rdmactl status: failing without a NIC up, degraded for a NIC or a
// configured peer that is not up or a failed reload, every finding named.
#include "rdmad/daemon/health.h"

#include <gtest/gtest.h>

namespace rdmad::daemon {
namespace {


HealthInput::NicState up(const std::string& name) { return {name, true, true, ""}; }

TEST(Health, AllNicsUpAndPeersReadyIsOk) {
  HealthInput in;
  in.nics = {up("rail0"), up("rail1")};
  in.peers = {{"node-b", "ready", true, ""}};
  const auto v = judge_health(in);
  EXPECT_EQ(v.health, Health::kOk);
  EXPECT_TRUE(v.reasons.empty());
  EXPECT_STREQ(to_string(v.health), "ok");
}

TEST(Health, NoNicUpIsFailingAndSaysWhyEachIsNot) {
  HealthInput in;
  in.nics = {{"rail0", false, false, "device mlx5_0: no such device"}, {"rail1", true, false, ""}};
  const auto v = judge_health(in);
  EXPECT_EQ(v.health, Health::kFailing);
  ASSERT_EQ(v.reasons.size(), 3u);
  EXPECT_EQ(v.reasons[0], "no NIC up");
  EXPECT_EQ(v.reasons[1], "nic rail0 out of service: device mlx5_0: no such device");
  EXPECT_EQ(v.reasons[2], "nic rail1 link down");
  EXPECT_STREQ(to_string(v.health), "failing");

  HealthInput none;
  EXPECT_EQ(judge_health(none).health, Health::kFailing);
  EXPECT_EQ(judge_health(none).reasons, std::vector<std::string>{"no NIC up: none configured"});
}

TEST(Health, OneNicDownIsDegraded) {
  HealthInput in;
  in.nics = {up("rail0"), {"rail1", true, false, ""}};
  const auto v = judge_health(in);
  EXPECT_EQ(v.health, Health::kDegraded);
  EXPECT_EQ(v.reasons, std::vector<std::string>{"nic rail1 link down"});
}

TEST(Health, ConfiguredPeerNotReadyIsDegradedWithItsLastError) {
  HealthInput in;
  in.nics = {up("rail0")};
  in.peers = {{"node-b", "down", true, "Connection refused"},
              {"node-c", "connected", true, ""},
              {"node-d", "ready", true, ""},
              // A peer that dialled this node and left: it dials again; not this node's problem.
              {"node-e", "down", false, "dead: no answer to keepalive"}};
  const auto v = judge_health(in);
  EXPECT_EQ(v.health, Health::kDegraded);
  EXPECT_EQ(v.reasons, (std::vector<std::string>{"peer node-b down: Connection refused",
                                                 "peer node-c connected, queue pairs not ready"}));
  EXPECT_STREQ(to_string(v.health), "degraded");
}

TEST(Health, FailedReloadIsDegradedAndDoesNotHideFailing) {
  HealthInput in;
  in.nics = {up("rail0")};
  in.last_reload_failed = true;
  auto v = judge_health(in);
  EXPECT_EQ(v.health, Health::kDegraded);
  EXPECT_EQ(v.reasons, std::vector<std::string>{"last reload failed: running on the previous configuration"});
  in.nics[0].link_up = false;
  v = judge_health(in);
  EXPECT_EQ(v.health, Health::kFailing);
  EXPECT_EQ(v.reasons.back(), "last reload failed: running on the previous configuration");
}

// Readiness (/readyz): a NIC up and, where peers were tried, one of them reachable.
TEST(Readiness, NicUpAndNoPeersIsReady) {
  HealthInput in;
  in.nics = {up("rail0")};
  const auto r = judge_readiness(in);
  EXPECT_TRUE(r.ready);
  EXPECT_TRUE(r.reasons.empty());
}

TEST(Readiness, NoNicUpIsNotReadyWithTheReasons) {
  HealthInput in;
  in.nics = {{"rail0", false, false, "no such device"}};
  in.peers = {{"node-b", "ready", true, ""}};
  const auto r = judge_readiness(in);
  EXPECT_FALSE(r.ready);
  ASSERT_EQ(r.reasons.size(), 2u);
  EXPECT_EQ(r.reasons[0], "no NIC up");
  EXPECT_EQ(r.reasons[1], "nic rail0 out of service: no such device");
}

TEST(Readiness, PeersTriedAndNoneReachableIsNotReady) {
  HealthInput in;
  in.nics = {up("rail0")};
  in.peers = {{"node-b", "connecting", true, "connection refused"}, {"node-c", "down", false, "tls: bad psk"}};
  const auto r = judge_readiness(in);
  EXPECT_FALSE(r.ready);
  ASSERT_GE(r.reasons.size(), 2u);
  EXPECT_EQ(r.reasons[0], "no peer reachable: 2 known, 2 tried");
  EXPECT_EQ(r.reasons[1], "peer node-b connecting: connection refused");
}

TEST(Readiness, OnePeerReachableIsReadyAndTheOthersAreNotes) {
  HealthInput in;
  in.nics = {up("rail0")};
  in.peers = {{"node-b", "connecting", true, "connection refused"}, {"node-c", "connected", false, ""}};
  const auto r = judge_readiness(in);
  EXPECT_TRUE(r.ready);
  EXPECT_EQ(r.reasons, std::vector<std::string>{"peer node-b connecting: connection refused"});
}

// Discovered peers whose sessions open lazily (on a node's first flow) and never failed are no
// evidence that the fabric is unreachable.
TEST(Readiness, DiscoveredPeersNotYetContactedAreReady) {
  HealthInput in;
  in.nics = {up("rail0")};
  in.peers = {{"node-b", "down", false, ""}, {"node-c", "down", false, ""}};
  EXPECT_TRUE(judge_readiness(in).ready);
  // Sessions closed as idle (either side asked) are no evidence either: a quiet node stays ready.
  in.peers.push_back({"node-e", "down", false, "idle: closed at this node's request (no flow on either side for idle_session_ms)"});
  in.peers.push_back({"node-f", "down", false, "idle: closed at the peer's request (no flow on either side for idle_session_ms)"});
  EXPECT_TRUE(judge_readiness(in).ready);
  in.peers.push_back({"node-d", "down", false, "connection refused"});
  EXPECT_FALSE(judge_readiness(in).ready);
}

}  // namespace
}  // namespace rdmad::daemon
