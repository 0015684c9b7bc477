// rdmad-fabric as a process: CLI port spec, forwarding, the periodic stats line and --stats-json.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

#include "udp_peer.h"

namespace rdmad::fabric {
namespace {

TEST(FabricProcess, ForwardsAndReportsStats) {
  test::UdpPeer receiver;
  test::UdpPeer sender;
  const std::string json = testing::TempDir() + "fabric_stats.json";
  std::remove(json.c_str());
  const std::string cmd = std::string(RDMAD_FABRIC_BIN) +
                          " --port name=p0,listen=127.0.0.1:0,forward=" + receiver.endpoint().to_string() +
                          ",rate=100mbit,loss=0 --stats-interval-ms 50 --duration-s 1.5 --stats-json " + json;
  FILE* out = popen(cmd.c_str(), "r");
  ASSERT_NE(out, nullptr);
  char line[512];
  ASSERT_NE(fgets(line, sizeof line, out), nullptr);
  // "port p0: 127.0.0.1:<port> -> ..."
  const std::string first(line);
  const std::string prefix = "port p0: ";
  ASSERT_EQ(first.rfind(prefix, 0), 0u) << first;
  const Endpoint port =
      Endpoint::parse(first.substr(prefix.size(), first.find(' ', prefix.size()) - prefix.size()));
  ASSERT_NE(port.port(), 0) << first;
  for (uint64_t i = 0; i < 10; ++i) sender.send(port, test::numbered(i, 100), 2);
  const auto got = receiver.receive_all(10, std::chrono::seconds(5));
  ASSERT_EQ(got.size(), 10u);
  for (uint64_t i = 0; i < 10; ++i) EXPECT_EQ(got[i].data, test::numbered(i, 100));
  std::string rest;
  while (fgets(line, sizeof line, out) != nullptr) rest += line;
  EXPECT_EQ(pclose(out), 0);
  EXPECT_NE(rest.find("p0 q=0B/0p"), std::string::npos) << rest;
  EXPECT_NE(rest.find("rx=10p/1000B tx=10p/1000B"), std::string::npos) << rest;
  std::ifstream in(json);
  std::stringstream ss;
  ss << in.rdbuf();
  EXPECT_NE(ss.str().find(R"("name":"p0","rx_packets":10,"rx_bytes":1000,"tx_packets":10)"),
            std::string::npos)
      << ss.str();
}

TEST(FabricProcess, BadConfigExitsWithAnError) {
  const std::string cmd = std::string(RDMAD_FABRIC_BIN) + " --port listen=127.0.0.1:0,forward=nowhere 2>&1";
  FILE* out = popen(cmd.c_str(), "r");
  ASSERT_NE(out, nullptr);
  char line[512] = {};
  ASSERT_NE(fgets(line, sizeof line, out), nullptr);
  EXPECT_NE(std::string(line).find("bad address 'nowhere'"), std::string::npos) << line;
  EXPECT_NE(pclose(out), 0);
}

}  // namespace
}  // namespace rdmad::fabric
