#include "rdmad/base/trace_points.h"

#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <memory>

namespace rdmad::base::trace {
namespace {

constexpr uint64_t kCapacity = uint64_t{1} << 20;

struct Event {
  int64_t ns;
  uint64_t arg;
  int32_t tid;
  Point point;
};

constexpr std::array<std::string_view, static_cast<size_t>(Point::kCount)> kNames = {
    "request_taken", "recv_submitted",    "credit_taken",      "send_started",       "chunk_posted",
    "chunk_done",    "done_posted",       "done_arrived",      "completion_written", "engine_sleeps",
    "engine_wakes",  "recv_post_sent",    "recv_post_arrived", "packets_sent",       "packets_received",
    "bench_start",   "bench_recv_posted", "bench_send_posted", "bench_send_seen",    "bench_recv_seen",
};
static_assert(kNames.back() == "bench_recv_seen", "one name per Point, in order");

// Allocated by the first point recorded (a process that records none pays nothing) and never
// freed: a thread still recording while the process exits writes into live memory.
struct Buffer {
  std::unique_ptr<Event[]> events{new Event[kCapacity]};
  std::atomic<uint64_t> next{0};
};

void write_at_exit() {
  const char* dir = std::getenv("RDMAD_TRACE_DIR");
  if (dir != nullptr && *dir != '\0')
    (void)write_file(std::string(dir) + "/trace." + std::to_string(::getpid()));
}

Buffer& buffer() {
  static Buffer* b = [] {
    auto* fresh = new Buffer;
    std::atexit(write_at_exit);
    return fresh;
  }();
  return *b;
}

}  // namespace

std::string_view name(Point p) {
  const auto i = static_cast<size_t>(p);
  return i < kNames.size() ? kNames[i] : "unknown";
}

void record(Point p, uint64_t arg) noexcept {
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  static thread_local const auto tid = static_cast<int32_t>(::syscall(SYS_gettid));
  Buffer& b = buffer();
  const uint64_t i = b.next.fetch_add(1, std::memory_order_relaxed);
  if (i >= kCapacity) return;
  b.events[i] = Event{int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec, arg, tid, p};
}

uint64_t recorded() { return std::min(buffer().next.load(std::memory_order_relaxed), kCapacity); }

bool write_file(const std::string& path) {
  Buffer& b = buffer();
  std::FILE* f = std::fopen(path.c_str(), "w");
  if (f == nullptr) return false;
  const uint64_t n = recorded();
  const int pid = ::getpid();
  for (uint64_t i = 0; i < n; ++i) {
    const Event& e = b.events[i];
    const std::string_view point = name(e.point);
    std::fprintf(f, "%lld %d %d %.*s %llu\n", static_cast<long long>(e.ns), pid, e.tid,
                 static_cast<int>(point.size()), point.data(), static_cast<unsigned long long>(e.arg));
  }
  return std::fclose(f) == 0;
}

}  // namespace rdmad::base::trace
