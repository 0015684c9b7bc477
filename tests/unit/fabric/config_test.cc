#include "rdmad/tools/fabric/config.h"

#include <gtest/gtest.h>

#include "rdmad/tools/fabric/port_stats.h"

namespace rdmad::fabric {
namespace {

TEST(FabricConfig, Rates) {
  EXPECT_EQ(parse_rate_bps("1gbit"), 1'000'000'000u);
  EXPECT_EQ(parse_rate_bps("2.5Gbit"), 2'500'000'000u);
  EXPECT_EQ(parse_rate_bps("250mbit"), 250'000'000u);
  EXPECT_EQ(parse_rate_bps("10kbit"), 10'000u);
  EXPECT_EQ(parse_rate_bps("1000000"), 1'000'000u);
  EXPECT_EQ(parse_rate_bps("40 gbps"), 40'000'000'000u);
  EXPECT_THROW(parse_rate_bps("fast"), std::invalid_argument);
  EXPECT_THROW(parse_rate_bps("1gbyte"), std::invalid_argument);
  EXPECT_THROW(parse_rate_bps("-1gbit"), std::invalid_argument);
  EXPECT_THROW(parse_rate_bps(""), std::invalid_argument);
}

TEST(FabricConfig, Sizes) {
  EXPECT_EQ(parse_bytes("200KB"), 200'000u);
  EXPECT_EQ(parse_bytes("64KiB"), 65'536u);
  EXPECT_EQ(parse_bytes("1MiB"), 1'048'576u);
  EXPECT_EQ(parse_bytes("1.5MB"), 1'500'000u);
  EXPECT_EQ(parse_bytes("1500"), 1'500u);
  EXPECT_THROW(parse_bytes("1 parsec"), std::invalid_argument);
}

TEST(FabricConfig, Endpoints) {
  EXPECT_EQ(Endpoint::parse("127.0.0.1:4791").to_string(), "127.0.0.1:4791");
  EXPECT_EQ(Endpoint::parse("[::1]:14791").to_string(), "[::1]:14791");
  EXPECT_EQ(Endpoint::parse("[::1]:14791").family(), AF_INET6);
  for (const char* bad : {"127.0.0.1", "127.0.0.1:", "127.0.0.1:65536", "::1:80", "[::1]80", "host:80", ""}) {
    EXPECT_THROW(Endpoint::parse(bad), std::invalid_argument) << bad;
  }
}

TEST(FabricConfig, Toml) {
  const FabricConfig c = parse_toml_config(R"(
seed = 100
stats_interval_ms = 250
stats_json = "/tmp/x.json"
[[port]]
name = "bottleneck"
listen = "127.0.0.1:14791"
forward = "127.0.0.1:4791"
rate = "1gbit"
buffer = "2MB"
kmin = "5KB"
kmax = "200KB"
pmax = 0.01
loss = 0.01
reorder = 0.02
duplicate = 0.03
reorder_hold_us = 500
[[port]]
listen = "[::1]:14792"
forward = "[::1]:4791"
rate = 1000000
ecn = false
seed = 7
)");
  ASSERT_EQ(c.ports.size(), 2u);
  EXPECT_EQ(c.stats_interval_ms, 250u);
  EXPECT_EQ(c.stats_json, "/tmp/x.json");
  const PortConfig& a = c.ports[0];
  EXPECT_EQ(a.name, "bottleneck");
  EXPECT_EQ(a.listen.port(), 14791);
  EXPECT_EQ(a.rate_bps, 1'000'000'000u);
  EXPECT_EQ(a.buffer_bytes, 2'000'000u);
  EXPECT_EQ(a.red, (cc::RedParams{5'000, 200'000, 0.01}));
  EXPECT_DOUBLE_EQ(a.loss, 0.01);
  EXPECT_DOUBLE_EQ(a.reorder, 0.02);
  EXPECT_DOUBLE_EQ(a.duplicate, 0.03);
  EXPECT_EQ(a.reorder_hold_us, 500u);
  EXPECT_EQ(a.seed, 100u) << "port i defaults to seed + i";
  const PortConfig& b = c.ports[1];
  EXPECT_EQ(b.name, "port1");
  EXPECT_EQ(b.rate_bps, 1'000'000u);
  EXPECT_FALSE(b.ecn);
  EXPECT_EQ(b.seed, 7u);
  EXPECT_NO_THROW(validate(c));
  const FabricConfig o = parse_toml_config("seed = 3\n[[port]]\n[[port]]\nseed = 9\n[[port]]\n", 50);
  ASSERT_EQ(o.ports.size(), 3u);
  EXPECT_EQ(o.ports[0].seed, 50u) << "the override replaces the document's seed";
  EXPECT_EQ(o.ports[1].seed, 9u) << "a port's own seed wins";
  EXPECT_EQ(o.ports[2].seed, 52u);
}

TEST(FabricConfig, TomlErrorsNameTheKey) {
  try {
    parse_toml_config("[[port]]\nlisten = \"127.0.0.1:1\"\nrat = \"1gbit\"\n");
    FAIL() << "no exception";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("unknown port key 'rat'"), std::string::npos) << e.what();
  }
  EXPECT_THROW(parse_toml_config("bogus = 1"), std::runtime_error);
  EXPECT_THROW(parse_toml_config("[[port]]\nrate = \"1 lightyear\""), std::runtime_error);
  EXPECT_THROW(parse_toml_config("not toml ="), std::runtime_error);
}

TEST(FabricConfig, PortSpecAndValidation) {
  PortConfig p = parse_port_spec("name=a,listen=127.0.0.1:0,forward=127.0.0.1:4791,rate=10mbit,loss=0.5");
  EXPECT_EQ(p.name, "a");
  EXPECT_EQ(p.rate_bps, 10'000'000u);
  EXPECT_DOUBLE_EQ(p.loss, 0.5);
  EXPECT_THROW(parse_port_spec("listen"), std::invalid_argument);
  FabricConfig c;
  EXPECT_THROW(validate(c), std::invalid_argument) << "no ports";
  c.ports.push_back(p);
  EXPECT_NO_THROW(validate(c));
  c.ports[0].loss = 1.5;
  EXPECT_THROW(validate(c), std::invalid_argument);
  c.ports[0] = p;
  c.ports[0].forward = Endpoint::parse("[::1]:4791");
  EXPECT_THROW(validate(c), std::invalid_argument) << "mixed address families";
  c.ports[0] = p;
  c.ports[0].red = {10, 5, 0.1};
  EXPECT_THROW(validate(c), std::invalid_argument) << "kmax < kmin";
}

TEST(FabricStats, LineAndJson) {
  PortStats s;
  s.rx_packets = 3;
  s.marked = 2;
  s.queue_bytes = 100;
  const std::string line = format_stats_line({"p\"0", s});
  EXPECT_NE(line.find("q=100B/0p"), std::string::npos) << line;
  EXPECT_NE(line.find("mark=2"), std::string::npos) << line;
  const std::string json = format_stats_json({{"p\"0", s}, {"p1", {}}});
  EXPECT_EQ(json.rfind("{\"ports\":[{\"name\":\"p\\\"0\",\"rx_packets\":3,", 0), 0u) << json;
  EXPECT_NE(json.find("\"marked\":2"), std::string::npos);
  EXPECT_NE(json.find("},{\"name\":\"p1\""), std::string::npos);
}

}  // namespace
}  // namespace rdmad::fabric
