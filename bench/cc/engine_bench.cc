// Reaction-point events per second with 100k resident flows: the lazy engine (closed-form α and
// increase events, only flows below line rate on a timing wheel) against a naive baseline that
// keeps one periodic timer per flow (period = the α timer K) in a std::priority_queue and walks
// every period step by step. Both replay the same deterministic trace of CNPs and sent-bytes
// events at random flows. Arguments: {profile (0 paper, 1 mlx5), events per simulated µs, flows}.
// items_per_second counts CNPs + sent-bytes calls + timer-driven increase events applied below line
// rate; workload_events/s counts the trace events alone (identical work for both engines).
#include <benchmark/benchmark.h>

#include <array>
#include <cstdint>
#include <queue>
#include <utility>
#include <vector>

#include "rdmad/cc/reaction_point.h"
#include "rdmad/cc/timing_wheel.h"
#include "unit/cc/eager_reaction_point.h"

namespace rdmad::cc {
namespace {

constexpr double kLineMbps = 100'000;
constexpr uint32_t kPacketBytes = 4096;

struct TraceEvent {
  TimeNs at;
  uint32_t flow;
  uint32_t bytes;  // 0: a CNP
};

// A deterministic event stream, generated on the fly (a stored trace would stream megabytes through
// the cache and evict the flow state being measured): 10% CNPs, 90% one 4 KB packet sent, at
// uniformly random flows, `per_us` events per simulated µs on average. A short look-ahead ring
// lets both engines prefetch the next flows as a batched datapath would.
class TraceCursor {
 public:
  TraceCursor(int per_us, uint32_t flows)
      : gap_range_ns_(2000 / static_cast<uint64_t>(per_us)), flows_(flows) {
    for (auto& e : ring_) e = generate();
  }
  TraceEvent next() {
    const TraceEvent e = ring_[head_];
    ring_[head_] = generate();
    head_ = (head_ + 1) % kAhead;
    return e;
  }
  // The flow of the event kAhead − 1 events from now.
  uint32_t upcoming_flow() const { return ring_[(head_ + kAhead - 1) % kAhead].flow; }

 private:
  static constexpr size_t kAhead = 8;
  uint64_t rand() {
    s_ ^= s_ << 13;
    s_ ^= s_ >> 7;
    s_ ^= s_ << 17;
    return s_;
  }
  static uint64_t below(uint64_t r, uint64_t n) { return (r >> 32) * n >> 32; }
  TraceEvent generate() {
    const uint64_t r = rand();
    t_ += static_cast<TimeNs>(below(r, gap_range_ns_) + 1);  // mean 1000/per_us ns
    const uint64_t r2 = rand();
    return TraceEvent{t_, static_cast<uint32_t>(below(r2, flows_)),
                      (r2 & 0xffff) % 10 == 0 ? 0 : kPacketBytes};
  }

  uint64_t gap_range_ns_;
  uint64_t flows_;
  uint64_t s_ = 0x9e3779b97f4a7c15ULL;
  TimeNs t_ = 0;
  std::array<TraceEvent, kAhead> ring_{};
  size_t head_ = 0;
};

DcqcnParams profile(int64_t which) { return which == 0 ? paper_profile() : mlx5_profile(); }

// One cache line of CC state per flow; the flow's timer is its index in the wheel.
struct alignas(64) LazyFlow {
  RpState rp;
};

void BM_LazyEngine(benchmark::State& state) {
  const DcqcnParams params = profile(state.range(0));
  const auto flow_count = static_cast<uint32_t>(state.range(2));
  const ReactionPoint rp(params, kLineMbps);
  TimingWheel wheel(1000, flow_count);  // 1 µs slots
  std::vector<LazyFlow> flows(flow_count);
  for (uint32_t i = 0; i < flow_count; ++i) rp.start(flows[i].rp, 0);
  // The wheel always holds next_event_ns() of every flow below line rate (`before`, when
  // scheduled), so it is only touched when an event moved that time.
  const auto reschedule = [&](uint32_t i, TimeNs before) {
    const TimeNs next = rp.next_event_ns(flows[i].rp);
    if (next == before) return;
    if (next == kNever) {
      wheel.cancel(i);
    } else {
      wheel.insert(i, next);
    }
  };
  TraceCursor cursor(static_cast<int>(state.range(1)), flow_count);
  uint64_t increase_events = 0;
  uint64_t workload_events = 0;
  std::vector<TimerId> expired;
  expired.reserve(flow_count);
  for (auto _ : state) {
    const TraceEvent e = cursor.next();
    // Due flows come back as a batch so their states can be prefetched together.
    expired.clear();
    wheel.advance(e.at, expired);
    for (size_t k = 0; k < expired.size(); ++k) {
      if (k + 4 < expired.size()) __builtin_prefetch(&flows[expired[k + 4]], 1);
      const TimerId i = expired[k];
      rp.on_timer(flows[i].rp, e.at);
      ++increase_events;
      reschedule(i, kNever - 1);  // the entry was just handed back: always re-arm
    }
    __builtin_prefetch(&flows[cursor.upcoming_flow()], 1);
    LazyFlow& f = flows[e.flow];
    const TimeNs before = rp.next_event_ns(f.rp);
    if (e.bytes == 0) {
      rp.on_cnp(f.rp, e.at);
    } else {
      rp.on_bytes_sent(f.rp, e.at, e.bytes);
    }
    reschedule(e.flow, before);
    ++workload_events;
  }
  size_t below = 0;
  for (const LazyFlow& f : flows) below += rp.at_line_rate(f.rp) ? 0 : 1;
  state.SetItemsProcessed(static_cast<int64_t>(workload_events + increase_events));
  state.counters["workload_events/s"] =
      benchmark::Counter(static_cast<double>(workload_events), benchmark::Counter::kIsRate);
  state.counters["flows_below_line"] = static_cast<double>(below);
}

void BM_NaivePeriodicTimers(benchmark::State& state) {
  const DcqcnParams params = profile(state.range(0));
  const auto flow_count = static_cast<uint32_t>(state.range(2));
  const TimeNs period = us_to_ns(std::min(params.alpha_timer_us, params.increase_timer_us));
  std::vector<testing::EagerReactionPoint> flows(flow_count, testing::EagerReactionPoint(params, kLineMbps));
  using Wake = std::pair<TimeNs, uint32_t>;
  std::vector<Wake> heap;
  heap.reserve(flow_count);
  for (uint32_t i = 0; i < flow_count; ++i) {
    flows[i].start(0);
    heap.emplace_back(period, i);
  }
  std::priority_queue<Wake, std::vector<Wake>, std::greater<>> timers(std::greater<>{}, std::move(heap));
  TraceCursor cursor(static_cast<int>(state.range(1)), flow_count);
  uint64_t workload_events = 0;
  for (auto _ : state) {
    const TraceEvent e = cursor.next();
    while (timers.top().first <= e.at) {
      const auto [due, i] = timers.top();
      timers.pop();
      flows[i].advance(due);
      timers.emplace(due + period, i);
    }
    __builtin_prefetch(&flows[cursor.upcoming_flow()], 1);
    auto& f = flows[e.flow];
    if (e.bytes == 0) {
      f.on_cnp(e.at);
    } else {
      f.on_bytes_sent(e.at, e.bytes);
    }
    ++workload_events;
  }
  uint64_t increase_events = 0;
  for (const auto& f : flows) increase_events += f.increases_below_max();
  state.SetItemsProcessed(static_cast<int64_t>(workload_events + increase_events));
  state.counters["workload_events/s"] =
      benchmark::Counter(static_cast<double>(workload_events), benchmark::Counter::kIsRate);
}

// {profile, events per simulated µs, resident flows}; the 1k-flow rows show the cost without cache
// misses on the flow state.
void engine_args(benchmark::internal::Benchmark* b) {
  b->Args({0, 100, 100'000})->Args({1, 100, 100'000})->Args({1, 10, 100'000})->Args({1, 100, 1'000});
  b->Unit(benchmark::kNanosecond);
}
BENCHMARK(BM_LazyEngine)->Apply(engine_args);
BENCHMARK(BM_NaivePeriodicTimers)->Apply(engine_args);

}  // namespace
}  // namespace rdmad::cc

BENCHMARK_MAIN();
