#include "rdmad/sim/scenario.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <stdexcept>

namespace rdmad::sim {
namespace {

using ::testing::HasSubstr;

const std::filesystem::path kScenarios = std::filesystem::path(RDMAD_SOURCE_DIR) / "sim" / "scenarios";

TEST(ScenarioTest, ParsesTablesAndDefaults) {
  Scenario s = parse_scenario(R"(
name = "t"
[sim]
seed = 9
duration_ms = 2.5
[topology]
kind = "leafspine"
leaves = 3
[switch]
pfc = false
[traffic]
kind = "incast"
size_bytes = 4096
)",
                              "/base");
  EXPECT_EQ(s.name, "t");
  EXPECT_EQ(s.seed, 9u);
  EXPECT_DOUBLE_EQ(s.duration_ms, 2.5);
  EXPECT_EQ(s.topology.kind, TopologyKind::kLeafSpine);
  EXPECT_EQ(s.topology.leaves, 3u);
  EXPECT_EQ(s.topology.spines, 4u);  // default
  EXPECT_FALSE(s.sw.pfc);
  EXPECT_EQ(s.traffic.kind, TrafficKind::kIncast);
  EXPECT_EQ(s.traffic.size_bytes, 4096u);
  EXPECT_EQ(s.dcqcn, cc::mlx5_profile());
}

TEST(ScenarioTest, OverridesReplaceAndAddKeys) {
  Scenario s = parse_scenario("[topology]\nsenders = 4\n", "/b",
                              {"topology.senders=32", "cc.profile=paper", "switch.pmax=0.5",
                               "sim.progress=false", "cc.knobs.rpg_time_reset=55", "traffic.cdf=x.cdf"});
  EXPECT_EQ(s.topology.senders, 32u);
  EXPECT_EQ(s.cc_profile, "paper");
  EXPECT_DOUBLE_EQ(s.sw.pmax, 0.5);
  EXPECT_FALSE(s.progress);
  EXPECT_EQ(s.dcqcn.increase_timer_us, 55u);
  EXPECT_EQ(s.dcqcn.alpha_gain, cc::paper_profile().alpha_gain);
  EXPECT_EQ(s.traffic.cdf, std::filesystem::path("/b/x.cdf"));  // relative to the scenario file
}

TEST(ScenarioTest, KnobsUseMlx5Units) {
  Scenario s = parse_scenario("[cc.knobs]\ndce_tcp_g = 1020\nrpg_byte_reset = 0\n", "/");
  EXPECT_DOUBLE_EQ(s.dcqcn.alpha_gain, 4.0 / 1024);
  EXPECT_EQ(s.dcqcn.byte_counter_bytes, 0u);
}

TEST(ScenarioTest, ErrorsNameTheKeyAndLine) {
  auto message = [](const std::string& text, std::vector<std::string> o = {}) {
    try {
      parse_scenario(text, "/", o, "s.toml");
    } catch (const std::runtime_error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_EQ(message("[topology]\nsendrs = 3\n"),
            "s.toml:2: unknown key 'topology.sendrs' (see docs/simulator.md)");
  EXPECT_THAT(message("[topology]\nsenders = \"many\"\n"),
              HasSubstr("key 'topology.senders' has the wrong type"));
  EXPECT_THAT(message("[topology]\nsenders = -1\n"), HasSubstr("topology.senders"));
  EXPECT_THAT(message("[topology]\nkind = \"ring\"\n"), HasSubstr("unknown value 'ring'"));
  EXPECT_THAT(message("[cc.knobs]\nnot_a_knob = 1\n"), HasSubstr("not an mlx5 DCQCN knob"));
  EXPECT_THAT(message("[cc.knobs]\ndce_tcp_g = 5000\n"), HasSubstr("[0, 1023]"));
  EXPECT_THAT(message("", {"nokey"}), HasSubstr("expected key=value"));
  EXPECT_THAT(message("[switch]\nkmin_bytes = 10\nkmax_bytes = 5\n"), HasSubstr("kmin_bytes <= kmax_bytes"));
  EXPECT_THAT(message("[traffic]\nkind = \"poisson\"\n"), HasSubstr("needs traffic.cdf"));
  EXPECT_THAT(message("[sim\n"), HasSubstr("s.toml:1"));
  EXPECT_EQ(message("[output]\nseries_samples = 1\n"),
            "s.toml:2: key 'output.series_samples' must be at least 2");
}

TEST(ScenarioTest, ShippedScenariosLoad) {
  for (const char* name :
       {"incast", "dumbbell_join", "leafspine_websearch", "leafspine_hadoop", "star_convergence",
        "rail_allreduce", "mixed_incast_background", "longhaul_custom", "rail1024_allreduce",
        "fattree1024_websearch_1m"}) {
    Scenario s = load_scenario(kScenarios / (std::string(name) + ".toml"));
    EXPECT_EQ(s.name, name);
    if (s.traffic.sources.empty() && s.traffic.kind == TrafficKind::kPoisson) {
      EXPECT_TRUE(std::filesystem::exists(s.traffic.cdf)) << name;
    }
  }
}

}  // namespace
}  // namespace rdmad::sim
