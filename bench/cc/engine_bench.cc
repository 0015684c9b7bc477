// Reaction-point events per second with 100k resident flows: the lazy engine (closed-form α and
// increase events, only flows below line rate on a timing wheel) against a naive baseline that
// keeps one periodic timer per flow (period = the α timer K) in a std::priority_queue and walks
// every period step by step. Both replay the same deterministic trace of CNPs and sent-bytes
// events at random flows. Arguments: {profile (0 paper, 1 mlx5), events per simulated µs}.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <queue>
#include <random>
#include <utility>
#include <vector>

#include "rdmad/cc/reaction_point.h"
#include "rdmad/cc/timing_wheel.h"
#include "unit/cc/eager_reaction_point.h"

namespace rdmad::cc {
namespace {

constexpr uint32_t kFlows = 100'000;
constexpr double kLineMbps = 100'000;
constexpr size_t kTraceEvents = 1 << 20;
constexpr uint32_t kPacketBytes = 4096;

struct TraceEvent {
  TimeNs at;
  uint32_t flow;
  uint32_t bytes;  // 0: a CNP
};

// 10% CNPs, 90% one 4 KB packet sent, uniformly over the flows, `per_us` events per simulated µs.
std::vector<TraceEvent> make_trace(int per_us) {
  std::mt19937_64 rng(2015);
  std::vector<TraceEvent> trace(kTraceEvents);
  TimeNs t = 0;
  for (auto& e : trace) {
    t += static_cast<TimeNs>(rng() % (2000 / static_cast<uint64_t>(per_us)) + 1);  // mean 1000/per_us ns
    e.at = t;
    e.flow = static_cast<uint32_t>(rng() % kFlows);
    e.bytes = rng() % 10 == 0 ? 0 : kPacketBytes;
  }
  return trace;
}

DcqcnParams profile(int64_t which) { return which == 0 ? paper_profile() : mlx5_profile(); }

// Replays the trace cyclically, shifting time forward on every wrap so it never goes backwards.
class TraceCursor {
 public:
  explicit TraceCursor(const std::vector<TraceEvent>& trace) : trace_(trace) {}
  TraceEvent next() {
    if (i_ == trace_.size()) {
      i_ = 0;
      offset_ += trace_.back().at;
    }
    TraceEvent e = trace_[i_++];
    e.at += offset_;
    return e;
  }

 private:
  const std::vector<TraceEvent>& trace_;
  size_t i_ = 0;
  TimeNs offset_ = 0;
};

struct LazyFlow {
  RpState rp;
  TimerNode timer;
};

void BM_LazyEngine(benchmark::State& state) {
  const DcqcnParams params = profile(state.range(0));
  const std::vector<TraceEvent> trace = make_trace(static_cast<int>(state.range(1)));
  const ReactionPoint rp(params, kLineMbps);
  TimingWheel wheel(1000);  // 1 µs slots
  std::vector<LazyFlow> flows(kFlows);
  for (uint32_t i = 0; i < kFlows; ++i) {
    rp.start(flows[i].rp, 0);
    flows[i].timer.cookie = i;
  }
  const auto reschedule = [&](LazyFlow& f) {
    const TimeNs next = rp.next_event_ns(f.rp);
    if (next == kNever) {
      wheel.cancel(f.timer);
    } else if (!TimingWheel::scheduled(f.timer) || f.timer.due_ns != next) {
      wheel.insert(f.timer, next);
    }
  };
  TraceCursor cursor(trace);
  uint64_t increase_events = 0;
  uint64_t workload_events = 0;
  for (auto _ : state) {
    const TraceEvent e = cursor.next();
    wheel.advance(e.at, [&](TimerNode& n) {
      LazyFlow& f = flows[n.cookie];
      rp.on_timer(f.rp, e.at);
      ++increase_events;
      reschedule(f);
    });
    LazyFlow& f = flows[e.flow];
    if (e.bytes == 0) {
      rp.on_cnp(f.rp, e.at);
    } else {
      rp.on_bytes_sent(f.rp, e.at, e.bytes);
    }
    reschedule(f);
    ++workload_events;
  }
  size_t below = 0;
  for (const LazyFlow& f : flows) below += rp.at_line_rate(f.rp) ? 0 : 1;
  state.SetItemsProcessed(static_cast<int64_t>(workload_events + increase_events));
  state.counters["workload_events/s"] = benchmark::Counter(static_cast<double>(workload_events), benchmark::Counter::kIsRate);
  state.counters["flows_below_line"] = static_cast<double>(below);
}

void BM_NaivePeriodicTimers(benchmark::State& state) {
  const DcqcnParams params = profile(state.range(0));
  const std::vector<TraceEvent> trace = make_trace(static_cast<int>(state.range(1)));
  const TimeNs period = us_to_ns(std::min(params.alpha_timer_us, params.increase_timer_us));
  std::vector<testing::EagerReactionPoint> flows(kFlows, testing::EagerReactionPoint(params, kLineMbps));
  using Wake = std::pair<TimeNs, uint32_t>;
  std::vector<Wake> heap;
  heap.reserve(kFlows);
  for (uint32_t i = 0; i < kFlows; ++i) {
    flows[i].start(0);
    heap.emplace_back(period, i);
  }
  std::priority_queue<Wake, std::vector<Wake>, std::greater<>> timers(std::greater<>{}, std::move(heap));
  TraceCursor cursor(trace);
  uint64_t workload_events = 0;
  for (auto _ : state) {
    const TraceEvent e = cursor.next();
    while (timers.top().first <= e.at) {
      const auto [due, i] = timers.top();
      timers.pop();
      flows[i].advance(due);
      timers.emplace(due + period, i);
    }
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
  state.counters["workload_events/s"] = benchmark::Counter(static_cast<double>(workload_events), benchmark::Counter::kIsRate);
}

// {profile, events per simulated µs}
BENCHMARK(BM_LazyEngine)->Args({0, 100})->Args({1, 100})->Args({1, 10})->Unit(benchmark::kNanosecond);
BENCHMARK(BM_NaivePeriodicTimers)->Args({0, 100})->Args({1, 100})->Args({1, 10})->Unit(benchmark::kNanosecond);

}  // namespace
}  // namespace rdmad::cc

BENCHMARK_MAIN();
