// Simulator throughput: simulated packet-hops per CPU second on the 64:1 incast, on the leaf-spine
// WebSearch scenario and on a ring AllReduce over a rail-optimised fabric; the event queue against
// std::priority_queue (the baseline), and state per flow.
#include <benchmark/benchmark.h>

#include <queue>
#include <vector>

#include "rdmad/sim/event_queue.h"
#include "rdmad/sim/rng.h"
#include "rdmad/sim/scenario.h"
#include "rdmad/sim/simulator.h"

namespace rdmad::sim {
namespace {

void run_scenario(benchmark::State& state, const char* file, std::vector<std::string> overrides) {
  overrides.push_back("sim.progress=false");
  Scenario s = load_scenario(std::string(RDMAD_SIM_SCENARIO_DIR) + "/" + file, overrides);
  uint64_t hops = 0;
  uint64_t events = 0;
  for (auto _ : state) {
    Simulator sim(s);
    RunResults r = sim.run();
    hops += r.packet_hops;
    events += r.events;
    benchmark::DoNotOptimize(r.events);
  }
  state.SetItemsProcessed(static_cast<int64_t>(hops));  // items_per_second = packet-hops per CPU second
  state.counters["events_per_s"] =
      benchmark::Counter(static_cast<double>(events), benchmark::Counter::kIsRate);
  state.counters["hops_per_run"] = static_cast<double>(hops) / static_cast<double>(state.iterations());
}

void BM_Incast64(benchmark::State& state) { run_scenario(state, "incast.toml", {}); }
BENCHMARK(BM_Incast64)->Unit(benchmark::kMillisecond)->Iterations(3);

void BM_LeafSpineWebSearch(benchmark::State& state) {
  run_scenario(state, "leafspine_websearch.toml", {"traffic.flow_count=" + std::to_string(state.range(0))});
}
BENCHMARK(BM_LeafSpineWebSearch)->Arg(1000)->Unit(benchmark::kMillisecond)->Iterations(1);

// A collective on a rail-optimised fabric: hosts × 4 rails, a 64 MB ring AllReduce and an all-to-all
// (sim/scenarios/rail_allreduce.toml; Arg = hosts, 16 as shipped).
void BM_RailAllReduce(benchmark::State& state) {
  run_scenario(state, "rail_allreduce.toml", {"topology.hosts=" + std::to_string(state.range(0))});
}
BENCHMARK(BM_RailAllReduce)->Arg(16)->Unit(benchmark::kMillisecond)->Iterations(1);

// The event core against the obvious baseline, at the queue sizes a run sees (hold model: pop one,
// push one a random short time later).
template <typename Push, typename Pop>
void hold_loop(benchmark::State& state, Push push, Pop pop) {
  Rng rng(1);
  SimTimeNs now = 0;
  for (int64_t i = 0; i < state.range(0); ++i) push(static_cast<SimTimeNs>(rng.below(10000)));
  for (auto _ : state) {
    now = pop();
    push(now + 1 + rng.below(10000));
  }
  state.SetItemsProcessed(state.iterations());
}

void BM_EventQueueHold(benchmark::State& state) {
  EventQueue q;
  hold_loop(
      state, [&](SimTimeNs t) { q.push(t, EventKind::kArrive, 1, 2); }, [&] { return q.pop().time_ns; });
}
BENCHMARK(BM_EventQueueHold)->Arg(1000)->Arg(100000);

void BM_StdPriorityQueueHold(benchmark::State& state) {
  struct Ev {
    SimTimeNs t;
    uint64_t seq;
    uint32_t a, b;
    uint8_t kind;
    bool operator>(const Ev& o) const { return t > o.t || (t == o.t && seq > o.seq); }
  };
  std::priority_queue<Ev, std::vector<Ev>, std::greater<>> q;
  uint64_t seq = 0;
  hold_loop(
      state,
      [&](SimTimeNs t) {
        q.push(Ev{t, seq++, 1, 2, 0});
      },
      [&] {
        SimTimeNs t = q.top().t;
        q.pop();
        return t;
      });
}
BENCHMARK(BM_StdPriorityQueueHold)->Arg(1000)->Arg(100000);

void BM_StatePerFlow(benchmark::State& state) {
  for (auto _ : state) benchmark::DoNotOptimize(Simulator::bytes_per_flow());
  state.counters["bytes_per_flow"] = static_cast<double>(Simulator::bytes_per_flow());
}
BENCHMARK(BM_StatePerFlow)->Iterations(1);

}  // namespace
}  // namespace rdmad::sim

BENCHMARK_MAIN();
