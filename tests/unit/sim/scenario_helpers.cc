#include "scenario_helpers.h"

#include <fstream>
#include <sstream>

#include "rdmad/sim/simulator.h"

namespace rdmad::sim::testing {

Scenario star_long_flows(uint32_t senders, const std::vector<std::string>& overrides) {
  std::vector<std::string> o = {"topology.senders=" + std::to_string(senders), "sim.progress=false"};
  o.insert(o.end(), overrides.begin(), overrides.end());
  return parse_scenario(R"(
[sim]
duration_ms = 100
warmup_ms = 60
sample_interval_us = 10
[topology]
kind = "star"
host_link_gbps = 100
link_delay_ns = 1000
[switch]
pfc = true
[traffic]
kind = "long"
[cc]
profile = "mlx5"
)",
                        "/", o, "star");
}

RunResults run_scenario(const Scenario& s) {
  Simulator sim(s);
  return sim.run();
}

std::string read_file(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::vector<std::string> scaled_down(const std::string& scenario_name) {
  if (scenario_name == "rail1024_allreduce") {
    return {"topology.hosts=16", "topology.spines=2", "traffic.source.0.size_bytes=1_000_000"};
  }
  if (scenario_name == "fattree1024_websearch_1m") return {"topology.k=4", "traffic.flow_count=1000"};
  return {};
}

std::filesystem::path fresh_dir(const std::string& name) {
  auto dir = std::filesystem::temp_directory_path() / ("rdmad_sim_test_" + name);
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

}  // namespace rdmad::sim::testing
