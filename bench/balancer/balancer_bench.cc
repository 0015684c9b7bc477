// Cost of choosing a lane per chunk (ns per chunk) for 2, 4 and 8 NICs, per policy, and of the
// whole per-chunk cycle (plan + complete with a throughput sample). Baseline: round_robin pick.
#include <benchmark/benchmark.h>

#include <vector>

#include "rdmad/balancer/balancer.h"

namespace rdmad::balancer {
namespace {

std::vector<NicSpec> lanes(int n) {
  std::vector<NicSpec> out;
  for (int i = 0; i < n; ++i) out.push_back({"nic" + std::to_string(i)});
  return out;
}

Balancer make(Policy p, int n) {
  BalancerConfig c;
  c.policy = p;
  c.chunk_bytes = 64 << 10;
  Balancer b(c, lanes(n));
  // Measured, unequal lanes so the weighted policies do real work.
  std::vector<Chunk> out;
  for (int k = 0; k < 4 * n; ++k) {
    out.clear();
    b.plan({.tag = 0, .flow_id = 1, .bytes = c.chunk_bytes}, 0, out);
    b.complete(out[0].id, 5 + out[0].nic);
  }
  if (p == Policy::kCongestionAware) b.set_congestion(0, 500, 50'000);
  return b;
}

void BM_Pick(benchmark::State& state, Policy p) {
  Balancer b = make(p, static_cast<int>(state.range(0)));
  uint64_t flow = 0;
  for (auto _ : state) benchmark::DoNotOptimize(b.pick(++flow, {}, 0));
  state.SetItemsProcessed(state.iterations());
}

// plan() of a one-chunk message + complete(): what the daemon pays per chunk, weights refreshed
// after every completion.
void BM_PlanComplete(benchmark::State& state) {
  Balancer b = make(Policy::kWeighted, static_cast<int>(state.range(0)));
  std::vector<Chunk> out;
  out.reserve(1);
  uint64_t tag = 0;
  for (auto _ : state) {
    out.clear();
    b.plan({.tag = ++tag, .flow_id = 1, .bytes = 64 << 10}, 0, out);
    b.complete(out[0].id, 6 + out[0].nic);
  }
  state.SetItemsProcessed(state.iterations());
}

BENCHMARK_CAPTURE(BM_Pick, round_robin, Policy::kRoundRobin)->Arg(2)->Arg(4)->Arg(8);
BENCHMARK_CAPTURE(BM_Pick, weighted, Policy::kWeighted)->Arg(2)->Arg(4)->Arg(8);
BENCHMARK_CAPTURE(BM_Pick, congestion_aware, Policy::kCongestionAware)->Arg(2)->Arg(4)->Arg(8);
BENCHMARK_CAPTURE(BM_Pick, hash, Policy::kHash)->Arg(2)->Arg(4)->Arg(8);
BENCHMARK(BM_PlanComplete)->Arg(2)->Arg(4)->Arg(8);

}  // namespace
}  // namespace rdmad::balancer

BENCHMARK_MAIN();
