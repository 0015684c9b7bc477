// What `rdmactl cc set --profile` reports after a push: each NIC's read-back beside the profile, a
// value the NIC rounded or clamped (firmware does, silently) and one it could not give back named.
#include "profile_push.h"

#include <gtest/gtest.h>

namespace rdmactl {
namespace {

rdmad::cc::DcqcnProfile profile() {
  auto p = rdmad::cc::parse_dcqcn_profile(
      "[profile]\nname = \"ws\"\n[knobs]\nrpg_time_reset = 55\nrp_ai_rate = 20\nrpg_gd = 11\n", "ws.toml");
  EXPECT_TRUE(p.ok());
  return p.profile;
}

TEST(ProfileReadback, MatchesKnobsByEitherNameAndFlagsWhatDiffers) {
  // A hardware NIC reports vendor names; a soft NIC too; debugfs names would match as well.
  const auto knobs = compare_knobs(profile(), {{"rpg_ai_rate", 20}, {"rp_time_reset", 64}, {"rpg_gd", std::nullopt},
                                               {"cnp_dscp", 48}});
  ASSERT_EQ(knobs.size(), 3u);  // the profile's knobs only, in its order
  EXPECT_EQ(knobs[0].name, "rpg_time_reset");
  EXPECT_EQ(knobs[0].now, 64);
  EXPECT_TRUE(knobs[0].differs());
  EXPECT_EQ(knobs[1].name, "rpg_ai_rate");
  EXPECT_FALSE(knobs[1].differs());
  EXPECT_EQ(knobs[2].now, std::nullopt);
  EXPECT_TRUE(knobs[2].differs());
}

TEST(ProfileReadback, TextAndJsonShowWhatEachNicRunsNow) {
  const auto p = profile();
  std::vector<NicReadback> nics;
  nics.push_back({"rail0", "soft", "soft datapath (live)", "", compare_knobs(p, {{"rpg_time_reset", 55}, {"rpg_ai_rate", 20}, {"rpg_gd", 11}})});
  nics.push_back({"rail1", "rdma_core", "vendor sysfs /sys/class/net/eth0/ecn",
                  "system error: nic rail1: rpg_time_reset: wanted 55, device reads back 64",
                  compare_knobs(p, {{"rpg_time_reset", 64}, {"rpg_ai_rate", 20}})});
  EXPECT_EQ(nics[0].differing(), 0u);
  EXPECT_EQ(nics[1].differing(), 2u);
  EXPECT_EQ(readback_text(p, "ws.toml", nics),
            "profile ws.toml \"ws\" (base mlx5, 3 knobs)\n"
            "\nnic rail0 (soft): soft datapath (live)\n"
            "  rpg_time_reset                   55\n"
            "  rpg_ai_rate                      20\n"
            "  rpg_gd                           11\n"
            "\nnic rail1 (rdma_core): vendor sysfs /sys/class/net/eth0/ecn\n"
            "  the daemon said: system error: nic rail1: rpg_time_reset: wanted 55, device reads back 64\n"
            "  rpg_time_reset                   64  (wanted 55: the NIC rounded or clamped it)\n"
            "  rpg_ai_rate                      20\n"
            "  rpg_gd                           (unreadable; wanted 11)\n"
            "\n2 knob value(s) on the NICs differ from the profile\n");
  EXPECT_EQ(readback_json(p, "ws.toml", {nics[1]}),
            "{\"profile\":\"ws.toml\",\"name\":\"ws\",\"base\":\"mlx5\",\"nics\":[{\"nic\":\"rail1\",\"backend\":\"rdma_core\","
            "\"source\":\"vendor sysfs /sys/class/net/eth0/ecn\",\"error\":\"system error: nic rail1: rpg_time_reset: wanted "
            "55, device reads back 64\",\"knobs\":{\"rpg_time_reset\":{\"wanted\":55,\"now\":64},\"rpg_ai_rate\":"
            "{\"wanted\":20,\"now\":20},\"rpg_gd\":{\"wanted\":11,\"now\":null}},\"differs\":[\"rpg_time_reset\",\"rpg_gd\"]}]}\n");
  EXPECT_NE(readback_text(p, "ws.toml", {nics[0]}).find("\nevery NIC runs the profile (1 NIC(s))\n"), std::string::npos);
}

}  // namespace
}  // namespace rdmactl
