// The scenario language (issue 25, item 1): [[topology.node]] / [[topology.link]] lists, the rail
// generator, per-link delays and PFC settings, [[traffic.source]] of every kind, and errors that
// name the file, line and key.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <stdexcept>

#include "rdmad/sim/scenario.h"
#include "rdmad/sim/topology.h"
#include "rdmad/sim/traffic.h"

namespace rdmad::sim {
namespace {

using ::testing::HasSubstr;

Scenario parse(const std::string& text, const std::vector<std::string>& o = {}) {
  return parse_scenario(text, std::filesystem::path(RDMAD_SOURCE_DIR) / "sim" / "workloads", o, "s.toml");
}

std::string error_of(const std::string& text, const std::vector<std::string>& o = {}) {
  try {
    parse(text, o);
  } catch (const std::runtime_error& e) {
    return e.what();
  }
  return "no error";
}

// Two switches, three hosts (one with two NICs), written out.
const char* kCustom = R"(
[topology]
host_link_gbps = 25
link_delay_ns = 700
[[topology.node]]
name = "h"
count = 2
[[topology.node]]
name = "g"
nics = 2
[[topology.node]]
name = "s0"
kind = "switch"
[[topology.node]]
name = "s1"
kind = "switch"
buffer_bytes = 1000000
[[topology.link]]
a = "h0..h1"
b = "s0"
[[topology.link]]
a = "g.nic0..g.nic1"
b = "s0..s1"
delay_ns = 300
[[topology.link]]
a = "s0"
b = "s1"
gbps = 40
delay_ns = 5000
headroom_bytes = 90000
pfc_xoff_bytes = 30000
pfc_xon_bytes = 20000
)";

TEST(ScenarioLanguage, CustomTopologyFromNodesAndLinks) {
  const Scenario s = parse(kCustom);
  EXPECT_EQ(s.topology.kind, TopologyKind::kCustom);  // implied by [[topology.node]]
  ASSERT_EQ(s.topology.nodes.size(), 4u);
  EXPECT_EQ(s.topology.nodes[0].count, 2u);
  EXPECT_EQ(s.topology.nodes[1].nics, 2u);
  EXPECT_FALSE(s.topology.nodes[3].host);
  EXPECT_EQ(s.topology.nodes[3].buffer_bytes, 1'000'000u);
  ASSERT_EQ(s.topology.links.size(), 3u);
  EXPECT_EQ(s.topology.links[2].loc.where("gbps"), "s.toml:28");

  const Topology t = build_topology(s.topology);
  EXPECT_EQ(t.hosts, 4u);  // h0, h1, g.nic0, g.nic1
  EXPECT_EQ(t.switches, 2u);
  EXPECT_EQ(t.host_names, (std::vector<std::string>{"h0", "h1", "g.nic0", "g.nic1"}));
  ASSERT_EQ(t.machines.size(), 3u);
  EXPECT_EQ(t.machines[2].name, "g");
  EXPECT_EQ(t.machines[2].nics, (std::vector<uint32_t>{2, 3}));
  EXPECT_EQ(t.switch_buffer_bytes, (std::vector<uint64_t>{0, 1'000'000}));
  ASSERT_EQ(t.links.size(), 5u);
  // h0, h1 → s0 at the defaults; g.nic0 → s0, g.nic1 → s1 at 300 ns; s0–s1 as written.
  EXPECT_EQ(t.links[0].gbps, 25);
  EXPECT_EQ(t.links[0].delay_ns, 700);
  EXPECT_EQ(t.links[3].b, t.hosts + 1);
  EXPECT_EQ(t.links[3].delay_ns, 300);
  EXPECT_EQ(t.links[4].gbps, 40);
  EXPECT_EQ(t.links[4].delay_ns, 5000);
  EXPECT_EQ(t.links[4].headroom_bytes, 90'000u);
  EXPECT_EQ(t.links[4].pfc_xoff_bytes, 30'000u);
  EXPECT_EQ(t.links[4].pfc_xon_bytes, 20'000u);
  // Custom: every switch port facing a NIC is a bottleneck.
  EXPECT_EQ(t.bottlenecks.size(), 4u);
}

TEST(ScenarioLanguage, LinksAmendAGeneratedTopologyAndGeneratorsTakePerKindDelays) {
  const Scenario s = parse(R"(
[topology]
kind = "dumbbell"
senders = 2
host_link_delay_ns = 200
fabric_link_delay_ns = 100000
bottlenecks = ["right->host2"]
[[topology.link]]
a = "host0"
b = "left"
gbps = 10
[[topology.node]]
name = "extra"
[[topology.link]]
a = "extra"
b = "right"
)");
  const Topology t = build_topology(s.topology);
  EXPECT_EQ(t.hosts, 5u);  // host0..host3, then extra
  EXPECT_EQ(t.host_names[4], "extra");
  EXPECT_EQ(t.links.size(), 6u);
  EXPECT_EQ(t.links[0].gbps, 10);  // amended in place
  EXPECT_EQ(t.links[0].delay_ns, 200);
  EXPECT_EQ(t.links[4].delay_ns, 100000);  // left–right
  EXPECT_EQ(t.links[5].delay_ns, 200);     // extra–right: a host link
  ASSERT_EQ(t.bottlenecks.size(), 1u);
  EXPECT_EQ(t.bottlenecks[0], std::make_pair(t.hosts + 1, 2u));
}

TEST(ScenarioLanguage, RailGeneratorKeys) {
  const Scenario s =
      parse("[topology]\nkind = \"rail\"\nhosts = 4\nrails = 2\nleaves_per_rail = 2\nspines = 3\n");
  EXPECT_EQ(s.topology.kind, TopologyKind::kRail);
  const Topology t = build_topology(s.topology);
  EXPECT_EQ(t.hosts, 8u);
  EXPECT_EQ(t.switch_names, (std::vector<std::string>{"leaf0_0", "leaf0_1", "leaf1_0", "leaf1_1", "spine0",
                                                      "spine1", "spine2"}));
  EXPECT_EQ(t.links.size(), 8u + 4 * 3);
}

TEST(ScenarioLanguage, EveryKindOfSource) {
  const std::string dir = ::testing::TempDir();
  {
    std::ofstream out(dir + "/flows.csv");
    out << "src,dst,size_bytes,start_us\n# a comment\nhost1,host2,3000,4.5\n";
  }
  const Scenario s = parse(R"(
[topology]
kind = "leafspine"
leaves = 2
hosts_per_leaf = 4
[[traffic.source]]
kind = "flows"
src = ["host0", "host1"]
dst = "host7"
size_bytes = 0
stagger_us = 10
[[traffic.source]]
kind = "incast"
dst = "host3"
src = "host4..host6"
size_bytes = 5000
at_us = [100, 250.5]
[[traffic.source]]
kind = "poisson"
cdf = "websearch.cdf"
load = 0.4
flow_count = 7
[[traffic.source]]
kind = "list"
flows = [{src = "host0", dst = "host5", size_bytes = 1000, start_us = 2}]
file = ")" + dir + R"(/flows.csv"
[[traffic.source]]
kind = "allreduce"
name = "ar"
hosts = "host0..host3"
size_bytes = 4000
algorithm = "halving_doubling"
[[traffic.source]]
kind = "alltoall"
size_bytes = 100
start_us = 9
)");
  const auto& src = s.traffic.sources;
  ASSERT_EQ(src.size(), 6u);
  EXPECT_EQ(src[0].kind, SourceKind::kFlows);
  EXPECT_EQ(src[0].src, (std::vector<std::string>{"host0", "host1"}));
  EXPECT_DOUBLE_EQ(src[0].stagger_us, 10);
  EXPECT_EQ(src[1].at_us, (std::vector<double>{100, 250.5}));
  EXPECT_EQ(src[2].hosts, std::vector<std::string>{"all"});
  EXPECT_EQ(src[2].cdf, std::filesystem::path(RDMAD_SOURCE_DIR) / "sim/workloads/websearch.cdf");
  ASSERT_EQ(src[3].flows.size(), 2u);
  EXPECT_EQ(src[3].flows[0].at, "s.toml:25");
  EXPECT_EQ(src[3].flows[1].at, dir + "/flows.csv:3");
  EXPECT_DOUBLE_EQ(src[3].flows[1].start_us, 4.5);
  EXPECT_EQ(src[4].name, "ar");
  EXPECT_EQ(src[4].algorithm, CollectiveAlgorithm::kHalvingDoubling);
  EXPECT_EQ(src[5].name, "alltoall5");  // the default label: kind and index

  const Traffic t = make_traffic(s, build_topology(s.topology));
  // 2 flows + 3·2 incast + 7 Poisson + 2 listed + 4·2·2 halving-doubling + 8·7 all-to-all.
  EXPECT_EQ(t.flows.size(), 2u + 6 + 7 + 2 + 16 + 56);
  ASSERT_EQ(t.collectives.size(), 2u);
  EXPECT_EQ(t.collectives[0].phases.size(), 4u);
  EXPECT_EQ(t.incast_flows.size(), 6u);
  EXPECT_TRUE(t.jain_windows);
  for (size_t i = 1; i < t.flows.size(); ++i) ASSERT_LE(t.flows[i - 1].start_ns, t.flows[i].start_ns);
}

TEST(ScenarioLanguage, SetReachesAnEntryOfAListByItsIndex) {
  const Scenario s = parse(
      "[topology]\nsenders = 3\n[[traffic.source]]\nkind = \"incast\"\ndst = \"host3\"\n"
      "size_bytes = 1\n[[traffic.source]]\nkind = \"flows\"\nsrc = \"host0\"\ndst = \"host1\"\n",
      {"traffic.source.1.size_bytes=77", "traffic.source.0.at_us=[5]"});
  EXPECT_EQ(s.traffic.sources[1].size_bytes, 77u);
  EXPECT_EQ(s.traffic.sources[0].at_us, std::vector<double>{5});
  EXPECT_THAT(error_of("[[traffic.source]]\nkind = \"flows\"\nsrc = \"host0\"\ndst = \"host1\"\n",
                       {"traffic.source.3.size_bytes=1"}),
              HasSubstr("traffic.source has 1 entries; name one by its index"));
}

TEST(ScenarioLanguage, ErrorsNameTheFileLineAndKey) {
  // Topology lists.
  EXPECT_EQ(error_of("[[topology.node]]\nname = \"a\"\nnicks = 2\n"),
            "s.toml:3: unknown key 'topology.node.nicks' (a node has name, kind, count, nics, buffer_bytes)");
  EXPECT_EQ(error_of("[[topology.node]]\nname = \"a\"\nkind = \"router\"\n"),
            "s.toml:3: key 'topology.node.kind': unknown value 'router' (host, switch)");
  EXPECT_EQ(error_of("[[topology.node]]\nname = \"a\"\n[[topology.node]]\nname = \"s\"\nkind = \"switch\"\n"
                     "[[topology.link]]\na = \"a\"\nb = \"t\"\n"),
            "s.toml:8: key 'topology.link.b': no node named 't'");
  EXPECT_EQ(
      error_of(
          "[[topology.node]]\nname = \"g\"\nnics = 2\n[[topology.node]]\nname = \"s\"\nkind = \"switch\"\n"
          "[[topology.link]]\na = \"g\"\nb = \"s\"\n"),
      "s.toml:8: key 'topology.link.a': host 'g' has 2 NICs: link one of them ('g.nic0')");
  EXPECT_EQ(error_of("[[topology.node]]\nname = \"a\"\n[[topology.node]]\nname = \"s\"\nkind = \"switch\"\n"
                     "[[topology.link]]\na = \"a\"\nb = \"s\"\ngbps = \"fast\"\n"),
            "s.toml:9: key 'topology.link.gbps' has the wrong type or range");
  EXPECT_EQ(
      error_of(
          "[[topology.node]]\nname = \"a\"\ncount = 2\n[[topology.node]]\nname = \"s\"\nkind = \"switch\"\n"
          "[[topology.link]]\na = \"a0..a1x\"\nb = \"s\"\n"),
      "s.toml:7: key 'topology.link': 'a0..a1x' is not a range (like \"host0..host7\")");
  EXPECT_EQ(
      error_of(
          "[[topology.node]]\nname = \"a\"\ncount = 2\n[[topology.node]]\nname = \"s\"\nkind = \"switch\"\n"
          "[[topology.link]]\na = \"a0\"\nb = \"s\"\n"),
      "s.toml:1: key 'topology.node': NIC 'a1' has no link ([[topology.link]])");
  EXPECT_THAT(error_of("[[topology.node]]\nname = \"a\"\n[[topology.node]]\nname = \"s\"\nkind = \"switch\"\n"
                       "[[topology.node]]\nname = \"t\"\nkind = \"switch\"\n"
                       "[[topology.link]]\na = \"a\"\nb = \"s\"\n[[topology.link]]\na = \"a\"\nb = \"t\"\n"),
              HasSubstr("s.toml:12: key 'topology.link': NIC 'a' has a second link"));
  EXPECT_EQ(error_of("[[topology.node]]\nname = \"a b\"\n"),
            "s.toml:2: key 'topology.node.name': 'a b' is not a name (letters, digits, _ and -)");
  EXPECT_EQ(error_of("[topology]\nkind = \"star\"\nbottlenecks = [\"sw0->host99\"]\n"),
            "s.toml:3: key 'topology.bottlenecks': 'sw0->host99' is not a port (\"from->to\" of a link)");
  EXPECT_EQ(
      error_of("[topology]\nkind = \"rail\"\nrails = 0\n"),
      "s.toml:2: topology.kind = \"rail\" needs topology.hosts, topology.rails >= 1 and 1 <= leaves_per_rail "
      "<= hosts");

  // Sources.
  const std::string star = "[topology]\nsenders = 3\n";  // host0..host3
  EXPECT_EQ(
      error_of(star + "[[traffic.source]]\nkind = \"bursty\"\n"),
      "s.toml:4: key 'traffic.source.kind': unknown value 'bursty' (flows, list, incast, poisson, allreduce, "
      "alltoall)");
  EXPECT_EQ(error_of(star + "[[traffic.source]]\nsrc = \"host0\"\n"),
            "s.toml:3: key 'traffic.source.kind' is required");
  EXPECT_EQ(
      error_of(star + "[[traffic.source]]\nkind = \"incast\"\ndst = \"host3\"\nsize_bytes = 1\nload = 0.5\n"),
      "s.toml:7: unknown key 'traffic.source.load' (a 'incast' source has kind, start_us, src, dst, "
      "size_bytes, "
      "at_us, bursts, burst_interval_us)");
  EXPECT_EQ(error_of(star + "[[traffic.source]]\nkind = \"flows\"\nsrc = \"host0\"\ndst = \"hots3\"\n"),
            "s.toml:6: key 'traffic.source.dst': no NIC or host named 'hots3'");
  EXPECT_EQ(error_of(star + "[[traffic.source]]\nkind = \"flows\"\nsrc = [\"host0\", \"host1\"]\n"
                            "dst = [\"host1\", \"host2\", \"host3\"]\n"),
            "s.toml:6: key 'traffic.source.dst': 2 sources and 3 destinations do not pair up");
  EXPECT_EQ(error_of(star + "[[traffic.source]]\nkind = \"flows\"\nsrc = \"host0\"\n"),
            "s.toml:5: key 'traffic.source.src': a 'flows' source needs src and dst");
  EXPECT_EQ(error_of(star + "[[traffic.source]]\nkind = \"incast\"\ndst = \"host3\"\n"),
            "s.toml:3: key 'traffic.source.size_bytes': a 'incast' source needs size_bytes > 0");
  EXPECT_EQ(
      error_of(star +
               "[[traffic.source]]\nkind = \"incast\"\ndst = \"host3\"\nsize_bytes = 1\nat_us = [1, -2]\n"),
      "s.toml:7: key 'traffic.source.at_us' needs a list of non-negative numbers");
  EXPECT_EQ(error_of(star + "[[traffic.source]]\nkind = \"poisson\"\ncdf = \"websearch.cdf\"\nload = 1.5\n"
                            "flow_count = 3\n"),
            "s.toml:6: key 'traffic.source.load': a 'poisson' source needs 0 < load <= 1");
  EXPECT_THAT(
      error_of(star +
               "[[traffic.source]]\nkind = \"poisson\"\ncdf = \"nope.cdf\"\nload = 0.5\nflow_count = 3\n"),
      HasSubstr("s.toml:5: key 'traffic.source.cdf': "));
  EXPECT_EQ(
      error_of(star + "[[traffic.source]]\nkind = \"allreduce\"\nhosts = \"host0..host2\"\nsize_bytes = 9\n"
                      "algorithm = \"halving_doubling\"\n"),
      "s.toml:7: key 'traffic.source.algorithm': halving_doubling needs a power of two of hosts (3 named)");
  EXPECT_EQ(
      error_of(star +
               "[[traffic.source]]\nkind = \"alltoall\"\nhosts = [\"host0\", \"host0\"]\nsize_bytes = 9\n"),
      "s.toml:5: key 'traffic.source.hosts': host 'host0' is named twice");
  EXPECT_EQ(
      error_of(star + "[[traffic.source]]\nkind = \"list\"\nflows = [{src = \"host0\", dst = \"host9\", "
                      "size_bytes = 5}]\n"),
      "s.toml:5: key 'traffic.source.flows.dst': no NIC or host named 'host9'");
  EXPECT_EQ(
      error_of(star + "[[traffic.source]]\nkind = \"list\"\nflows = [{src = \"host0\", dst = \"host1\"}]\n"),
      "s.toml:5: key 'traffic.source.flows': each flow needs src, dst and size_bytes > 0");
  // The single [traffic] source and a list do not mix.
  EXPECT_EQ(
      error_of(star + "[traffic]\nkind = \"incast\"\n[[traffic.source]]\nkind = \"flows\"\nsrc = \"host0\"\n"
                      "dst = \"host1\"\n"),
      "s.toml:4: key 'traffic.kind' describes the single source of [traffic]; with [[traffic.source]] "
      "entries, give it to one of them");
  // Multi-NIC hosts: flows name NICs, collectives name hosts.
  const std::string rail = "[topology]\nkind = \"rail\"\nhosts = 2\nrails = 2\n";
  EXPECT_EQ(error_of(rail + "[[traffic.source]]\nkind = \"flows\"\nsrc = \"host0\"\ndst = \"host1.nic0\"\n"),
            "s.toml:7: key 'traffic.source.src': host 'host0' has 2 NICs: name one ('host0.nic0')");
  EXPECT_EQ(error_of(rail + "[[traffic.source]]\nkind = \"allreduce\"\nhosts = [\"host0.nic0\", \"host1\"]\n"
                            "size_bytes = 9\n"),
            "s.toml:7: key 'traffic.source.hosts': no host named 'host0.nic0' (it is a NIC; name its host)");
}

TEST(ScenarioLanguage, FlowFileErrorsNameItsLine) {
  const std::string dir = ::testing::TempDir();
  {
    std::ofstream out(dir + "/bad.csv");
    out << "host0,host1,100,0\nhost0,host1,lots,0\n";
  }
  EXPECT_EQ(error_of("[[traffic.source]]\nkind = \"list\"\nfile = \"" + dir + "/bad.csv\"\n"),
            dir + "/bad.csv:2: expected src,dst,size_bytes,start_us (size_bytes > 0, start_us >= 0)");
  EXPECT_EQ(error_of("[[traffic.source]]\nkind = \"list\"\nfile = \"missing.csv\"\n"),
            "s.toml:3: key 'traffic.source.file': cannot read '" RDMAD_SOURCE_DIR
            "/sim/workloads/missing.csv'");
}

TEST(ScenarioLanguage, AFlowWithoutAPathIsAnErrorOfItsSource) {
  // Two islands: a–s and b–t.
  const std::string islands =
      "[[topology.node]]\nname = \"a\"\n[[topology.node]]\nname = \"b\"\n"
      "[[topology.node]]\nname = \"s\"\nkind = \"switch\"\n[[topology.node]]\nname = \"t\"\nkind = "
      "\"switch\"\n"
      "[[topology.link]]\na = \"a\"\nb = \"s\"\n[[topology.link]]\na = \"b\"\nb = \"t\"\n";
  EXPECT_EQ(error_of(islands + "[[traffic.source]]\nkind = \"flows\"\nsrc = \"a\"\ndst = \"b\"\n"),
            "s.toml:17: [[traffic.source]] 0: no path from 'a' to 'b' in the topology");
}

TEST(ScenarioLanguage, TheExamplesInTheDocsParse) {
  // Every ```toml block of docs/simulator.md's "Scenario language"; the traffic examples on a
  // leaf-spine of 32 hosts.
  std::ifstream in(std::filesystem::path(RDMAD_SOURCE_DIR) / "docs/simulator.md");
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string doc = ss.str();
  const size_t begin = doc.find("## Scenario language");
  const size_t end = doc.find("\n## ", begin + 1);
  ASSERT_NE(begin, std::string::npos);
  int blocks = 0;
  for (size_t at = doc.find("```toml\n", begin); at < end; at = doc.find("```toml\n", at + 1)) {
    const size_t from = at + 8;
    std::string text = doc.substr(from, doc.find("```", from) - from);
    if (text.find("[topology") == std::string::npos) {
      text = "[topology]\nkind = \"leafspine\"\nleaves = 4\nhosts_per_leaf = 8\n" + text;
    }
    SCOPED_TRACE(text);
    const Scenario s =
        parse_scenario(text, std::filesystem::path(RDMAD_SOURCE_DIR) / "sim" / "scenarios", {}, "doc.toml");
    EXPECT_GT(build_topology(s.topology).hosts, 1u);
    ++blocks;
  }
  EXPECT_EQ(blocks, 4);
}

}  // namespace
}  // namespace rdmad::sim
