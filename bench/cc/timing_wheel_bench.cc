// Timing wheel insert+expire throughput with 1M pending entries: every simulated µs the wheel
// advances one 1 µs slot and every expired entry is re-inserted a uniform 1..R µs ahead, so the
// population stays at 1M and R/… sets how many expire per slot and how deep entries cascade.
// Baseline in the same run: the same workload on a std::priority_queue.
// Argument: R, the re-insert horizon in µs.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <queue>
#include <utility>
#include <vector>

#include "rdmad/cc/timing_wheel.h"

namespace rdmad::cc {
namespace {

constexpr uint32_t kPending = 1'000'000;
constexpr TimeNs kSlotNs = 1000;

class XorShift {
 public:
  uint64_t operator()() {
    s_ ^= s_ << 13;
    s_ ^= s_ >> 7;
    s_ ^= s_ << 17;
    return s_;
  }
  // Uniform in [1, n] by multiply-shift (a 64-bit modulo would cost more than the wheel).
  uint64_t one_to(uint64_t n) { return (((*this)() >> 32) * n >> 32) + 1; }

 private:
  uint64_t s_ = 0x2545f4914f6cdd1dULL;
};

// kPending timers due uniformly 1..R µs ahead of time 0, stepped one slot at a time.
class WheelWorkload {
 public:
  explicit WheelWorkload(uint64_t horizon_us) : horizon_us_(horizon_us), wheel_(kSlotNs, kPending) {
    for (TimerId id = 0; id < kPending; ++id) wheel_.insert(id, ahead());
  }
  // A uniform 1..R µs after the current time.
  TimeNs ahead() { return now_ + static_cast<TimeNs>(rng_.one_to(horizon_us_)) * kSlotNs; }
  // Advances one slot, re-inserting every expired timer ahead(); returns how many expired.
  uint64_t step() {
    now_ += kSlotNs;
    uint64_t expired = 0;
    wheel_.advance(now_, [&](TimerId id, TimeNs) {
      ++expired;
      wheel_.insert(id, ahead());
    });
    return expired;
  }
  TimingWheel& wheel() { return wheel_; }
  XorShift& rng() { return rng_; }

 private:
  uint64_t horizon_us_;
  TimingWheel wheel_;
  XorShift rng_;
  TimeNs now_ = 0;
};

void BM_TimingWheelInsertExpire(benchmark::State& state) {
  WheelWorkload work(static_cast<uint64_t>(state.range(0)));
  uint64_t expired = 0;
  for (auto _ : state) expired += work.step();
  if (work.wheel().size() != kPending) state.SkipWithError("population changed");
  state.SetItemsProcessed(static_cast<int64_t>(expired));
}

// The same, plus as many reschedules of random pending timers (each to a uniform 1..R µs ahead) as
// there are expiries: the pattern of flows whose next event moves (a CNP). A reschedule leaves a
// stale entry behind, dropped at its slot or by a sweep, so this measures that cost too.
// One item = one expiry + insert, or one reschedule.
void BM_TimingWheelReschedule(benchmark::State& state) {
  WheelWorkload work(static_cast<uint64_t>(state.range(0)));
  uint64_t items = 0;
  for (auto _ : state) {
    const uint64_t expired = work.step();
    for (uint64_t k = 0; k < expired; ++k) {
      const auto id = static_cast<TimerId>(work.rng().one_to(kPending) - 1);
      work.wheel().insert(id, work.ahead());
    }
    items += 2 * expired;
  }
  if (work.wheel().size() != kPending) state.SkipWithError("population changed");
  state.SetItemsProcessed(static_cast<int64_t>(items));
  state.counters["stale_entries"] = static_cast<double>(work.wheel().stale_entries());
}

void BM_PriorityQueueInsertExpire(benchmark::State& state) {
  const auto horizon_us = static_cast<uint64_t>(state.range(0));
  using Entry = std::pair<TimeNs, uint32_t>;
  std::vector<Entry> init;
  init.reserve(kPending);
  XorShift rng;
  for (uint32_t i = 0; i < kPending; ++i)
    init.emplace_back(static_cast<TimeNs>(rng.one_to(horizon_us)) * kSlotNs, i);
  std::priority_queue<Entry, std::vector<Entry>, std::greater<>> pq(std::greater<>{}, std::move(init));
  TimeNs now = 0;
  uint64_t expired = 0;
  for (auto _ : state) {
    now += kSlotNs;
    while (pq.top().first <= now) {
      const uint32_t id = pq.top().second;
      pq.pop();
      ++expired;
      pq.emplace(now + static_cast<TimeNs>(rng.one_to(horizon_us)) * kSlotNs, id);
    }
  }
  state.SetItemsProcessed(static_cast<int64_t>(expired));
}

BENCHMARK(BM_TimingWheelInsertExpire)->Arg(1'000)->Arg(10'000)->Arg(100'000)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_TimingWheelReschedule)->Arg(1'000)->Arg(10'000)->Arg(100'000)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_PriorityQueueInsertExpire)->Arg(1'000)->Arg(10'000)->Arg(100'000)->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace rdmad::cc

BENCHMARK_MAIN();
