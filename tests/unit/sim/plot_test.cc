// Every shipped scenario draws every picture with --plot (issue 25: leaf-spine scenarios set
// output.max_rate_flows = 0, gnuplot stopped at "x range is invalid" and drew nothing after it; the
// per-port utilisation and pause series and the topology sketch had no picture).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "rdmad/sim/output.h"
#include "rdmad/sim/scenario.h"
#include "scenario_helpers.h"

namespace rdmad::sim {
namespace {

namespace fs = std::filesystem;

bool have_gnuplot() { return std::system("command -v gnuplot >/dev/null 2>&1") == 0; }

std::vector<fs::path> shipped_scenarios() {
  std::vector<fs::path> out;
  for (const auto& e : fs::directory_iterator(fs::path(RDMAD_SOURCE_DIR) / "sim/scenarios")) {
    if (e.path().extension() == ".toml") out.push_back(e.path());
  }
  std::sort(out.begin(), out.end());
  return out;
}

TEST(SimPlot, EveryShippedScenarioDrawsEveryPicture) {
  if (!have_gnuplot()) GTEST_SKIP() << "gnuplot is not installed (scripts/setup-deps installs gnuplot-nox)";
  const auto scenarios = shipped_scenarios();
  ASSERT_GE(scenarios.size(), 8u);
  for (const fs::path& path : scenarios) {
    SCOPED_TRACE(path.string());
    // 2 ms of simulated time: enough for queues, rates and some finished flows in every scenario
    // (the scale scenarios scaled down).
    std::vector<std::string> overrides = testing::scaled_down(path.stem().string());
    overrides.insert(overrides.end(), {"sim.duration_ms=2", "sim.progress=false"});
    const Scenario s = load_scenario(path, overrides);
    const fs::path dir = testing::fresh_dir("plot_" + path.stem().string());
    write_outputs(testing::run_scenario(s), dir);
    const auto plotted = plot_outputs(dir);
    EXPECT_TRUE(plotted.ok()) << plotted.message();
    for (const char* png :
         {"rates.png", "queues.png", "fct_slowdown.png", "utilization.png", "pauses.png", "topology.png"}) {
      const fs::path p = dir / png;
      ASSERT_TRUE(fs::exists(p)) << p;
      EXPECT_GT(fs::file_size(p), 0u) << p;
    }
  }
}

}  // namespace
}  // namespace rdmad::sim
