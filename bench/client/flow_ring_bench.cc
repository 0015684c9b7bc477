// Submission-to-consume latency of a flow's submission ring across two threads (pinned to two
// different CPUs when the affinity mask allows), against the system-call path it replaces,
// measured in the same run:
//
//   BM_Ring<busy>/P     consumer busy-polls the ring
//   BM_Ring<sleep>/P    consumer sleeps in read() on the doorbell eventfd as soon as the ring is
//                       empty (prepare_sleep); the producer rings only when needs_doorbell() says so
//   BM_Pipe/P           baseline: one 8-byte write() per entry into a pipe, consumer blocked in read()
//   BM_Eventfd/P        baseline: timestamp in shared memory, one eventfd write() per entry,
//                       consumer blocked in read()
//
// P is the submission period in ns (0: full speed). The producer stamps steady_clock ns into
// Sqe.reserved2 just before the commit; the consumer subtracts it from its clock when it gets the
// entry. Counters: p50/p99/p99.9 latency in ns, doorbells (eventfd writes) per entry, and
// items_per_second over the whole run (manual time: first submission to last consumption).
#include <benchmark/benchmark.h>
#include <pthread.h>
#include <sched.h>
#include <sys/eventfd.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <memory>
#include <thread>
#include <vector>

#include "rdmad/flow_ring.h"

namespace rdmad::ring {
namespace {

constexpr uint32_t kDepth = 256;
constexpr uint32_t kPacedEntries = 100'000;        // 1 s at a 10 µs period
constexpr uint32_t kFullSpeedEntries = 2'000'000;  // ring
constexpr uint32_t kFullSpeedSyscallEntries = 500'000;

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// Pins the calling thread to the n-th CPU of the process's affinity mask (no-op with one CPU, or
// with RDMAD_BENCH_PIN=0: on a machine shared with other jobs a pinned thread cannot move away
// from a busy core).
void pin_to(int n) {
  const char* pin = std::getenv("RDMAD_BENCH_PIN");
  if (pin != nullptr && pin[0] == '0') return;
  cpu_set_t allowed;
  if (sched_getaffinity(0, sizeof(allowed), &allowed) != 0 || CPU_COUNT(&allowed) < 2) return;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (CPU_ISSET(cpu, &allowed) && n-- == 0) {
      cpu_set_t one;
      CPU_ZERO(&one);
      CPU_SET(cpu, &one);
      pthread_setaffinity_np(pthread_self(), sizeof(one), &one);
      return;
    }
  }
}

// Waits until the next submission time in clock_nanosleep (timer slack 1 ns), so that the paced
// producer leaves its CPU to the consumer like a client doing other work between submissions;
// after a long preemption it resynchronises instead of bursting the backlog.
class Pacer {
 public:
  explicit Pacer(int64_t period_ns) : period_ns_(period_ns), next_(now_ns()) {
    if (period_ns_ != 0) prctl(PR_SET_TIMERSLACK, 1UL, 0UL, 0UL, 0UL);
  }
  void wait() {
    if (period_ns_ == 0) return;
    next_ += period_ns_;
    timespec ts{static_cast<time_t>(next_ / 1'000'000'000), static_cast<long>(next_ % 1'000'000'000)};
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, nullptr) == EINTR) {
    }
    int64_t now = now_ns();
    if (now - next_ > 100 * period_ns_) next_ = now;
  }

 private:
  int64_t period_ns_;
  int64_t next_;
};

// The producer's loop: submit(i) for every entry, at the pace.
template <class Submit>
void submit_paced(int64_t period_ns, uint32_t entries, Submit submit) {
  Pacer pacer(period_ns);
  for (uint32_t i = 0; i < entries; ++i) {
    pacer.wait();
    submit(i);
  }
}

struct Result {
  std::vector<int64_t> latency_ns;
  uint64_t doorbells = 0;
  int64_t first_ns = 0;
  int64_t last_ns = 0;
};

void ring_doorbell(int fd) {
  uint64_t one = 1;
  if (write(fd, &one, sizeof(one)) != sizeof(one)) std::abort();
}

// Runs producer and consumer on two pinned threads; `produce(i)` and `consume()` are the sides.
template <class Produce, class Consume>
void run_pair(Result& r, uint32_t entries, Produce produce, Consume consume) {
  r.latency_ns.assign(entries, 0);
  std::thread consumer([&] {
    pin_to(1);
    consume();
  });
  std::thread producer([&] {
    pin_to(0);
    r.first_ns = now_ns();
    produce();
  });
  producer.join();
  consumer.join();
}

enum class Wait { kBusy, kSleep };

Result run_ring(Wait wait, int64_t period_ns, uint32_t entries) {
  const Layout l = layout_for(kDepth, kDepth);
  auto memory =
      std::unique_ptr<void, decltype(&std::free)>(std::aligned_alloc(4096, l.total_bytes), &std::free);
  std::fill_n(static_cast<char*>(memory.get()), l.total_bytes, 0);
  init_header(memory.get(), 1, kDepth, kDepth);
  Header& h = *static_cast<Header*>(memory.get());
  Sqe* slots = sq_slots(memory.get(), l);
  const int doorbell = eventfd(0, EFD_CLOEXEC);
  Result r;
  run_pair(
      r, entries,
      [&] {
        Producer<Sqe> p(slots, kDepth, &h.sq_tail, &h.sq_head);
        submit_paced(period_ns, entries, [&](uint32_t i) {
          Sqe* slot;
          while ((slot = p.claim()) == nullptr) {
          }
          *slot = Sqe{};
          slot->op = static_cast<uint8_t>(Op::kWrite);
          slot->wr_id = i;
          slot->length = 4096;
          slot->reserved2 = static_cast<uint64_t>(now_ns());
          p.commit();
          if (needs_doorbell(h.daemon_idle)) {
            ring_doorbell(doorbell);
            ++r.doorbells;
          }
        });
      },
      [&] {
        Consumer<Sqe> c(slots, kDepth, &h.sq_tail, &h.sq_head);
        Sqe e;
        for (uint32_t n = 0; n < entries;) {
          if (c.pop(e)) {
            r.latency_ns[n++] = now_ns() - static_cast<int64_t>(e.reserved2);
            if ((n & 31) == 0) c.release();
            continue;
          }
          c.release();
          if (wait == Wait::kBusy || prepare_sleep(h.daemon_idle, h.sq_tail, c.head())) continue;
          uint64_t v;
          if (read(doorbell, &v, sizeof(v)) != sizeof(v)) std::abort();
          h.daemon_idle.store(0, std::memory_order_relaxed);
        }
        r.last_ns = now_ns();
      });
  close(doorbell);
  return r;
}

Result run_pipe(int64_t period_ns, uint32_t entries) {
  int fds[2];
  if (pipe(fds) != 0) std::abort();
  Result r;
  run_pair(
      r, entries,
      [&] {
        submit_paced(period_ns, entries, [&](uint32_t) {
          int64_t ts = now_ns();
          if (write(fds[1], &ts, sizeof(ts)) != sizeof(ts)) std::abort();
        });
        r.doorbells = entries;
      },
      [&] {
        int64_t batch[64];
        for (uint32_t n = 0; n < entries;) {
          ssize_t got = read(fds[0], batch, sizeof(batch));
          if (got <= 0 || got % 8 != 0) std::abort();  // writes of 8 bytes are atomic
          int64_t now = now_ns();
          for (ssize_t k = 0; k < got / 8; ++k) r.latency_ns[n++] = now - batch[k];
        }
        r.last_ns = now_ns();
      });
  close(fds[0]);
  close(fds[1]);
  return r;
}

Result run_eventfd(int64_t period_ns, uint32_t entries) {
  const int fd = eventfd(0, EFD_CLOEXEC);
  std::vector<std::atomic<int64_t>> stamps(entries);
  Result r;
  run_pair(
      r, entries,
      [&] {
        submit_paced(period_ns, entries, [&](uint32_t i) {
          stamps[i].store(now_ns(), std::memory_order_release);
          ring_doorbell(fd);
        });
        r.doorbells = entries;
      },
      [&] {
        for (uint32_t n = 0; n < entries;) {
          uint64_t count;
          if (read(fd, &count, sizeof(count)) != sizeof(count)) std::abort();
          int64_t now = now_ns();
          for (uint64_t k = 0; k < count; ++k, ++n)
            r.latency_ns[n] = now - stamps[n].load(std::memory_order_acquire);
        }
        r.last_ns = now_ns();
      });
  close(fd);
  return r;
}

void report(benchmark::State& state, Result& r) {
  auto& v = r.latency_ns;
  auto at = [&v](double q) {
    auto k = static_cast<size_t>(q * static_cast<double>(v.size() - 1));
    std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(k), v.end());
    return static_cast<double>(v[k]);
  };
  state.counters["p50_ns"] = at(0.5);
  state.counters["p99_ns"] = at(0.99);
  state.counters["p999_ns"] = at(0.999);
  state.counters["doorbells_per_entry"] = static_cast<double>(r.doorbells) / static_cast<double>(v.size());
  state.SetIterationTime(static_cast<double>(r.last_ns - r.first_ns) * 1e-9);
  state.SetItemsProcessed(static_cast<int64_t>(v.size()));
}

uint32_t entries_for(int64_t period_ns, uint32_t full_speed) {
  return period_ns == 0 ? full_speed : kPacedEntries;
}

template <Wait kWait>
void BM_Ring(benchmark::State& state) {
  for (auto _ : state) {
    Result r = run_ring(kWait, state.range(0), entries_for(state.range(0), kFullSpeedEntries));
    report(state, r);
  }
}
void BM_Pipe(benchmark::State& state) {
  for (auto _ : state) {
    Result r = run_pipe(state.range(0), entries_for(state.range(0), kFullSpeedSyscallEntries));
    report(state, r);
  }
}
void BM_Eventfd(benchmark::State& state) {
  for (auto _ : state) {
    Result r = run_eventfd(state.range(0), entries_for(state.range(0), kFullSpeedSyscallEntries));
    report(state, r);
  }
}

#define RDMAD_RING_BENCH(fn) \
  BENCHMARK(fn)->Arg(10'000)->Arg(0)->Iterations(1)->UseManualTime()->Unit(benchmark::kMillisecond)
RDMAD_RING_BENCH(BM_Ring<Wait::kBusy>);
RDMAD_RING_BENCH(BM_Ring<Wait::kSleep>);
RDMAD_RING_BENCH(BM_Pipe);
RDMAD_RING_BENCH(BM_Eventfd);

}  // namespace
}  // namespace rdmad::ring

BENCHMARK_MAIN();
