// The DCQCN histograms of a real daemon: two peered rdmad processes with one soft NIC each and a
// flow between them; the daemon samples its QPs every second into rdmad_dcqcn_rate_bits_per_second
// (and, for one release, the deprecated rdmad_dcqcn_rate_mbps) and rdmad_dcqcn_alpha.
#include "integration/flow/flow_cluster.h"

namespace rdmad::test {
namespace {

std::string scrape(int port) {
  auto r = http_get("127.0.0.1", port, "/metrics");
  return r ? r->body : std::string();
}

// The value of `name{device="node-a0",port="1"<more>}` in a scraped body; -1 when absent.
double series(const std::string& body, const std::string& name, const std::string& more = "") {
  const std::string key = "\n" + name + "{device=\"node-a0\",port=\"1\"" + more + "} ";
  const size_t pos = body.find(key);
  if (pos == std::string::npos) return -1;
  return std::stod(body.substr(pos + key.size()));
}

NodeSpec one_nic_node(const std::string& id, int octet) {
  return NodeSpec{id, {NicSpec{fmt::format("127.0.0.{}", octet), 0, ""}}, "", "", 14};
}

TEST(DcqcnMetrics, ConnectedFlowIsSampledAtLineRate) {
  Pair pair(one_nic_node("node-a", 31), one_nic_node("node-b", 41));
  ASSERT_TRUE(pair.start());
  rdmad_flow* flow = nullptr;
  ASSERT_EQ(rdmad_flow_open(pair.a->client(), "node-b", nullptr, &flow), RDMAD_OK)
      << rdmad_last_error(pair.a->client());
  ASSERT_EQ(rdmad_flow_wait_connected(flow, 10000), RDMAD_OK) << pair.a->output();

  std::smatch m;
  const std::string out = pair.a->output();
  ASSERT_TRUE(std::regex_search(out, m, std::regex(R"(metrics url=http://127\.0\.0\.1:(\d+)/metrics)")));
  const int port = std::stoi(m[1]);
  // The first samples land within a second of the QPs reaching RTS.
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  std::string body;
  while (series(body, "rdmad_dcqcn_rate_bits_per_second_count") <= 0 && std::chrono::steady_clock::now() < deadline) {
    usleep(20'000);
    body = scrape(port);
  }
  const double count = series(body, "rdmad_dcqcn_rate_bits_per_second_count");
  ASSERT_GT(count, 0) << body << pair.a->output();
  // Loopback marks nothing: every flow is at the soft NIC's line rate (100 Gb/s), none below.
  EXPECT_EQ(series(body, "rdmad_dcqcn_rate_bits_per_second_bucket", ",le=\"50000000000\""), 0) << body;
  EXPECT_EQ(series(body, "rdmad_dcqcn_rate_bits_per_second_bucket", ",le=\"100000000000\""), count) << body;
  EXPECT_EQ(series(body, "rdmad_dcqcn_rate_bits_per_second_sum"), count * 100e9) << body;
  // The deprecated Mb/s twin has the same samples (a scrape is one snapshot of both).
  EXPECT_EQ(series(body, "rdmad_dcqcn_rate_mbps_count"), count) << body;
  EXPECT_EQ(series(body, "rdmad_dcqcn_rate_mbps_bucket", ",le=\"100000\""), count) << body;
  EXPECT_EQ(series(body, "rdmad_dcqcn_rate_mbps_sum"), count * 100000) << body;
  // One α per rate sample, and α ≤ 1.
  EXPECT_EQ(series(body, "rdmad_dcqcn_alpha_count"), count) << body;
  EXPECT_EQ(series(body, "rdmad_dcqcn_alpha_bucket", ",le=\"1\""), count) << body;
  rdmad_flow_close(flow);
}

}  // namespace
}  // namespace rdmad::test
