// [cc] profile_file: the daemon takes its DCQCN parameters from a profile file (as rdmad-sim tune
// writes it), with [cc] knobs on top, and every problem names the file, line and key it is in.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <string>

#include "rdmad/cc/dcqcn_profile.h"
#include "rdmad/config/loader.h"
#include "support/temp_dir.h"

namespace rdmad::config {
namespace {

using rdmad::test::TempDir;

constexpr const char* kProfile =
    "# written by rdmad-sim tune\n[profile]\nname = \"ws-50\"\nbase = \"mlx5\"\n[knobs]\nrpg_time_reset = 55\n"
    "rpg_ai_rate = 20\ndce_tcp_g = 1008\n[tuning]\nseed = 7\n";

std::vector<std::string> errors_of(const LoadResult& r) {
  std::vector<std::string> out;
  for (const Error& e : r.errors) out.push_back(e.to_string());
  return out;
}

TEST(CcProfileFile, LoadsTheProfileAndAppliesTheKnobsOfCcOnTop) {
  TempDir dir;
  dir.write("ws.toml", kProfile);
  // A relative path is the configuration file's neighbour, wherever the daemon was started.
  const std::string cfg = dir.write("rdmad.toml", "[cc]\nprofile_file = \"ws.toml\"\nrpg_ai_rate = 7\n");
  const LoadResult r = load_file(cfg);
  ASSERT_TRUE(r.ok()) << errors_of(r).front();
  cc::DcqcnParams want = cc::mlx5_profile();
  want.increase_timer_us = 55;
  want.alpha_gain = 16.0 / 1024;
  want.rate_ai_mbps = 7;  // [cc] wins over the file
  EXPECT_EQ(r.config.cc.params, want);
  EXPECT_EQ(r.config.cc.profile_file, dir.path() + "/ws.toml");
  EXPECT_EQ(r.config.cc.profile, "mlx5");
  EXPECT_EQ(r.config.cc.source(), "file " + dir.path() + "/ws.toml (ws-50, base mlx5)");
  // The same through the profile module: what the file holds is what the daemon runs.
  const auto parsed = cc::parse_dcqcn_profile(kProfile, "ws.toml");
  cc::DcqcnParams from_file = parsed.profile.params();
  from_file.rate_ai_mbps = 7;
  EXPECT_EQ(r.config.cc.params, from_file);
}

TEST(CcProfileFile, ProblemsInTheProfileNameItsLineAndKey) {
  TempDir dir;
  dir.write("bad.toml", "[profile]\nbase = \"paper\"\n[knobs]\nrpg_time_reset = 55\nrpg_threshold = 40\nrpg_speed = 1\n");
  const LoadResult r = load_file(dir.write("rdmad.toml", "[cc]\nprofile_file = \"bad.toml\"\n"));
  const std::string f = dir.path() + "/bad.toml";
  EXPECT_EQ(errors_of(r), (std::vector<std::string>{
                              f + ":5:17: knobs.rpg_threshold: 40 is outside [1, 31] (events) (the profile of cc.profile_file)",
                              f + ":6:1: knobs.rpg_speed: not an mlx5 DCQCN knob (rdmactl cc show and docs/nic-cc.md list "
                                  "them) (the profile of cc.profile_file)"}));
}

TEST(CcProfileFile, AMissingOrUnsafeFileOrASecondProfileIsAnErrorOfTheKey) {
  TempDir dir;
  const std::string cfg = dir.path() + "/rdmad.toml";
  LoadResult missing = load_file(dir.write("rdmad.toml", "[daemon]\nlog_level = \"info\"\n[cc]\nprofile_file = \"none.toml\"\n"));
  EXPECT_EQ(errors_of(missing), std::vector<std::string>{cfg + ":4:16: cc.profile_file: " + dir.path() +
                                                         "/none.toml: cannot read file: No such file or directory"});
  const std::string writable = dir.write("open.toml", kProfile);
  ::chmod(writable.c_str(), 0666);
  LoadResult unsafe = load_file(dir.write("rdmad.toml", "[cc]\nprofile_file = \"open.toml\"\n"));
  ASSERT_EQ(unsafe.errors.size(), 1u);
  EXPECT_NE(unsafe.errors[0].to_string().find(cfg + ":2:16: cc.profile_file: " + writable +
                                               ": refused: every user may write it (mode 0666)"),
            std::string::npos)
      << unsafe.errors[0].to_string();
  dir.write("ws.toml", kProfile);
  LoadResult both = load_file(dir.write("rdmad.toml", "[cc]\nprofile = \"paper\"\nprofile_file = \"ws.toml\"\n"));
  EXPECT_EQ(errors_of(both), std::vector<std::string>{cfg + ":2:11: cc.profile: set profile or profile_file, not both "
                                                      "(the file names its own base profile)"});
}

}  // namespace
}  // namespace rdmad::config
