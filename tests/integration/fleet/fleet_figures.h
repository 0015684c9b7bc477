#pragma once
// What the fleet test measures and prints (BENCHMARKS.md, "Fleet"): per-daemon memory and CPU
// after start and after the transfers, the CPU of an idle fleet by thread name, how long sessions
// (static) or discovery (dns) take, the transfers' total throughput, how fast a removed node is
// noticed and how fast it is reachable again.
#include <sys/types.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "proc_stats.h"

namespace rdmad::test::fleet {

using Clock = std::chrono::steady_clock;
inline double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

struct Figures {
  Figures(std::string mode_name, int node_count, unsigned long long pair_seed, size_t pair_bytes)
      : mode(std::move(mode_name)), nodes(node_count), seed(pair_seed), bytes(pair_bytes), at_start(node_count),
        before_transfers(node_count), after_transfers(node_count), idle_cpu(node_count) {}

  std::string mode;
  int nodes;
  unsigned long long seed;
  size_t bytes;
  int pairs = 0;
  double started_s = 0, sessions_up_s = 0, mesh_s = 0, transfers_s = 0, notice_ms = 0, rejoin_s = 0;
  double idle_window_s = 0;
  std::vector<ProcSample> at_start, before_transfers, after_transfers;
  std::vector<double> idle_cpu;                 // CPU seconds per second of the idle window, per daemon
  std::map<std::string, double> idle_by_thread;  // the same summed over the fleet, by thread name
  std::pair<int, int> inflight_status{0, 0};     // the removed node's own write, the write into it

  // The fleet's CPU while nothing happens: a window of fixed length (a measurement, not a wait
  // for anything: RDMAD_FLEET_IDLE_WINDOW_MS, default 2000), sampled per thread at both ends.
  template <class PidOf>
  void measure_idle(PidOf&& pid_of) {
    const char* env = std::getenv("RDMAD_FLEET_IDLE_WINDOW_MS");
    const auto window = std::chrono::milliseconds(env != nullptr ? std::atoi(env) : 2000);
    std::vector<std::map<std::string, double>> before(nodes);
    for (int i = 0; i < nodes; ++i) before[i] = thread_cpu(pid_of(i));
    const auto t0 = Clock::now();
    std::this_thread::sleep_for(window);
    idle_window_s = seconds_since(t0);
    for (int i = 0; i < nodes; ++i) {
      double sum = 0;
      for (const auto& [name, s] : thread_cpu(pid_of(i))) {
        const double d = (s - before[i][name]) / idle_window_s;
        idle_by_thread[name] += d;
        sum += d;
      }
      idle_cpu[i] = sum;
      before_transfers[i] = sample(pid_of(i));
    }
  }

  double idle_fleet_cores() const {
    double s = 0;
    for (double c : idle_cpu) s += c;
    return s;
  }

  void print() const {
    auto stats = [](std::vector<double> v) {
      std::sort(v.begin(), v.end());
      double sum = 0;
      for (double x : v) sum += x;
      return std::array<double, 3>{v.front(), sum / v.size(), v.back()};
    };
    std::vector<double> rss0, rss1, cpu0, cpu1, cpux;
    std::printf("fleet: %-8s %9s %9s %9s %9s %9s %8s\n", "daemon", "rss0 MiB", "rss1 MiB", "cpu0 s", "cpu1 s", "xfer s",
                "idle %");
    for (int i = 0; i < nodes; ++i) {
      rss0.push_back(at_start[i].rss_mib);
      rss1.push_back(after_transfers[i].rss_mib);
      cpu0.push_back(at_start[i].cpu_s);
      cpu1.push_back(after_transfers[i].cpu_s);
      cpux.push_back(after_transfers[i].cpu_s - before_transfers[i].cpu_s);
      std::printf("fleet: node-%02d  %9.1f %9.1f %9.2f %9.2f %9.2f %8.2f\n", i, rss0.back(), rss1.back(), cpu0.back(),
                  cpu1.back(), cpux.back(), idle_cpu[i] * 100);
    }
    auto line = [&](const char* what, const std::vector<double>& v, const char* unit) {
      const auto s = stats(v);
      std::printf("fleet: %-34s min %8.2f  mean %8.2f  max %8.2f %s\n", what, s[0], s[1], s[2], unit);
    };
    line("RSS per daemon after start", rss0, "MiB");
    line("RSS per daemon after transfers", rss1, "MiB");
    line("CPU per daemon until started", cpu0, "s");
    line("CPU per daemon until transfers done", cpu1, "s");
    line("CPU per daemon during transfers", cpux, "s");
    std::vector<double> idle_pct;
    for (double c : idle_cpu) idle_pct.push_back(c * 100);
    line("idle CPU per daemon", idle_pct, "% of a core");
    std::printf("fleet: idle fleet: %.3f cores over %.1f s; by thread name (whole fleet, %% of a core):", idle_fleet_cores(),
                idle_window_s);
    for (const auto& [name, c] : idle_by_thread) std::printf(" %s=%.2f", name.c_str(), c * 100);
    std::printf("\nfleet: mode=%s nodes=%d rails=2 seed=%llu\n", mode.c_str(), nodes, seed);
    std::printf("fleet: %d daemons started (each ready) in %.2f s\n", nodes, started_s);
    std::printf("fleet: every session up (%s) %.2f s after the first start\n",
                mode == "dns" ? "discovered and opened by flows" : "static [[peers]]", sessions_up_s);
    std::printf("fleet: %d flows (every node to every other) connected in %.2f s\n", nodes * (nodes - 1), mesh_s);
    std::printf("fleet: %d concurrent transfers x %.1f MiB: %.2f s, %.2f GB/s total (%.3f GB/s per pair)\n", pairs,
                bytes / 1048576.0, transfers_s, pairs * bytes / transfers_s / 1e9, bytes / transfers_s / 1e9);
    std::printf("fleet: removed node noticed by all %d others in %.0f ms; in-flight writes ended with status %d "
                "(its own) and %d (into it); reachable both ways again %.2f s after its restart\n",
                nodes - 1, notice_ms, inflight_status.first, inflight_status.second, rejoin_s);
    std::fflush(stdout);
  }
};

}  // namespace rdmad::test::fleet
