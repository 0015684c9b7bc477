// Payload CRCs computed by the posting thread (DeviceConfig::crc_at_post): the ICRCs the datapath
// combines from them are the ones it would compute itself (no packet is dropped or resent and the
// bytes arrive exact), only full-MTU segments of large SEND/WRITE WRs use them, a buffer changed
// after the post still arrives as changed (its first transmission fails the ICRC, the resend reads
// the memory again), and deregistering a region while another thread posts from it never lets that
// thread read unmapped memory (a SIGSEGV fails the test).
#include <gtest/gtest.h>
#include <pthread.h>
#include <sched.h>
#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <thread>

#include "cnp_inject.h"
#include "verbs_test_util.h"

namespace rdmad::verbs::test {
namespace {

struct Case {
  WrOpcode op;
  uint32_t bytes;
  uint32_t mtu;
  bool crc_at_post;
};

std::string case_name(const ::testing::TestParamInfo<Case>& i) {
  const Case& c = i.param;
  return std::string(c.op == WrOpcode::kRdmaWrite ? "Write" : "Send") + "_" + std::to_string(c.bytes) + "B_mtu" +
         std::to_string(c.mtu) + (c.crc_at_post ? "" : "_off");
}

class CrcAtPost : public ::testing::TestWithParam<Case> {};

TEST_P(CrcAtPost, CombinedIcrcsMatchAndOnlyFullSegmentsUseThem) {
  const Case c = GetParam();
  DeviceConfig cfg = soft_config();
  cfg.backend_options["crc_at_post"] = c.crc_at_post;
  Endpoint a, b;
  std::string why;
  make_endpoint(a, open_device("soft", cfg, &why));
  make_endpoint(b, open_device("soft", soft_config(), &why));
  ConnectOptions o;
  o.mtu = c.mtu;
  connect_pair(a, b, o);

  std::vector<uint8_t> src(c.bytes), dst(c.bytes, 0);
  fill_pattern(src, c.bytes);
  auto smr = std::move(a.pd->reg_mr(src.data(), src.size(), 0).value());
  auto dmr = std::move(b.pd->reg_mr(dst.data(), dst.size(), kAccessLocalWrite | kAccessRemoteWrite).value());
  if (c.op == WrOpcode::kSend) {
    RecvWr r{7, {reinterpret_cast<uint64_t>(dst.data()), c.bytes, dmr->lkey()}};
    ASSERT_TRUE(b.qp->post_recv({&r, 1}).ok());
  }
  SendWr w;
  w.opcode = c.op;
  w.sge = {reinterpret_cast<uint64_t>(src.data()), c.bytes, smr->lkey()};
  w.remote_addr = reinterpret_cast<uint64_t>(dst.data());
  w.rkey = dmr->rkey();
  const NicCounters a0 = a.dev->counters(), b0 = b.dev->counters();
  ASSERT_TRUE(a.qp->post_send({&w, 1}).ok());
  auto wc = wait_completions(*a.scq, 1);
  ASSERT_EQ(wc.size(), 1u);
  EXPECT_EQ(wc[0].status, WcStatus::kSuccess);
  EXPECT_EQ(dst, src);
  const NicCounters a1 = a.dev->counters(), b1 = b.dev->counters();
  const uint64_t full_segments = c.bytes / c.mtu;
  const bool qualifies = c.crc_at_post && c.bytes >= 16384;
  EXPECT_EQ(a1.crc_at_post_packets - a0.crc_at_post_packets, qualifies ? full_segments : 0);
  // A wrong combined ICRC would be dropped by the responder and sent again.
  EXPECT_EQ(b1.rx_dropped - b0.rx_dropped, 0u);
  EXPECT_EQ(a1.retransmitted_packets - a0.retransmitted_packets, 0u);
}

INSTANTIATE_TEST_SUITE_P(
    Soft, CrcAtPost,
    ::testing::Values(Case{WrOpcode::kRdmaWrite, 1u << 20, 4096, true}, Case{WrOpcode::kRdmaWrite, (1u << 20) + 1000, 1024, true},
                      Case{WrOpcode::kRdmaWrite, 16384, 256, true}, Case{WrOpcode::kRdmaWrite, 16383, 4096, true},
                      Case{WrOpcode::kSend, 65536 + 3, 4096, true}, Case{WrOpcode::kSend, 200000, 2048, true},
                      Case{WrOpcode::kRdmaWrite, 1u << 20, 4096, false}),
    case_name);

TEST(CrcAtPostChange, BufferChangedAfterPostArrivesAsChanged) {
  // The requester is paced at 20 Mb/s (one CNP, no recovery): the last 4 KiB of a 256 KiB WRITE
  // leave about 100 ms after the post, long after this thread has changed them.
  Endpoint a, b;
  std::string why;
  make_endpoint(a, open_device("soft", held_rate_config(20), &why));
  make_endpoint(b, open_device("soft", soft_config(), &why));
  ConnectOptions o;
  o.mtu = 4096;
  connect_pair(a, b, o);
  send_cnps(a.dev->query_port(1).value(), a.qp->qp_num(), 1);
  ASSERT_TRUE(wait_cnps_handled(*a.dev, 1));

  constexpr uint32_t kBytes = 256u << 10;
  std::vector<uint8_t> src(kBytes), dst(kBytes, 0);
  fill_pattern(src, 3);
  auto smr = std::move(a.pd->reg_mr(src.data(), kBytes, 0).value());
  auto dmr = std::move(b.pd->reg_mr(dst.data(), kBytes, kAccessLocalWrite | kAccessRemoteWrite).value());
  SendWr w;
  w.opcode = WrOpcode::kRdmaWrite;
  w.sge = {reinterpret_cast<uint64_t>(src.data()), kBytes, smr->lkey()};
  w.remote_addr = reinterpret_cast<uint64_t>(dst.data());
  w.rkey = dmr->rkey();
  const NicCounters b0 = b.dev->counters();
  ASSERT_TRUE(a.qp->post_send({&w, 1}).ok());
  // Against the verbs contract (a send buffer is the NIC's until its completion), but it must not
  // lose the message: the CRC computed at post no longer matches these bytes.
  std::memset(src.data() + kBytes - 8192, 0x5A, 4096);
  auto wc = wait_completions(*a.scq, 1);
  ASSERT_EQ(wc.size(), 1u);
  EXPECT_EQ(wc[0].status, WcStatus::kSuccess);
  EXPECT_EQ(dst, src) << "the resend carries the bytes as they are now";
  const NicCounters b1 = b.dev->counters();
  EXPECT_GE(b1.rx_dropped - b0.rx_dropped, 1u) << "the first copy of the changed segment failed its ICRC";
  EXPECT_GE(a.dev->counters().retransmitted_packets, 1u);
}

TEST(CrcAtPostChange, DeregisterWhileAnotherThreadPostsNeverReadsUnmappedMemory) {
  // Each round a thread posts one 16 MiB WRITE, whose CRC pass at post reads the memory for about
  // a millisecond, while this thread deregisters the region and unmaps the memory as soon as the
  // post has begun. Rounds go on until several deregistrations began before the post returned:
  // without the wait for posts in progress, those unmap the memory under the pass.
  constexpr size_t kBytes = 16u << 20;
  constexpr int kOverlapsWanted = 5;
  constexpr int kMaxRounds = 60;
  std::string why;
  Endpoint a, b;
  make_endpoint(a, open_device("soft", soft_config(), &why), 16);
  make_endpoint(b, open_device("soft", soft_config(), &why), 16);
  ConnectOptions o;
  o.mtu = 4096;
  connect_pair(a, b, o);
  std::vector<uint8_t> dst(kBytes);
  auto dmr = std::move(b.pd->reg_mr(dst.data(), kBytes, kAccessLocalWrite | kAccessRemoteWrite).value());
  int overlaps = 0;
  for (int round = 0; round < kMaxRounds && overlaps < kOverlapsWanted; ++round) {
    auto* mem = static_cast<uint8_t*>(mmap(nullptr, kBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
    ASSERT_NE(mem, MAP_FAILED);
    std::memset(mem, round + 1, kBytes);
    auto smr = std::move(a.pd->reg_mr(mem, kBytes, 0).value());
    SendWr w;
    w.opcode = WrOpcode::kRdmaWrite;
    w.sge = {reinterpret_cast<uint64_t>(mem), static_cast<uint32_t>(kBytes), smr->lkey()};
    w.remote_addr = reinterpret_cast<uint64_t>(dst.data());
    w.rkey = dmr->rkey();
    std::atomic<bool> posting{false};
    std::atomic<bool> returned{false};
    Status posted;
    std::thread poster([&] {
      // SCHED_IDLE: a datapath thread woken on this core runs at once instead of waiting out the
      // pass, so the deregistration's command completes while the pass is still reading.
      sched_param idle{};
      pthread_setschedparam(pthread_self(), SCHED_IDLE, &idle);
      posting.store(true);
      posted = a.qp->post_send({&w, 1});
      returned.store(true);
    });
    while (!posting.load()) std::this_thread::yield();
    if (!returned.load()) ++overlaps;
    smr.reset();
    munmap(mem, kBytes);
    poster.join();
    ASSERT_TRUE(posted.ok()) << posted.message();
    // The WRITE fails (its region is gone) and puts the QP in ERR: connect the pair afresh. Where
    // this thread was kept off the core until the whole WRITE was acknowledged, it succeeded
    // before the deregistration, and then it carried this round's bytes.
    auto wc = wait_completions(*a.scq, 1);
    ASSERT_EQ(wc.size(), 1u);
    if (wc[0].status == WcStatus::kSuccess) {
      EXPECT_EQ(std::count(dst.begin(), dst.end(), static_cast<uint8_t>(round + 1)), static_cast<long>(kBytes))
          << "round " << round << ": a WRITE that completed carried other bytes";
    } else {
      EXPECT_EQ(wc[0].status, WcStatus::kLocalProtectionError) << "round " << round;
    }
    const QpAttr reset;  // state kReset
    ASSERT_TRUE(a.qp->modify(reset, kQpState).ok());
    ASSERT_TRUE(b.qp->modify(reset, kQpState).ok());
    connect_pair(a, b, o);
  }
  EXPECT_GE(overlaps, kOverlapsWanted) << "too few deregistrations began during a post to test anything";
}

}  // namespace
}  // namespace rdmad::verbs::test
