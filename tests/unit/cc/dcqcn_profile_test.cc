// The DCQCN profile file: what rdmad-sim tune writes parses back to the same profile, and every
// problem names its line and key.
#include "rdmad/cc/dcqcn_profile.h"

#include <gtest/gtest.h>

namespace rdmad::cc {
namespace {

TEST(DcqcnProfile, RendersAndParsesBackTheSameProfile) {
  DcqcnProfile p;
  p.name = "websearch \"50%\"";
  p.base = "mlx5";
  DcqcnParams tuned = mlx5_profile();
  tuned.increase_timer_us = 55;
  tuned.alpha_gain = 1.0 / 64;
  tuned.byte_counter_bytes = 1'000'000;
  p.knobs = dynamics_knobs(tuned);
  p.tuning = {{"scenario", "\"leafspine_websearch\""}, {"seed", "7"}, {"set", "[ \"traffic.load=0.5\" ]"},
              {"validation", "{ mlx5 = 6.5, tuned = 4.25 }"}};
  const std::string text = render_dcqcn_profile(p, "written by a test\n\nsecond line");
  EXPECT_EQ(text.rfind("# written by a test\n#\n# second line\n[profile]\n", 0), 0u) << text;
  EXPECT_NE(text.find("\nrpg_time_reset = 55  # us\n"), std::string::npos) << text;
  EXPECT_NE(text.find("\ndce_tcp_g = 1008  # "), std::string::npos) << text;
  // The CNP's marking is the network's plan, not a DCQCN dynamic: never in a tuned profile.
  EXPECT_EQ(text.find("cnp_dscp"), std::string::npos) << text;

  const ProfileParse back = parse_dcqcn_profile(text, "p.toml");
  ASSERT_TRUE(back.ok()) << back.errors.front().to_string("p.toml");
  EXPECT_EQ(back.profile.name, p.name);
  EXPECT_EQ(back.profile.base, "mlx5");
  ASSERT_EQ(back.profile.knobs.size(), p.knobs.size());
  for (size_t i = 0; i < p.knobs.size(); ++i) {
    EXPECT_EQ(back.profile.knobs[i].knob, p.knobs[i].knob);
    EXPECT_EQ(back.profile.knobs[i].value, p.knobs[i].value);
  }
  EXPECT_EQ(back.profile.params(), tuned);
  EXPECT_EQ(back.profile.tuning, p.tuning);
  EXPECT_EQ(back.profile.tuning_value("seed"), "7");
  EXPECT_EQ(render_dcqcn_profile(back.profile, "written by a test\n\nsecond line"), text);
}

TEST(DcqcnProfile, KnobsAmendTheBaseAndTakeEitherName) {
  const ProfileParse r = parse_dcqcn_profile("[profile]\nbase = \"paper\"\n[knobs]\nrp_ai_rate = 9\n", "p.toml");
  ASSERT_TRUE(r.ok()) << r.errors.front().to_string("p.toml");
  DcqcnParams want = paper_profile();
  want.rate_ai_mbps = 9;
  EXPECT_EQ(r.profile.params(), want);
  EXPECT_EQ(r.profile.knob("rpg_ai_rate"), 9);
  EXPECT_EQ(r.profile.knob("rpg_hai_rate"), std::nullopt);
}

std::vector<std::string> errors_of(const std::string& text) {
  std::vector<std::string> out;
  for (const auto& e : parse_dcqcn_profile(text, "p.toml").errors) out.push_back(e.to_string("p.toml"));
  return out;
}

TEST(DcqcnProfile, ErrorsNameFileLineAndKey) {
  const auto errors = errors_of(
      "[profile]\nbase = \"fast\"\ncolour = 1\n[knobs]\nrpg_ai_rate = 0\nrpg_time_reset = \"55\"\nno_such = 1\n"
      "rpg_hai_rate = 50\nrp_hai_rate = 60\n[extra]\n");
  ASSERT_EQ(errors.size(), 7u);
  EXPECT_EQ(errors[0], "p.toml:2:8: profile.base: unknown profile \"fast\" (mlx5, paper)");
  EXPECT_EQ(errors[1], "p.toml:3:1: profile.colour: unknown key in [profile]; known keys: name, base");
  EXPECT_EQ(errors[2], "p.toml:5:15: knobs.rpg_ai_rate: 0 is outside [1, 4294967295] (Mb/s)");
  EXPECT_EQ(errors[3], "p.toml:6:18: knobs.rpg_time_reset: expected an integer in [1, 4294967295] (us)");
  EXPECT_EQ(errors[4], "p.toml:7:1: knobs.no_such: not an mlx5 DCQCN knob (rdmactl cc show and docs/nic-cc.md list them)");
  // toml++ keeps keys sorted, so the debugfs spelling (rp_...) is read first and the other is named.
  EXPECT_EQ(errors[5], "p.toml:8:1: knobs.rpg_hai_rate: rpg_hai_rate is set twice (vendor and debugfs names)");
  EXPECT_EQ(errors[6], "p.toml:10:2: extra: unknown section; known sections: [profile], [knobs], [tuning]");

  EXPECT_EQ(errors_of("[profile]\nname = \"x\"\n"),
            std::vector<std::string>{"p.toml: knobs: missing [knobs]: a profile sets at least one knob"});
  const auto syntax = errors_of("[knobs]\nrpg_ai_rate = \n");
  ASSERT_EQ(syntax.size(), 1u);
  EXPECT_EQ(syntax[0].rfind("p.toml:2:", 0), 0u) << syntax[0];
  EXPECT_NE(syntax[0].find("TOML syntax error"), std::string::npos) << syntax[0];
}

}  // namespace
}  // namespace rdmad::cc
