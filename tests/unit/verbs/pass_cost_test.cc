// A soft NIC's loop pass visits the QPs with work, not every QP: idle QPs (connected, in RTS, with
// nothing queued and no timer due) are not touched, and what only time ends — a retransmit
// timeout — still fires for a QP nothing else wakes, from the NIC's timing wheel. Before the wheel,
// every pass scanned every QP for its timers and gave each a transmit turn per round.
#include <chrono>

#include <gtest/gtest.h>

#include <vector>

#include "fake_peer.h"
#include "rdmad/verbs/engine/engine.h"
#include "verbs_test_util.h"

namespace rdmad::verbs::test {
namespace {

using engine::pass_stats_for_test;
using engine::PassStats;

constexpr int kIdleQps = 200;
// A pass gives a busy QP at most 16 transmit turns (its rounds), plus the timers it handles.
constexpr uint64_t kMaxVisitsPerBusyPass = 20;

PassStats delta(const PassStats& from, const PassStats& to) {
  return {to.passes - from.passes, to.qps_visited - from.qps_visited, to.timers_scheduled};
}

class PassCostTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string skip;
    make_endpoint(a_, open_device("soft", soft_config(), &skip));
    make_endpoint(b_, open_device("soft", soft_config(), &skip));
    ASSERT_TRUE(a_.dev && b_.dev) << skip;
    // kIdleQps more pairs between the same NICs, connected and idle.
    const PortInfo pa = a_.dev->query_port(1).value(), pb = b_.dev->query_port(1).value();
    QpInitAttr ia;
    ia.max_send_wr = 16;
    ia.max_recv_wr = 16;
    for (int i = 0; i < kIdleQps; ++i) {
      ia.send_cq = a_.scq.get();
      ia.recv_cq = a_.rcq.get();
      idle_a_.push_back(std::move(a_.pd->create_qp(ia).value()));
      ia.send_cq = b_.scq.get();
      ia.recv_cq = b_.rcq.get();
      idle_b_.push_back(std::move(b_.pd->create_qp(ia).value()));
      const ConnectOptions o;
      ASSERT_TRUE(connect_qp(*idle_a_.back(), pb, idle_b_.back()->qp_num(), 1, 2, o).ok());
      ASSERT_TRUE(connect_qp(*idle_b_.back(), pa, idle_a_.back()->qp_num(), 2, 1, o).ok());
    }
    src_.assign(1 << 20, 0x5A);
    dst_.assign(1 << 20, 0);
    src_mr_ = std::move(a_.pd->reg_mr(src_.data(), src_.size(), kAccessLocalWrite).value());
    dst_mr_ = std::move(b_.pd->reg_mr(dst_.data(), dst_.size(), kAccessLocalWrite | kAccessRemoteWrite).value());
  }
  void TearDown() override {
    src_mr_.reset();
    dst_mr_.reset();
    idle_a_.clear();
    idle_b_.clear();
  }
  SendWr write(uint64_t id, uint32_t len, uint64_t off) const {
    SendWr w;
    w.wr_id = id;
    w.opcode = WrOpcode::kRdmaWrite;
    w.sge = {reinterpret_cast<uint64_t>(src_.data()) + off, len, src_mr_->lkey()};
    w.remote_addr = reinterpret_cast<uint64_t>(dst_.data()) + off;
    w.rkey = dst_mr_->rkey();
    return w;
  }

  Endpoint a_, b_;
  std::vector<std::unique_ptr<QueuePair>> idle_a_, idle_b_;
  std::vector<uint8_t> src_, dst_;
  std::unique_ptr<MemoryRegion> src_mr_, dst_mr_;
};

TEST_F(PassCostTest, IdleQpsAreNotVisited) {
  // The connection set-up's last packets (on a loaded machine they can still be in flight) settle
  // first: until a few passes in a row visit nothing, at most 5 s.
  const auto settle = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  for (;;) {
    const PassStats s0 = pass_stats_for_test(*a_.dev), t0 = pass_stats_for_test(*b_.dev);
    for (int i = 0; i < 5; ++i) (void)a_.dev->counters(), (void)b_.dev->counters();
    if ((delta(s0, pass_stats_for_test(*a_.dev)).qps_visited == 0 &&
         delta(t0, pass_stats_for_test(*b_.dev)).qps_visited == 0) ||
        std::chrono::steady_clock::now() > settle)
      break;
  }
  const PassStats a0 = pass_stats_for_test(*a_.dev), b0 = pass_stats_for_test(*b_.dev);
  // Commands wake the datapath. A pass drains every command that arrives while it runs, so on a
  // loaded machine (under AddressSanitizer, beside a build) 50 of them once fit in the pass that
  // was running already: commands until both have run passes, at most 5 s.
  PassStats a{}, b{};
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  do {
    for (int i = 0; i < 50; ++i) (void)a_.dev->counters(), (void)b_.dev->counters();
    a = delta(a0, pass_stats_for_test(*a_.dev));
    b = delta(b0, pass_stats_for_test(*b_.dev));
  } while ((a.passes <= 1 || b.passes <= 1) && std::chrono::steady_clock::now() < deadline);
  EXPECT_GT(a.passes, 1u);
  EXPECT_GT(b.passes, 1u);
  EXPECT_EQ(a.qps_visited, 0u) << "over " << a.passes << " passes";
  EXPECT_EQ(b.qps_visited, 0u) << "over " << b.passes << " passes";
}

// Registering and deregistering fill and empty the region table from the caller's thread: an
// idle datapath is neither woken nor waited for. Through its command queue, every registration
// and every deregistration cost a pass (the datapath woke up to run it and the caller waited).
TEST_F(PassCostTest, RegistrationsDoNotWakeTheDatapath) {
  constexpr int kPairs = 1000;
  std::vector<uint8_t> buf(4096);
  const PassStats a0 = pass_stats_for_test(*a_.dev);
  for (int i = 0; i < kPairs; ++i) {
    auto mr = a_.pd->reg_mr(buf.data(), buf.size(), kAccessLocalWrite | kAccessRemoteWrite);
    ASSERT_TRUE(mr.ok()) << mr.status().message();
  }
  const PassStats a = delta(a0, pass_stats_for_test(*a_.dev));
  // The idle loop still wakes by itself (at most every 100 ms) and reading the stats is a pass.
  EXPECT_LT(a.passes, uint64_t{kPairs} / 10) << a.passes << " passes for " << kPairs << " pairs";
}

TEST_F(PassCostTest, BusyQpAmongIdleOnesCostsItsOwnVisits) {
  connect_pair(a_, b_);
  const PassStats a0 = pass_stats_for_test(*a_.dev), b0 = pass_stats_for_test(*b_.dev);
  // 64 KiB WRITEs, 16 at a time, 512 in all: many passes that each send and receive.
  constexpr uint32_t kMsg = 64 << 10, kDepth = 16, kTotal = 512;
  uint32_t posted = 0, done = 0;
  while (done < kTotal) {
    while (posted < kTotal && posted - done < kDepth) {
      const SendWr w = write(posted, kMsg, (posted % kDepth) * uint64_t{kMsg});
      ASSERT_TRUE(a_.qp->post_send({&w, 1}).ok());
      ++posted;
    }
    const auto wcs = wait_completions(*a_.scq, 1);  // at least one; the poll may return more
    ASSERT_FALSE(wcs.empty());
    for (const WorkCompletion& wc : wcs) ASSERT_EQ(wc.status, WcStatus::kSuccess) << to_string(wc.status);
    done += static_cast<uint32_t>(wcs.size());
  }
  const PassStats a = delta(a0, pass_stats_for_test(*a_.dev)), b = delta(b0, pass_stats_for_test(*b_.dev));
  ASSERT_GT(a.passes, 0u);
  ASSERT_GT(b.passes, 0u);
  // Scanning every QP would be more than kIdleQps visits per pass.
  EXPECT_LE(a.qps_visited, a.passes * kMaxVisitsPerBusyPass) << a.qps_visited << " visits in " << a.passes;
  EXPECT_LE(b.qps_visited, b.passes * kMaxVisitsPerBusyPass) << b.qps_visited << " visits in " << b.passes;
  for (size_t i = 0; i < size_t{kMsg} * kDepth; ++i) ASSERT_EQ(dst_[i], 0x5A) << i;
}

// The ACK that leaves nothing outstanding cancels the retransmit timer: an idle NIC's loop then
// sleeps until a packet or a post (BENCHMARKS.md, "Round-trip tail"), not until a timeout that
// would find nothing to do.
TEST_F(PassCostTest, NoTimerLeftOnceEverythingIsAcknowledged) {
  ConnectOptions o;
  o.timeout = 20;  // 4.3 s: the timer cannot have fired by itself
  connect_pair(a_, b_, o);
  for (uint64_t i = 0; i < 3; ++i) {
    const SendWr w = write(i, 4096, i * 4096);
    ASSERT_TRUE(a_.qp->post_send({&w, 1}).ok());
    const auto wcs = wait_completions(*a_.scq, 1);
    ASSERT_EQ(wcs.size(), 1u);
    ASSERT_EQ(wcs[0].status, WcStatus::kSuccess) << to_string(wcs[0].status);
    EXPECT_EQ(pass_stats_for_test(*a_.dev).timers_scheduled, 0u) << "after WRITE " << i;
  }
}

TEST_F(PassCostTest, RetransmitTimeoutFiresForAnOtherwiseIdleQp) {
  // The QP's peer is a socket that never answers: only the retransmit timer moves the QP on.
  FakePeer peer;
  ConnectOptions o;
  o.timeout = 1;  // 8.2 µs
  o.retry_cnt = 3;
  PortInfo p = b_.dev->query_port(1).value();
  p.udp_port = peer.port;
  ASSERT_TRUE(connect_qp(*a_.qp, p, 0x1234, o.sq_psn, o.rq_psn, o).ok());
  const NicCounters c0 = a_.dev->counters();
  const PassStats s0 = pass_stats_for_test(*a_.dev);
  const SendWr w = write(7, 64, 0);
  ASSERT_TRUE(a_.qp->post_send({&w, 1}).ok());
  auto wcs = wait_completions(*a_.scq, 1);
  ASSERT_EQ(wcs.size(), 1u);
  EXPECT_EQ(wcs[0].status, WcStatus::kRetryExceeded) << to_string(wcs[0].status);
  const NicCounters c1 = a_.dev->counters();
  const PassStats s = delta(s0, pass_stats_for_test(*a_.dev));
  EXPECT_EQ(c1.local_ack_timeout_err - c0.local_ack_timeout_err, 4u);  // three retries, then the fourth fails
  EXPECT_EQ(c1.retransmitted_packets - c0.retransmitted_packets, 3u);
  // The post, four timeouts and the resends they start: a few visits, none to the idle QPs.
  EXPECT_LE(s.qps_visited, 16u) << "over " << s.passes << " passes";
}

}  // namespace
}  // namespace rdmad::verbs::test
