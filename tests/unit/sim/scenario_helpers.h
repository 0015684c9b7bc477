#pragma once
// Helpers the simulator tests share (they assert nothing themselves): small scenarios built in
// code, running one, and reading back output files.
#include <filesystem>
#include <string>
#include <vector>

#include "rdmad/sim/results.h"
#include "rdmad/sim/scenario.h"

namespace rdmad::sim::testing {

// N long flows into one receiver on a 100 Gb/s star, mlx5 DCQCN, PFC on; `overrides` as for --set.
Scenario star_long_flows(uint32_t senders, const std::vector<std::string>& overrides = {});
// Runs a scenario to the end.
RunResults run_scenario(const Scenario& s);
// Reads a whole file (empty if missing).
std::string read_file(const std::filesystem::path& p);
// The shipped scale scenarios (rail1024_allreduce, fattree1024_websearch_1m) take seconds to
// minutes; the tests run them scaled down with these overrides (16 hosts; a 1 MB AllReduce,
// 1,000 flows). Empty for any other scenario name.
std::vector<std::string> scaled_down(const std::string& scenario_name);
// A fresh empty directory under the test's temporary directory.
std::filesystem::path fresh_dir(const std::string& name);

}  // namespace rdmad::sim::testing
