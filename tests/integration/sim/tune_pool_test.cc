// `rdmad-sim tune` with its local process pool: real rdmad-sim workers run the candidates, the
// advisor reads their outputs back, writes candidates.csv and a profile that parses, and two runs
// from the same seed write the same files.
#include <gtest/gtest.h>

#include <filesystem>

#include "rdmad/cc/dcqcn_profile.h"
#include "support/subprocess.h"
#include "tune_support.h"

namespace rdmad::test {
namespace {

using namespace std::chrono_literals;

struct Tuned {
  int exit = -1;
  std::string output;
};

Tuned tune(const std::vector<std::string>& args) {
  std::vector<std::string> argv{binary("sim/rdmad-sim"), "tune"};
  argv.insert(argv.end(), args.begin(), args.end());
  Subprocess p(argv);
  Tuned t;
  t.exit = p.wait_exit(60s).value_or(-1);
  t.output = p.output();
  return t;
}

TEST(TunePool, WorkersRunTheCandidatesAndTheProfileComesBack) {
  TempDir dir;
  const std::string scenario = tiny_scenario(dir);
  const std::vector<std::string> common{scenario, "--initial", "6", "--rounds", "2", "--per-round", "3",
                                        "--validation-seeds", "2", "--seed", "5"};
  auto args = common;
  args.insert(args.end(), {"--out", dir.path() + "/a", "--workers", "2"});
  const Tuned a = tune(args);
  ASSERT_EQ(a.exit, 0) << a.output;
  EXPECT_NE(a.output.find("rdmad-sim tune: baseline (mlx5 defaults): p99 = "), std::string::npos) << a.output;
  EXPECT_NE(a.output.find("tiny: p99 "), std::string::npos) << a.output;

  const auto csv = lines_of(read_text(dir.path() + "/a/candidates.csv"));
  ASSERT_GE(csv.size(), 1u + 1 + 6);
  EXPECT_EQ(csv[0].rfind("id,round,dce_tcp_g,", 0), 0u) << csv[0];
  EXPECT_EQ(csv[1].rfind("0,-1,1019,1,4,300,32767,1,5,50,50,4,", 0), 0u) << csv[1];  // the mlx5 defaults
  // Every run left its outputs; the baseline ran on the tuning seed and the held-out one.
  EXPECT_TRUE(std::filesystem::exists(dir.path() + "/a/runs/c0-s1/summary.json"));
  EXPECT_TRUE(std::filesystem::exists(dir.path() + "/a/runs/c0-s2/fct.csv"));

  const std::string text = read_text(dir.path() + "/a/profile.toml");
  const cc::ProfileParse p = cc::parse_dcqcn_profile(text, "profile.toml");
  ASSERT_TRUE(p.ok()) << p.errors.front().to_string("profile.toml") << "\n" << text;
  EXPECT_EQ(p.profile.name, "tiny-tuned");
  EXPECT_EQ(p.profile.knobs.size(), cc::dynamics_knobs(cc::mlx5_profile()).size());
  EXPECT_EQ(p.profile.tuning_value("objective"), "\"p99\"");
  EXPECT_EQ(p.profile.tuning_value("seed"), "5");
  EXPECT_EQ(p.profile.tuning_value("validation_seeds"), "[ 2 ]");
  // The incast's defaults recover slowly (a 300 µs timer for 200 KB flows): anything faster wins.
  EXPECT_NE(p.profile.tuning_value("winner"), "0") << text;
  EXPECT_NE(p.profile.params(), cc::mlx5_profile());

  // Reproducible from the seed, whatever order the workers finish in.
  args = common;
  args.insert(args.end(), {"--out", dir.path() + "/b", "--workers", "1"});
  const Tuned b = tune(args);
  ASSERT_EQ(b.exit, 0) << b.output;
  EXPECT_EQ(read_text(dir.path() + "/b/candidates.csv"), read_text(dir.path() + "/a/candidates.csv"));
  EXPECT_EQ(read_text(dir.path() + "/b/profile.toml"), text);
}

TEST(TunePool, BadArgumentsAndAMissingObjectiveAreNamed) {
  TempDir dir;
  const std::string scenario = tiny_scenario(dir);
  const Tuned knob = tune({scenario, "--out", dir.path() + "/k", "--knob", "rpg_ai_rate=0..5"});
  EXPECT_EQ(knob.exit, 2);
  EXPECT_NE(knob.output.find("--knob rpg_ai_rate=0..5: the range must lie in the knob's [1, 4294967295]"),
            std::string::npos)
      << knob.output;
  const Tuned set = tune({scenario, "--out", dir.path() + "/s", "--set", "topology.senders=x"});
  EXPECT_EQ(set.exit, 2);
  EXPECT_NE(set.output.find("topology.senders"), std::string::npos) << set.output;
  // An objective the runs do not have (this scenario has no collective) is refused at the baseline.
  const Tuned none = tune({scenario, "--out", dir.path() + "/d", "--objective", "collective"});
  EXPECT_EQ(none.exit, 2);
  EXPECT_NE(none.output.find("rdmad-sim tune: tune: the runs have no objective 'collective' (they have: drops "),
            std::string::npos)
      << none.output;
}

}  // namespace
}  // namespace rdmad::test
