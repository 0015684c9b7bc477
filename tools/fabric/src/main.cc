// rdmad-fabric: a user-space switch for RoCEv2-over-UDP so that congestion, ECN marking, loss,
// reordering and duplication exist on loopback without root. See docs/fabric.md.
#include <signal.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <iostream>
#include <sstream>

#include "rdmad/tools/fabric/fabric.h"

namespace {

using namespace rdmad::fabric;

void write_json(const std::string& path, const std::string& json) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << json;
  }
  std::rename(tmp.c_str(), path.c_str());  // readers never see a half-written file
}

void report(const Fabric& fabric) {
  const auto stats = fabric.all_stats();
  if (fabric.config().stats_interval_ms != 0) {
    for (const auto& s : stats) std::cout << format_stats_line(s) << '\n';
    std::cout.flush();
  }
  if (!fabric.config().stats_json.empty()) write_json(fabric.config().stats_json, format_stats_json(stats));
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "rdmad-fabric: user-space RoCEv2-over-UDP switch with rate limiting, RED/ECN marking and\n"
      "seeded loss, reordering and duplication. Each port listens on one UDP address and\n"
      "forwards to one destination. Port keys: name, listen, forward, rate (e.g. 1gbit),\n"
      "buffer (e.g. 1MB), ecn, kmin, kmax, pmax, loss, duplicate, reorder, reorder_hold_us, seed, drop_opcode, drop_opcode_after."};
  std::string config_file;
  std::vector<std::string> port_specs;
  uint64_t seed = 1;
  uint32_t interval_ms = 1000;
  std::string stats_json;
  double duration_s = 0;
  app.add_option("-c,--config", config_file, "TOML file with top-level keys and [[port]] tables");
  app.add_option("-p,--port", port_specs,
                 "a port as key=value,... e.g. listen=127.0.0.1:14791,forward=127.0.0.1:4791,rate=1gbit");
  auto* seed_opt = app.add_option(
      "--seed", seed, "base seed (overrides the TOML one); port i gets seed+i unless it sets its own");
  auto* interval_opt = app.add_option("--stats-interval-ms", interval_ms, "stats line period, 0 = none");
  app.add_option("--stats-json", stats_json, "rewrite this file with JSON stats every interval");
  app.add_option("--duration-s", duration_s, "exit after this many seconds (0 = run until SIGINT/SIGTERM)");
  CLI11_PARSE(app, argc, argv);

  try {
    FabricConfig config;
    if (!config_file.empty()) {
      std::ifstream in(config_file);
      if (!in) throw std::runtime_error("cannot read " + config_file);
      std::stringstream ss;
      ss << in.rdbuf();
      config = parse_toml_config(ss.str(), *seed_opt ? std::optional<uint64_t>(seed) : std::nullopt);
    }
    for (size_t i = 0; i < port_specs.size(); ++i) {
      PortConfig p = parse_port_spec(port_specs[i]);
      if (port_specs[i].find("seed=") == std::string::npos) p.seed = seed + config.ports.size();
      if (p.name.empty()) p.name = "port" + std::to_string(config.ports.size());
      config.ports.push_back(std::move(p));
    }
    if (*interval_opt || config_file.empty()) config.stats_interval_ms = interval_ms;
    if (!stats_json.empty()) config.stats_json = stats_json;

    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &set, nullptr);  // port threads inherit the mask; main waits below

    Fabric fabric(std::move(config));
    fabric.start();
    for (size_t i = 0; i < fabric.port_count(); ++i) {
      const PortConfig& p = fabric.config().ports[i];
      std::cout << "port " << p.name << ": " << fabric.listen_endpoint(i).to_string() << " -> "
                << p.forward.to_string() << " rate " << p.rate_bps << " bit/s buffer " << p.buffer_bytes
                << " B\n";
    }
    std::cout.flush();
    const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(duration_s);
    const uint32_t period_ms = fabric.config().stats_interval_ms ? fabric.config().stats_interval_ms : 1000;
    while (true) {
      auto wait = std::chrono::milliseconds(period_ms);
      if (duration_s > 0) {
        const auto left =
            std::chrono::duration_cast<std::chrono::milliseconds>(end - std::chrono::steady_clock::now());
        if (left.count() <= 0) break;
        wait = std::min(wait, left);
      }
      const timespec ts{static_cast<time_t>(wait.count() / 1000),
                        static_cast<long>(wait.count() % 1000) * 1'000'000};
      if (sigtimedwait(&set, nullptr, &ts) > 0) break;
      report(fabric);
    }
    fabric.stop();
    report(fabric);
  } catch (const std::exception& e) {
    std::cerr << "rdmad-fabric: " << e.what() << '\n';
    return 1;
  }
  return 0;
}
