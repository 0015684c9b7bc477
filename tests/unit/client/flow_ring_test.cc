// Flow ring layout and the SPSC rings: layout and header validation, full/empty/wrap-around of the
// free-running indices, broken peers, two threads, and two processes with the doorbell protocol.
#include "rdmad/flow_ring.h"

#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <new>
#include <thread>
#include <vector>

namespace rdmad::ring {
namespace {

using Clock = std::chrono::steady_clock;

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr uint32_t kThreadEntries = 1'000'000;
#else
constexpr uint32_t kThreadEntries = 10'000'000;
#endif

// A zeroed memfd mapping holding one flow's rings, like the one the daemon creates.
class FlowMemory {
 public:
  FlowMemory(uint32_t sq_depth, uint32_t cq_depth, uint64_t flow_id = 7)
      : layout_(layout_for(sq_depth, cq_depth)), sq_depth_(sq_depth), cq_depth_(cq_depth) {
    fd_ = memfd_create("flow_ring_test", MFD_CLOEXEC);
    if (fd_ < 0 || ftruncate(fd_, static_cast<off_t>(layout_.total_bytes)) != 0) std::abort();
    base_ = mmap(nullptr, layout_.total_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd_, 0);
    if (base_ == MAP_FAILED) std::abort();
    init_header(base_, flow_id, sq_depth, cq_depth);
  }
  ~FlowMemory() {
    munmap(base_, layout_.total_bytes);
    close(fd_);
  }
  FlowMemory(const FlowMemory&) = delete;
  FlowMemory& operator=(const FlowMemory&) = delete;

  Header& header() { return *static_cast<Header*>(base_); }
  void* base() { return base_; }
  int fd() const { return fd_; }
  const Layout& layout() const { return layout_; }
  Sqe* sq() { return sq_slots(base_, layout_); }
  Cqe* cq() { return cq_slots(base_, layout_); }
  Producer<Sqe> sq_producer() { return {sq(), sq_depth_, &header().sq_tail, &header().sq_head}; }
  Consumer<Sqe> sq_consumer() { return {sq(), sq_depth_, &header().sq_tail, &header().sq_head}; }
  Producer<Cqe> cq_producer() { return {cq(), cq_depth_, &header().cq_tail, &header().cq_head}; }
  Consumer<Cqe> cq_consumer() { return {cq(), cq_depth_, &header().cq_tail, &header().cq_head}; }

 private:
  Layout layout_;
  uint32_t sq_depth_;
  uint32_t cq_depth_;
  int fd_ = -1;
  void* base_ = nullptr;
};

// Every byte of the entry depends on i, so a stale, torn or reordered slot shows.
Sqe make_sqe(uint32_t i) {
  Sqe s{};
  s.op = static_cast<uint8_t>(Op::kWrite) + static_cast<uint8_t>(i % 4);
  s.flags = static_cast<uint8_t>(i >> 3);
  s.reserved0 = static_cast<uint16_t>(i * 7);
  s.reserved1 = ~i;
  s.wr_id = uint64_t{i} * 0x9e3779b97f4a7c15ULL;
  s.local_handle = i + 1;
  s.local_offset = uint64_t{i} << 12;
  s.remote_handle = i ^ 0x5a5a5a5aU;
  s.remote_offset = uint64_t{i} * 3;
  s.length = uint64_t{i} + 4096;
  s.reserved2 = ~uint64_t{i};
  return s;
}

Cqe make_cqe(uint32_t i) {
  Cqe c{};
  c.wr_id = uint64_t{i} * 0x9e3779b97f4a7c15ULL;
  c.length = i + 17;
  c.status = -static_cast<int32_t>(i % 5);
  c.op = static_cast<uint8_t>(i % 4 + 1);
  c.reserved1 = ~uint64_t{i};
  return c;
}

template <class T>
bool same(const T& a, const T& b) {
  return std::memcmp(&a, &b, sizeof(T)) == 0;
}

TEST(FlowRingLayout, OffsetsAndRounding) {
  constexpr Layout l = layout_for(8, 16);
  static_assert(l.sq_offset == sizeof(Header));
  EXPECT_EQ(l.sq_offset, 320u);
  EXPECT_EQ(l.cq_offset, 320u + 8 * 64);
  EXPECT_EQ(l.total_bytes, 4096u);
  Layout big = layout_for(1024, 2048);
  EXPECT_EQ(big.cq_offset, 320u + 1024 * 64);
  EXPECT_EQ(big.total_bytes, (320u + 1024 * 64 + 2048 * 32 + 4095) / 4096 * 4096);
  EXPECT_EQ(big.cq_offset % alignof(Cqe), 0u);
  // The largest depths do not overflow 64-bit arithmetic.
  Layout huge = layout_for(1u << 31, 1u << 31);
  EXPECT_EQ(huge.cq_offset, 320u + (uint64_t{1} << 37));
  EXPECT_EQ(huge.total_bytes, (320u + (uint64_t{1} << 37) + (uint64_t{1} << 36) + 4095) & ~uint64_t{4095});
}

TEST(FlowRingHeader, InitialisedHeaderIsValid) {
  FlowMemory m(64, 128, 42);
  const Header& h = m.header();
  EXPECT_EQ(h.magic, kMagic);
  EXPECT_EQ(h.version, kLayoutVersion);
  EXPECT_EQ(h.sq_depth, 64u);
  EXPECT_EQ(h.cq_depth, 128u);
  EXPECT_EQ(h.flow_id, 42u);
  EXPECT_EQ(h.sq_offset, m.layout().sq_offset);
  EXPECT_EQ(h.cq_offset, m.layout().cq_offset);
  EXPECT_EQ(h.total_bytes, m.layout().total_bytes);
  EXPECT_EQ(h.sq_tail.load(), 0u);
  EXPECT_EQ(h.daemon_idle.load(), 0u);
  EXPECT_TRUE(header_valid(m.base(), m.layout().total_bytes));
  EXPECT_TRUE(header_valid(m.base(), m.layout().total_bytes + 4096));
}

TEST(FlowRingHeader, EveryCorruptedFieldIsRejected) {
  FlowMemory m(64, 128);
  const std::vector<std::pair<const char*, std::function<void(Header&)>>> corruptions = {
      {"magic", [](Header& h) { h.magic ^= 1; }},
      {"version 0", [](Header& h) { h.version = 0; }},
      {"version +1", [](Header& h) { h.version = kLayoutVersion + 1; }},
      {"sq_depth 0", [](Header& h) { h.sq_depth = 0; }},
      {"sq_depth not a power of two", [](Header& h) { h.sq_depth = 48; }},
      {"sq_depth other power of two", [](Header& h) { h.sq_depth = 32; }},
      {"sq_depth huge", [](Header& h) { h.sq_depth = 1u << 31; }},
      {"cq_depth 0", [](Header& h) { h.cq_depth = 0; }},
      {"cq_depth not a power of two", [](Header& h) { h.cq_depth = 129; }},
      {"cq_depth other power of two", [](Header& h) { h.cq_depth = 256; }},
      {"sq_offset", [](Header& h) { h.sq_offset += 64; }},
      {"sq_offset 0", [](Header& h) { h.sq_offset = 0; }},
      {"cq_offset", [](Header& h) { h.cq_offset -= 32; }},
      {"total_bytes larger", [](Header& h) { h.total_bytes += 4096; }},
      {"total_bytes smaller", [](Header& h) { h.total_bytes -= 4096; }},
  };
  for (const auto& [name, corrupt] : corruptions) {
    init_header(m.base(), 7, 64, 128);
    ASSERT_TRUE(header_valid(m.base(), m.layout().total_bytes));
    corrupt(m.header());
    EXPECT_FALSE(header_valid(m.base(), m.layout().total_bytes)) << name;
  }
}

TEST(FlowRingHeader, MappingTooSmallIsRejected) {
  FlowMemory m(64, 128);
  EXPECT_FALSE(header_valid(m.base(), m.layout().total_bytes - 1));
  EXPECT_FALSE(header_valid(m.base(), m.layout().cq_offset));
  EXPECT_FALSE(header_valid(m.base(), sizeof(Header) - 1));
  EXPECT_FALSE(header_valid(m.base(), 0));
  // A self-consistent header that describes rings larger than the mapping.
  init_header(m.base(), 7, 4096, 4096);
  EXPECT_FALSE(header_valid(m.base(), m.layout().total_bytes));
  EXPECT_TRUE(header_valid(m.base(), layout_for(4096, 4096).total_bytes));
}

TEST(FlowRing, PushPopUntilFullAndEmpty) {
  constexpr uint32_t kDepth = 8;
  FlowMemory m(kDepth, kDepth);
  auto p = m.sq_producer();
  auto c = m.sq_consumer();
  Sqe out{};
  EXPECT_EQ(c.available(), 0u);
  EXPECT_FALSE(c.pop(out));
  EXPECT_EQ(p.free_slots(), kDepth);
  for (uint32_t i = 0; i < kDepth; ++i) ASSERT_TRUE(p.push(make_sqe(i))) << i;
  EXPECT_EQ(p.free_slots(), 0u);
  EXPECT_EQ(p.claim(), nullptr);
  EXPECT_FALSE(p.push(make_sqe(99)));
  EXPECT_EQ(m.header().sq_tail.load(), kDepth);
  EXPECT_EQ(c.available(), kDepth);
  for (uint32_t i = 0; i < kDepth / 2; ++i) {
    ASSERT_TRUE(c.pop(out));
    EXPECT_TRUE(same(out, make_sqe(i))) << i;
  }
  // Read but not released: the slots still belong to the consumer.
  EXPECT_EQ(p.claim(), nullptr);
  c.release();
  EXPECT_EQ(m.header().sq_head.load(), kDepth / 2);
  EXPECT_EQ(p.free_slots(), kDepth / 2);
  for (uint32_t i = kDepth; i < kDepth + kDepth / 2; ++i) ASSERT_TRUE(p.push(make_sqe(i)));
  EXPECT_FALSE(p.push(make_sqe(99)));
  for (uint32_t i = kDepth / 2; i < kDepth + kDepth / 2; ++i) {
    ASSERT_TRUE(c.pop(out));
    EXPECT_TRUE(same(out, make_sqe(i))) << i;
  }
  EXPECT_FALSE(c.pop(out));
  c.release();
  EXPECT_EQ(p.free_slots(), kDepth);
}

TEST(FlowRing, ClaimCommitFillsInPlace) {
  FlowMemory m(4, 4);
  auto p = m.cq_producer();
  auto c = m.cq_consumer();
  Cqe* slot = p.claim();
  ASSERT_NE(slot, nullptr);
  EXPECT_EQ(slot, m.cq());
  *slot = make_cqe(5);
  EXPECT_EQ(c.available(), 0u);  // not visible before commit
  p.commit();
  Cqe out{};
  ASSERT_TRUE(c.pop(out));
  EXPECT_TRUE(same(out, make_cqe(5)));
}

// Indices near UINT32_MAX: rings built on a live flow (indices not at 0) must not read unpublished
// slots, must not report a false "full", and must wrap through 0.
TEST(FlowRing, FreeRunningIndicesWrapAround) {
  constexpr uint32_t kDepth = 16;
  for (uint32_t start : {UINT32_MAX - 5, UINT32_MAX, UINT32_MAX - kDepth + 1, 0x80000000u - 3}) {
    FlowMemory m(kDepth, kDepth);
    m.header().cq_tail.store(start);
    m.header().cq_head.store(start);
    auto p = m.cq_producer();
    auto c = m.cq_consumer();
    Cqe out{};
    EXPECT_EQ(c.available(), 0u) << start;
    EXPECT_FALSE(c.pop(out)) << start;
    EXPECT_EQ(p.free_slots(), kDepth) << start;
    uint32_t produced = 0;
    uint32_t consumed = 0;
    // Fill to full across the wrap, drain, then run a few odd-sized batches.
    for (uint32_t batch : {kDepth, 3u, 7u, kDepth, 1u, 13u}) {
      for (uint32_t i = 0; i < batch; ++i) ASSERT_TRUE(p.push(make_cqe(produced++))) << start;
      if (batch == kDepth) {
        EXPECT_EQ(p.claim(), nullptr) << start;
      }
      EXPECT_EQ(c.available(), batch) << start;
      for (uint32_t i = 0; i < batch; ++i) {
        ASSERT_TRUE(c.pop(out)) << start;
        ASSERT_TRUE(same(out, make_cqe(consumed++))) << start << " entry " << consumed - 1;
      }
      EXPECT_FALSE(c.pop(out)) << start;
      c.release();
    }
    EXPECT_EQ(m.header().cq_tail.load(), start + produced);
    EXPECT_EQ(m.header().cq_head.load(), start + consumed);
    EXPECT_EQ(p.free_slots(kDepth), kDepth);  // asking for the whole ring refreshes the head
  }
}

TEST(FlowRing, BrokenProducerIndexFailsTheConsumer) {
  constexpr uint32_t kDepth = 8;
  for (uint32_t start : {0u, 100u, UINT32_MAX - 2}) {
    FlowMemory m(kDepth, kDepth);
    m.header().sq_tail.store(start);
    m.header().sq_head.store(start);
    auto p = m.sq_producer();
    auto c = m.sq_consumer();
    ASSERT_TRUE(p.push(make_sqe(0)));
    ASSERT_TRUE(p.push(make_sqe(1)));
    Sqe out{};
    ASSERT_TRUE(c.pop(out));
    ASSERT_TRUE(c.pop(out));
    c.release();
    const uint32_t head = start + 2;
    auto& tail = m.header().sq_tail;
    tail.store(head - 1);  // backwards
    EXPECT_EQ(c.available(), UINT32_MAX) << start;
    EXPECT_FALSE(c.pop(out)) << start;
    tail.store(head - kDepth);
    EXPECT_EQ(c.available(), UINT32_MAX) << start;
    EXPECT_FALSE(c.pop(out)) << start;
    tail.store(head + kDepth + 1);  // more than a ring ahead
    EXPECT_EQ(c.available(), UINT32_MAX) << start;
    EXPECT_FALSE(c.pop(out)) << start;
    tail.store(head + 0x80000000u);
    EXPECT_EQ(c.available(), UINT32_MAX) << start;
    EXPECT_FALSE(c.pop(out)) << start;
    EXPECT_EQ(c.head(), head) << start;
    // Exactly one ring ahead is legal: a full ring.
    tail.store(head + kDepth);
    EXPECT_EQ(c.available(), kDepth) << start;
  }
}

TEST(FlowRing, BrokenConsumerIndexStopsTheProducer) {
  constexpr uint32_t kDepth = 8;
  for (uint32_t start : {0u, UINT32_MAX - 1}) {
    for (int64_t bad_offset : {int64_t{1}, int64_t{5}, -int64_t{kDepth} - 1, int64_t{0x40000000}}) {
      FlowMemory m(kDepth, kDepth);
      m.header().cq_tail.store(start);
      m.header().cq_head.store(start);
      auto p = m.cq_producer();
      for (uint32_t i = 0; i < kDepth; ++i) ASSERT_TRUE(p.push(make_cqe(i)));
      std::vector<Cqe> before(m.cq(), m.cq() + kDepth);
      // The consumer claims to have read past the tail (or fell more than a ring behind).
      m.header().cq_head.store(p.tail() + static_cast<uint32_t>(bad_offset));
      EXPECT_EQ(p.free_slots(), 0u) << start << " " << bad_offset;
      EXPECT_EQ(p.claim(), nullptr);
      EXPECT_FALSE(p.push(make_cqe(99)));
      EXPECT_EQ(std::memcmp(before.data(), m.cq(), kDepth * sizeof(Cqe)), 0) << "slots overwritten";
      EXPECT_EQ(m.header().cq_tail.load(), start + kDepth);
      // A producer constructed on the broken ring refuses as well.
      auto fresh = m.cq_producer();
      EXPECT_EQ(fresh.free_slots(), 0u);
      EXPECT_FALSE(fresh.push(make_cqe(99)));
      EXPECT_EQ(std::memcmp(before.data(), m.cq(), kDepth * sizeof(Cqe)), 0) << "slots overwritten";
    }
  }
}

TEST(FlowRingSleep, OneDoorbellPerAnnouncedSleep) {
  FlowMemory m(8, 8);
  Header& h = m.header();
  auto p = m.sq_producer();
  auto c = m.sq_consumer();
  EXPECT_FALSE(needs_doorbell(h.daemon_idle));  // the consumer is awake
  EXPECT_FALSE(prepare_sleep(h.daemon_idle, h.sq_tail, c.head()));
  EXPECT_EQ(h.daemon_idle.load(), 1u);
  ASSERT_TRUE(p.push(make_sqe(0)));
  EXPECT_TRUE(needs_doorbell(h.daemon_idle));
  ASSERT_TRUE(p.push(make_sqe(1)));
  EXPECT_FALSE(needs_doorbell(h.daemon_idle)) << "the consumer was already woken";
  // Work arrived between the consumer's last look and its announcement: it must not sleep.
  EXPECT_TRUE(prepare_sleep(h.daemon_idle, h.sq_tail, c.head()));
  EXPECT_EQ(h.daemon_idle.load(), 0u);
  EXPECT_FALSE(needs_doorbell(h.daemon_idle));
  Sqe out{};
  ASSERT_TRUE(c.pop(out));
  ASSERT_TRUE(c.pop(out));
  c.release();
  EXPECT_FALSE(prepare_sleep(h.daemon_idle, h.sq_tail, c.head()));
}

// Spins, yielding now and then so the peer can run on an oversubscribed machine.
class Backoff {
 public:
  void pause() {
    if (++spins_ % 64 == 0) std::this_thread::yield();
  }

 private:
  uint32_t spins_ = 0;
};

TEST(FlowRing, TwoThreadsInOrder) {
  constexpr uint32_t kDepth = 1024;
  FlowMemory m(kDepth, 16);
  std::atomic<bool> stop{false};
  std::thread producer([&m, &stop] {
    auto p = m.sq_producer();
    Backoff backoff;
    for (uint32_t i = 0; i < kThreadEntries && !stop.load(std::memory_order_relaxed);) {
      if (Sqe* slot = p.claim()) {
        *slot = make_sqe(i++);
        p.commit();
      } else {
        backoff.pause();
      }
    }
  });
  auto c = m.sq_consumer();
  Backoff backoff;
  uint32_t mismatches = 0;
  uint32_t next = 0;
  const auto deadline = Clock::now() + std::chrono::seconds(60);
  Sqe out{};
  while (next < kThreadEntries && Clock::now() < deadline) {
    uint32_t batch = 0;
    while (batch < 64 && c.pop(out)) {
      mismatches += same(out, make_sqe(next++)) ? 0 : 1;
      ++batch;
    }
    if (batch == 0) {
      if (c.available() == UINT32_MAX) break;
      backoff.pause();
      continue;
    }
    c.release();
  }
  stop.store(true);
  producer.join();
  EXPECT_EQ(next, kThreadEntries);
  EXPECT_EQ(mismatches, 0u);
  EXPECT_FALSE(c.pop(out));
  EXPECT_EQ(m.header().sq_tail.load(), kThreadEntries);
}

// The two processes of a flow: the child (the client) maps the memfd itself, submits entries and
// rings the doorbell eventfd only when the parent (the daemon) announced it sleeps; the parent
// sleeps in poll() on the doorbell when idle. Phase 1 streams at full speed against a consumer that
// spins a while before sleeping: doorbells must be rare. Phase 2 is a ping-pong through both rings
// where both sides go to sleep as soon as they are idle: every entry is the only one outstanding,
// so a lost wake-up hangs a side until its poll deadline and fails the test.
constexpr uint32_t kBusyEntries = 200'000;
constexpr uint32_t kPingPongs = 500;
constexpr int kPollDeadlineMs = 5'000;

struct ChildStats {
  std::atomic<uint32_t> busy_doorbells;
  std::atomic<uint32_t> pingpong_doorbells;
  std::atomic<uint32_t> sleeps;
};

enum ChildExit { kChildOk = 0, kChildBadHeader = 2, kChildBadCqe = 3, kChildLostWakeUp = 4, kChildStuck = 5 };

void ring(int fd) {
  uint64_t one = 1;
  if (write(fd, &one, sizeof(one)) != sizeof(one)) std::abort();
}

// Waits for `fd` after prepare_sleep() said to; false on deadline.
bool sleep_on(int fd, uint64_t& counted) {
  pollfd pfd{fd, POLLIN, 0};
  if (poll(&pfd, 1, kPollDeadlineMs) != 1) return false;
  uint64_t v = 0;
  if (read(fd, &v, sizeof(v)) != sizeof(v)) std::abort();
  counted += v;
  return true;
}

[[noreturn]] void run_client(int memfd, uint64_t bytes, int doorbell_fd, int completion_fd,
                             ChildStats* stats) {
  void* base = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, memfd, 0);
  if (base == MAP_FAILED || !header_valid(base, bytes)) _exit(kChildBadHeader);
  auto& h = *static_cast<Header*>(base);
  const Layout l = layout_for(h.sq_depth, h.cq_depth);
  Producer<Sqe> sq(sq_slots(base, l), h.sq_depth, &h.sq_tail, &h.sq_head);
  Consumer<Cqe> cq(cq_slots(base, l), h.cq_depth, &h.cq_tail, &h.cq_head);
  const auto deadline = Clock::now() + std::chrono::seconds(30);
  Backoff backoff;
  auto submit = [&](uint32_t i, std::atomic<uint32_t>& doorbells) {
    Sqe* slot;
    while ((slot = sq.claim()) == nullptr) {
      if (Clock::now() > deadline) _exit(kChildStuck);
      backoff.pause();
    }
    *slot = make_sqe(i);
    sq.commit();
    if (needs_doorbell(h.daemon_idle)) {
      ring(doorbell_fd);
      doorbells.fetch_add(1, std::memory_order_relaxed);
    }
  };
  for (uint32_t i = 0; i < kBusyEntries; ++i) submit(i, stats->busy_doorbells);
  uint64_t completions_counted = 0;
  for (uint32_t j = 0; j < kPingPongs; ++j) {
    submit(kBusyEntries + j, stats->pingpong_doorbells);
    Cqe out{};
    while (!cq.pop(out)) {
      if (cq.available() == UINT32_MAX) _exit(kChildBadCqe);
      if (prepare_sleep(h.client_armed, h.cq_tail, cq.head())) continue;
      stats->sleeps.fetch_add(1, std::memory_order_relaxed);
      if (!sleep_on(completion_fd, completions_counted)) _exit(kChildLostWakeUp);
      h.client_armed.store(0, std::memory_order_relaxed);
    }
    if (!same(out, make_cqe(j))) _exit(kChildBadCqe);
    cq.release();
  }
  _exit(kChildOk);
}

TEST(FlowRingProcesses, DoorbellsAreRareWhenBusyAndNoWakeUpIsLost) {
  FlowMemory m(64, 64);
  const int doorbell_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  const int completion_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  ASSERT_GE(doorbell_fd, 0);
  ASSERT_GE(completion_fd, 0);
  void* stats_page = mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(stats_page, MAP_FAILED);
  auto* stats = new (stats_page) ChildStats{};

  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) run_client(m.fd(), m.layout().total_bytes, doorbell_fd, completion_fd, stats);
  struct Reaper {  // kills the child if an assertion below returns early
    pid_t pid;
    int status = -1;
    ~Reaper() {
      if (status == -1) {
        kill(pid, SIGKILL);
        waitpid(pid, nullptr, 0);
      }
    }
  } reaper{pid};

  Header& h = m.header();
  auto sq = m.sq_consumer();
  auto cq = m.cq_producer();
  constexpr uint32_t kTotal = kBusyEntries + kPingPongs;
  constexpr auto kBusySpin = std::chrono::milliseconds(2);
  uint32_t next = 0;
  uint32_t mismatches = 0;
  uint32_t arms = 0;  // prepare_sleep() calls: each arms at most one doorbell
  uint32_t sleeps = 0;
  uint32_t completion_doorbells = 0;
  uint64_t doorbells_counted = 0;
  auto idle_since = Clock::now();
  bool idle = false;
  Backoff idle_backoff;
  Sqe out{};
  while (next < kTotal) {
    if (sq.pop(out)) {
      idle = false;
      mismatches += same(out, make_sqe(next)) ? 0 : 1;
      if (next >= kBusyEntries) {
        sq.release();
        ASSERT_TRUE(cq.push(make_cqe(next - kBusyEntries)));
        if (needs_doorbell(h.client_armed)) {
          ring(completion_fd);
          ++completion_doorbells;
        }
      }
      if (++next % 16 == 0) sq.release();
      continue;
    }
    sq.release();
    ASSERT_NE(sq.available(), UINT32_MAX);
    if (next < kBusyEntries) {
      if (!idle) {
        idle = true;
        idle_since = Clock::now();
      }
      if (Clock::now() - idle_since < kBusySpin) {
        idle_backoff.pause();
        continue;
      }
    }
    ++arms;
    if (prepare_sleep(h.daemon_idle, h.sq_tail, sq.head())) continue;
    ++sleeps;
    ASSERT_TRUE(sleep_on(doorbell_fd, doorbells_counted)) << "lost wake-up after " << next << " entries";
    h.daemon_idle.store(0, std::memory_order_relaxed);
    idle = false;
  }
  sq.release();
  ASSERT_EQ(waitpid(pid, &reaper.status, 0), pid);
  ASSERT_TRUE(WIFEXITED(reaper.status)) << reaper.status;
  ASSERT_EQ(WEXITSTATUS(reaper.status), kChildOk);
  uint64_t rest = 0;
  if (read(doorbell_fd, &rest, sizeof(rest)) == sizeof(rest)) doorbells_counted += rest;

  EXPECT_EQ(next, kTotal);
  EXPECT_EQ(mismatches, 0u);
  EXPECT_EQ(h.sq_tail.load(), kTotal);
  EXPECT_EQ(h.cq_head.load(), kPingPongs);
  const uint32_t busy_doorbells = stats->busy_doorbells.load();
  const uint32_t pingpong_doorbells = stats->pingpong_doorbells.load();
  EXPECT_EQ(doorbells_counted, uint64_t{busy_doorbells} + pingpong_doorbells)
      << "an eventfd write went missing";
  EXPECT_LT(busy_doorbells, kBusyEntries / 20) << "a busy consumer should need few doorbells";
  EXPECT_LE(busy_doorbells + pingpong_doorbells, arms) << "more than one doorbell per announced sleep";
  EXPECT_LE(pingpong_doorbells, kPingPongs);
  EXPECT_LE(completion_doorbells, kPingPongs);
  EXPECT_LE(stats->sleeps.load(), completion_doorbells);  // every client sleep was woken by one
  RecordProperty("busy_doorbells", static_cast<int>(busy_doorbells));
  RecordProperty("pingpong_doorbells", static_cast<int>(pingpong_doorbells));
  RecordProperty("daemon_sleeps", static_cast<int>(sleeps));
  RecordProperty("client_sleeps", static_cast<int>(stats->sleeps.load()));
  std::printf("busy doorbells %u/%u, ping-pong doorbells %u/%u, daemon sleeps %u, client sleeps %u\n",
              busy_doorbells, kBusyEntries, pingpong_doorbells, kPingPongs, sleeps, stats->sleeps.load());
  munmap(stats_page, 4096);
  close(doorbell_fd);
  close(completion_fd);
}

}  // namespace
}  // namespace rdmad::ring
