// rdmactl peers and status between two real daemons: a peer comes up ready on every rail with a
// measured round trip, and, once its daemon is gone, shows as down with the reason, which status
// reports as degraded.
#include <gtest/gtest.h>

#include <regex>
#include <string>
#include <vector>

#include "flow_cluster.h"

namespace rdmad::test {
namespace {

TEST(RdmactlPeers, ShowsStateRailsRttAndWhyAPeerIsDown) {
  Pair pair(two_nic_node("node-a", 1), two_nic_node("node-b", 3));
  ASSERT_TRUE(pair.start());
  Node& a = *pair.a;
  Node& b = *pair.b;
  const std::string b_address = fmt::format("127.0.0.1:{}", b.peer_port());
  std::string peers;
  // Ready on both rails, and a keepalive (every second) has measured the round trip.
  ASSERT_TRUE(eventually(
      [&] {
        peers = rdmactl(a, {"--json", "peers"});
        return peers.find("\"state\":\"ready\",\"dialled\":true,\"source\":\"static\",\"rails_up\":2,\"rails\":2,\"rtt_us\":") !=
                   std::string::npos &&
               peers.find("\"rtt_us\":null") == std::string::npos;
      },
      20s))
      << peers << a.output();
  EXPECT_NE(peers.find("{\"node_id\":\"node-b\",\"address\":\"" + b_address + "\",\"state\":\"ready\""),
            std::string::npos)
      << peers;
  EXPECT_NE(peers.find("\"last_error\":\"\"}]"), std::string::npos) << peers;
  // node-b was dialled: it knows node-a by the connection's address.
  const std::string on_b = rdmactl(b, {"--json", "peers"});
  EXPECT_TRUE(std::regex_search(on_b, std::regex(R"re(\{"node_id":"node-a","address":"127\.0\.0\.1:\d+","state":"(ready|connected)","dialled":false,"source":"accepted")re")))
      << on_b;
  const std::string table = rdmactl(a, {"peers"});
  EXPECT_TRUE(std::regex_search(table, std::regex("\nnode-b +" + std::regex_replace(b_address, std::regex(R"(\.)"), R"(\.)") +
                                                  R"( +ready +static +2/2 +\d+\.\d\d ms  \d{4}-\d\d-\d\dT\S+Z \(\d+s ago\) +-\n)")))
      << table;
  EXPECT_NE(rdmactl(a, {"status"}).find("\nhealth:   ok\n"), std::string::npos);
  EXPECT_NE(rdmactl(a, {"status"}).find("\npeers:    1 known, 1 ready\n"), std::string::npos);

  b.kill();
  ASSERT_TRUE(eventually(
      [&] {
        peers = rdmactl(a, {"--json", "peers"});
        return std::regex_search(peers, std::regex(R"re("state":"(down|connecting)".*"rtt_us":null.*"last_error":"[^"]+")re"));
      },
      20s))
      << peers;
  EXPECT_NE(peers.find("\"rails_up\":0,\"rails\":2"), std::string::npos) << peers;
  const std::string status = rdmactl(a, {"status"});
  EXPECT_TRUE(std::regex_search(status, std::regex(R"(\nhealth:   degraded: peer node-b (down|connecting): \S)"))) << status;
  EXPECT_NE(rdmactl(a, {"--json", "status"}).find("\"health\":\"degraded\",\"health_reasons\":[\"peer node-b "),
            std::string::npos);
}

}  // namespace
}  // namespace rdmad::test

namespace rdmad::test {
namespace {
// The harness itself: a NIC port it picked, taken by someone else before the daemon binds it, is
// picked again (Node::start).
TEST(FlowHarness, ANicPortTakenBeforeTheDaemonBindsItIsPickedAgain) {
  Pair pair(two_nic_node("node-a", 11), two_nic_node("node-b", 21));
  const int taken_port = pair.b->spec().nics[1].udp_port;
  int fd = ::socket(AF_INET, SOCK_DGRAM, 0);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(static_cast<uint16_t>(taken_port));
  sa.sin_addr.s_addr = htonl(0x7f000016);  // 127.0.0.22, node-b's NIC 1
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)), 0);
  ASSERT_TRUE(pair.start());
  EXPECT_NE(pair.b->spec().nics[1].udp_port, taken_port);
  ::close(fd);
}
}  // namespace
}  // namespace rdmad::test
