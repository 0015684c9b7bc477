// The soft datapath thread's own counters (NicCounters::datapath_cpu_ns, datapath_sleeps), which
// the daemon exports as rdmad_datapath_cpu_seconds_total / rdmad_datapath_sleeps_total: CPU time
// grows with the traffic the thread moves, an idle thread sleeps instead of spinning, and a
// request/response exchange lets it sleep between requests.
#include <gtest/gtest.h>
#include <time.h>

#include <chrono>
#include <thread>

#include "verbs_test_util.h"

namespace rdmad::verbs::test {
namespace {

double wall_seconds_now() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) / 1e9;
}

class DatapathCounters : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    auto da = open_device("soft", soft_config(), &why);
    auto db = open_device("soft", soft_config(), &why);
    ASSERT_TRUE(da && db) << why;
    make_endpoint(a_, std::move(da));
    make_endpoint(b_, std::move(db));
    connect_pair(a_, b_, {.mtu = 4096});
  }

  // One signalled RDMA WRITE of `bytes` from a to b, waited for; returns whether it succeeded and
  // the bytes arrived.
  bool write(size_t bytes, uint32_t seed) {
    std::vector<uint8_t> src(bytes), dst(bytes, 0);
    fill_pattern(src, seed);
    auto smr = a_.pd->reg_mr(src.data(), bytes, 0);
    auto dmr = b_.pd->reg_mr(dst.data(), bytes, kAccessLocalWrite | kAccessRemoteWrite);
    if (!smr.ok() || !dmr.ok()) return false;
    SendWr w;
    w.opcode = WrOpcode::kRdmaWrite;
    w.sge = {reinterpret_cast<uint64_t>(src.data()), static_cast<uint32_t>(bytes), smr.value()->lkey()};
    w.remote_addr = reinterpret_cast<uint64_t>(dst.data());
    w.rkey = dmr.value()->rkey();
    if (!a_.qp->post_send({&w, 1}).ok()) return false;
    auto wc = wait_completions(*a_.scq, 1);
    return wc.size() == 1 && wc[0].status == WcStatus::kSuccess && dst == src;
  }

  Endpoint a_, b_;
};

TEST_F(DatapathCounters, CpuTimeGrowsWithTraffic) {
  const NicCounters before_a = a_.dev->counters(), before_b = b_.dev->counters();
  ASSERT_TRUE(write(64u << 20, 1));
  const NicCounters after_a = a_.dev->counters(), after_b = b_.dev->counters();
  // 64 MiB through both threads takes milliseconds of CPU at any speed this code reaches.
  EXPECT_GT(after_a.datapath_cpu_ns, before_a.datapath_cpu_ns + 1'000'000);
  EXPECT_GT(after_b.datapath_cpu_ns, before_b.datapath_cpu_ns + 1'000'000);
  EXPECT_GE(after_a.tx_packets - before_a.tx_packets, (64u << 20) / 4096);
}

TEST_F(DatapathCounters, IdleThreadSleepsInsteadOfSpinning) {
  ASSERT_TRUE(write(4096, 2));
  const NicCounters c0 = a_.dev->counters();
  const double t0 = wall_seconds_now();
  // An idle NIC's thread sleeps in ppoll until a packet, a post or its next timer: over a quarter
  // of a second it must use a small part of it (a spinning thread would use all of it).
  std::this_thread::sleep_for(std::chrono::milliseconds(250));
  const NicCounters c1 = a_.dev->counters();
  const double wall_ns = (wall_seconds_now() - t0) * 1e9;
  // With no timer pending it wakes at least every 100 ms, and each return to ppoll is counted.
  EXPECT_GT(c1.datapath_sleeps, c0.datapath_sleeps);
  EXPECT_LT(static_cast<double>(c1.datapath_cpu_ns - c0.datapath_cpu_ns), 0.5 * wall_ns)
      << "the idle datapath used " << (c1.datapath_cpu_ns - c0.datapath_cpu_ns) / 1e6 << " ms of CPU in "
      << wall_ns / 1e6 << " ms";
}

TEST_F(DatapathCounters, RequestResponseLetsBothThreadsSleepBetweenRequests) {
  // Each 64-byte WRITE is one packet out and one ACK back; between them both threads have nothing
  // to do and go to sleep, so the sleep counters grow with the number of round trips.
  const NicCounters a0 = a_.dev->counters(), b0 = b_.dev->counters();
  constexpr int kRoundTrips = 50;
  for (int i = 0; i < kRoundTrips; ++i) ASSERT_TRUE(write(64, 3 + i));
  const NicCounters a1 = a_.dev->counters(), b1 = b_.dev->counters();
  EXPECT_GE(b1.datapath_sleeps - b0.datapath_sleeps, static_cast<uint64_t>(kRoundTrips / 2));
  EXPECT_GE(a1.datapath_sleeps - a0.datapath_sleeps, static_cast<uint64_t>(kRoundTrips / 2));
}

}  // namespace
}  // namespace rdmad::verbs::test
