// rdmad-sim: runs one scenario of the packet-level fabric simulator and writes its results.
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "rdmad/sim/output.h"
#include "rdmad/sim/scenario.h"
#include "rdmad/sim/simulator.h"
#include "tune_main.h"

namespace {

constexpr const char* kFooter = R"(
Outputs in --out DIR:
  summary.json  jain_index, bottleneck_utilization, ports, queue_bytes{p50,p99,max}, pfc_pauses,
                pfc_paused_ms, drops, cnps_sent, fct_slowdown per size bucket {p50,p95,p99}, collectives
                {completion_us, phases_us}, events,
                wall_seconds, bottleneck_goodput, delivered_bytes, goodput_gbps, retransmitted_packets,
                retransmitted_bytes, timeouts, naks_sent, wire_losses, ...
  rates.csv     time_us,flow,delivered_gbps,cc_rate_gbps   (first output.max_rate_flows flows)
  queues.csv    time_us,port,queue_bytes                   (bottleneck egress queues)
  fct.csv       flow,src,dst,size_bytes,start_ns,fct_ns,ideal_ns,slowdown
  utilization.csv  time_us,width_us,port,utilization   (every port that sent data; at most
  pauses.csv       time_us,width_us,port,paused        output.series_samples samples per port)
  topology_nodes.csv, topology_links.csv               (the topology sketch's layout)
  *.png         with --plot (gnuplot): rates, queues, fct_slowdown, utilization, pauses, topology

Scenario tables (full reference: docs/simulator.md, "Scenario language"): [sim] seed duration_ms
warmup_ms sample_interval_us mtu_bytes; [topology] kind=star|dumbbell|leafspine|fattree|rail|custom
senders leaves spines hosts_per_leaf k hosts rails leaves_per_rail host_link_gbps fabric_link_gbps
link_delay_ns host_link_delay_ns fabric_link_delay_ns bottlenecks; [[topology.node]] name kind=host|switch
count nics buffer_bytes; [[topology.link]] a b gbps delay_ns headroom_bytes pfc_xoff_bytes
pfc_xon_bytes; [switch] buffer_bytes dt_alpha pfc pfc_alpha headroom_bytes xon_offset_bytes
pfc_xoff_bytes pfc_xon_bytes ecn kmin_bytes kmax_bytes pmax; [traffic] kind=long|incast|poisson flows
start_us stagger_us size_bytes bursts burst_interval_us load cdf flow_count, or any number of
[[traffic.source]] kind=flows|list|incast|poisson|allreduce|alltoall (src dst hosts size_bytes
start_us stagger_us at_us bursts burst_interval_us cdf load flow_count flows file algorithm name);
[cc] enabled profile=mlx5|paper, [cc.knobs] <mlx5 knob>=<value>; [transport] acks=auto|on|off
retransmit_timeout_us; [loss] rate, [[loss.drop]] flow psn kind=data|ack; [output] max_rate_flows
jain_window_ms series_samples.

Tuning advisor: rdmad-sim tune SCENARIO --out DIR [options] (rdmad-sim tune --help; docs/tuning.md)
searches the DCQCN knobs for the scenario and writes a profile for [cc] profile_file and
rdmactl cc set --profile.

Examples:
  rdmad-sim sim/scenarios/incast.toml --out /tmp/incast --plot
  rdmad-sim sim/scenarios/incast.toml --out /tmp/i32 --set topology.senders=32 --set sim.seed=7
  rdmad-sim incast --out /tmp/lossy --set switch.pfc=false --set loss.rate=0.0001
  rdmad-sim rail_allreduce --out /tmp/rail --set traffic.source.0.size_bytes=16000000
)";

std::filesystem::path resolve(const std::string& arg) {
  std::filesystem::path p(arg);
  if (std::filesystem::exists(p)) return p;
#ifdef RDMAD_SIM_SCENARIO_DIR
  for (std::filesystem::path c : {std::filesystem::path(RDMAD_SIM_SCENARIO_DIR) / arg,
                                  std::filesystem::path(RDMAD_SIM_SCENARIO_DIR) / (arg + ".toml")}) {
    if (std::filesystem::exists(c)) return c;
  }
#endif
  return p;
}

}  // namespace

int main(int argc, char** argv) {
  // `rdmad-sim tune ...`: the tuning advisor (a scenario named "tune" needs a path: ./tune.toml).
  if (argc > 1 && std::string(argv[1]) == "tune") return rdmad::sim::tune_main(argc - 1, argv + 1, resolve);
  CLI::App app{"rdmad-sim: packet-level RoCEv2 fabric simulator running the rdmad DCQCN engine"};
  app.footer(kFooter);
  std::string scenario_arg;
  std::string out_dir;
  std::vector<std::string> overrides;
  bool plot = false;
  bool quiet = false;
  app.add_option("SCENARIO", scenario_arg, "scenario TOML file (or the name of a shipped one, e.g. incast)")
      ->required();
  app.add_option("--out,-o", out_dir, "directory for the outputs (created if missing)")->required();
  app.add_flag("--plot", plot, "also draw PNG plots with gnuplot");
  app.add_option("--set", overrides,
                 "override a scenario key, e.g. --set topology.senders=32, or a list entry's by its index, "
                 "--set traffic.source.1.load=0.5 (repeatable)");
  app.add_flag("--quiet,-q", quiet, "no progress line on stderr");
  CLI11_PARSE(app, argc, argv);

  try {
    if (quiet) overrides.push_back("sim.progress=false");
    rdmad::sim::Scenario scenario = rdmad::sim::load_scenario(resolve(scenario_arg), overrides);
    rdmad::sim::Simulator sim(scenario);
    rdmad::sim::RunResults results = sim.run();
    for (const std::string& w : results.warnings) std::fprintf(stderr, "rdmad-sim: warning: %s\n", w.c_str());
    rdmad::sim::write_outputs(results, out_dir);
    if (plot) {
      if (const auto plotted = rdmad::sim::plot_outputs(out_dir); !plotted.ok()) {
        std::fprintf(stderr, "rdmad-sim: plots not drawn: %s\n", plotted.message().c_str());
        return 1;
      }
    }
    std::fprintf(stderr, "rdmad-sim: %s: %llu events, %llu packet hops in %.2f s; results in %s\n",
                 results.scenario.c_str(), static_cast<unsigned long long>(results.events),
                 static_cast<unsigned long long>(results.packet_hops), results.wall_seconds, out_dir.c_str());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "rdmad-sim: %s\n", e.what());
    return 2;
  }
  return 0;
}
