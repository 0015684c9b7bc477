#include "rdmad/cc/dcqcn_params.h"

#include <gtest/gtest.h>

namespace rdmad::cc {
namespace {

TEST(DcqcnParams, Mlx5ProfileMatchesFirmwareKnobValues) {
  // The knob values a ConnectX port reports by default (see docs/dcqcn.md).
  const DcqcnParams p = mlx5_profile();
  const std::pair<const char*, int64_t> expected[] = {
      {"dce_tcp_g", 1019},          {"dce_tcp_rtt", 1},       {"initial_alpha_value", 1023},
      {"rate_reduce_monitor_period", 4}, {"rpg_time_reset", 300}, {"rpg_byte_reset", 32767},
      {"rpg_threshold", 1},         {"rpg_ai_rate", 5},       {"rpg_hai_rate", 50},
      {"rpg_min_dec_fac", 50},      {"rpg_gd", 11},           {"rpg_min_rate", 1},
      {"rpg_max_rate", 0},          {"min_time_between_cnps", 4}, {"cnp_dscp", 48},
      {"cnp_802p_prio", 6}};
  for (const auto& [name, value] : expected) {
    const Mlx5Knob* k = find_mlx5_knob(name);
    ASSERT_NE(k, nullptr) << name;
    EXPECT_EQ(k->get(p), value) << name;
  }
}

TEST(DcqcnParams, DceTcpGMapsToAlphaGain) {
  DcqcnParams p;
  find_mlx5_knob("dce_tcp_g")->set(p, 1019);
  EXPECT_DOUBLE_EQ(p.alpha_gain, 5.0 / 1024);
  find_mlx5_knob("rp_dce_tcp_g")->set(p, 1020);  // debugfs name finds the same knob
  EXPECT_DOUBLE_EQ(p.alpha_gain, 4.0 / 1024);
}

TEST(DcqcnParams, EveryKnobRoundTripsThroughTheStruct) {
  for (const Mlx5Knob& k : mlx5_knobs()) {
    for (int64_t v : {k.min, k.max, (k.min + k.max) / 2}) {
      DcqcnParams p = paper_profile();
      k.set(p, v);
      EXPECT_EQ(k.get(p), v) << k.name;
    }
  }
}

TEST(DcqcnParams, MinDecFacIsTheVendorsPercentOfTheOldRate) {
  // NVIDIA: 0…100, default 50; the value is written to the NIC as-is (nic_cc) and read as-is by
  // the reaction point (soft datapath, sim): no conversion.
  const Mlx5Knob* k = find_mlx5_knob("rpg_min_dec_fac");
  ASSERT_NE(k, nullptr);
  DcqcnParams p;
  k->set(p, 95);
  EXPECT_EQ(p.min_dec_fac_pct, 95u);
  EXPECT_EQ(k->get(paper_profile()), 0);  // the paper has no floor
  EXPECT_EQ(k->get(mlx5_profile()), 50);
}

// Ranges as NVIDIA lists them (docs/dcqcn.md, "Knobs"): what a config and nic_cc accept. rpg_gd:
// "Values 10..11" ([N2]; 11 cuts by α/2, 10 by α); rpg_min_dec_fac: 0…100.
TEST(DcqcnParams, RangesAreTheVendorsValues) {
  const struct {
    const char* name;
    const char* debugfs;
    int64_t min, max;
  } expected[] = {{"rpg_gd", "rp_gd", 10, 11}, {"rpg_min_dec_fac", "rp_min_dec_fac", 0, 100}};
  for (const auto& e : expected) {
    const Mlx5Knob* k = find_mlx5_knob(e.name);
    ASSERT_NE(k, nullptr) << e.name;
    EXPECT_EQ(k, find_mlx5_knob(e.debugfs)) << e.name;
    EXPECT_EQ(k->min, e.min) << e.name;
    EXPECT_EQ(k->max, e.max) << e.name;
  }
}

TEST(DcqcnParams, ProfilesByName) {
  EXPECT_EQ(profile_by_name("paper"), paper_profile());
  EXPECT_EQ(profile_by_name("mlx5"), mlx5_profile());
  EXPECT_FALSE(profile_by_name("dctcp").has_value());
  EXPECT_EQ(paper_profile().increase_timer_us, 55u);
  EXPECT_EQ(paper_profile().fast_recovery_stages, 5u);
}

}  // namespace
}  // namespace rdmad::cc
