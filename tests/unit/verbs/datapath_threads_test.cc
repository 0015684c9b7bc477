// An engine NIC with several datapath threads: QPs are spread over the threads, every packet reaches
// the thread that owns its QP (soft: the SO_REUSEPORT group's BPF program steers by the BTH's
// destination QP), and transfers on QPs of every thread at once are byte-exact. And a NIC holds
// 64k QPs, all created, with idle ones costing its datapath nothing.
#include <gtest/gtest.h>

#include <set>
#include <thread>

#include "rdmad/verbs/engine/engine.h"
#include "verbs_test_util.h"

namespace rdmad::verbs::test {
namespace {

DeviceConfig threaded_config(uint32_t threads, uint32_t max_qps = 1024) {
  DeviceConfig c = soft_config();
  c.backend_options["datapath_threads"] = int64_t{threads};
  c.backend_options["max_qps"] = int64_t{max_qps};
  return c;
}

struct QpPair {
  std::unique_ptr<QueuePair> a, b;
};

// `n` QP pairs between two devices, connected, each on the devices' shared CQs.
std::vector<QpPair> connect_pairs(Endpoint& a, Endpoint& b, size_t n, const ConnectOptions& o = {}) {
  std::vector<QpPair> out;
  const PortInfo pa = a.dev->query_port(1).value(), pb = b.dev->query_port(1).value();
  QpInitAttr ia;
  ia.max_send_wr = 64;
  ia.max_recv_wr = 64;
  for (size_t i = 0; i < n; ++i) {
    QpPair p;
    ia.send_cq = a.scq.get();
    ia.recv_cq = a.rcq.get();
    p.a = std::move(a.pd->create_qp(ia).value());
    ia.send_cq = b.scq.get();
    ia.recv_cq = b.rcq.get();
    p.b = std::move(b.pd->create_qp(ia).value());
    EXPECT_TRUE(connect_qp(*p.a, pb, p.b->qp_num(), 7, 9, o).ok());
    EXPECT_TRUE(connect_qp(*p.b, pa, p.a->qp_num(), 9, 7, o).ok());
    out.push_back(std::move(p));
  }
  return out;
}

TEST(DatapathThreads, EveryThreadCarriesItsOwnQpsByteExact) {
  constexpr uint32_t kThreads = 4;
  constexpr size_t kPairs = 16;
  constexpr uint32_t kBytes = 1u << 20;
  std::string skip;
  Endpoint a, b;
  make_endpoint(a, open_device("soft", threaded_config(kThreads), &skip), 64);
  make_endpoint(b, open_device("soft", threaded_config(kThreads), &skip), 64);
  ASSERT_TRUE(a.dev && b.dev) << skip;
  EXPECT_EQ(a.dev->datapath_heartbeats().size(), kThreads);
  auto pairs = connect_pairs(a, b, kPairs);
  // Spread: the least loaded thread takes each new QP, so every thread has some.
  std::set<uint32_t> threads_a, threads_b;
  for (const QpPair& p : pairs) {
    threads_a.insert((p.a->qp_num() & 1023) % kThreads);
    threads_b.insert((p.b->qp_num() & 1023) % kThreads);
  }
  EXPECT_EQ(threads_a.size(), kThreads);
  EXPECT_EQ(threads_b.size(), kThreads);

  std::vector<uint8_t> src(kPairs * kBytes), dst(kPairs * kBytes, 0);
  fill_pattern(src, 41);
  auto src_mr = std::move(a.pd->reg_mr(src.data(), src.size(), kAccessLocalWrite).value());
  auto dst_mr = std::move(b.pd->reg_mr(dst.data(), dst.size(), kAccessLocalWrite | kAccessRemoteWrite).value());
  // One WRITE per pair and one READ back into the second half, all at once on every thread.
  for (size_t i = 0; i < kPairs; ++i) {
    SendWr w;
    w.wr_id = i;
    w.opcode = WrOpcode::kRdmaWrite;
    w.sge = {reinterpret_cast<uint64_t>(src.data()) + i * kBytes, kBytes, src_mr->lkey()};
    w.remote_addr = reinterpret_cast<uint64_t>(dst.data()) + i * kBytes;
    w.rkey = dst_mr->rkey();
    ASSERT_TRUE(pairs[i].a->post_send({&w, 1}).ok());
  }
  auto wcs = wait_completions(*a.scq, kPairs);
  ASSERT_EQ(wcs.size(), kPairs);
  for (const WorkCompletion& wc : wcs) EXPECT_EQ(wc.status, WcStatus::kSuccess) << to_string(wc.status);
  EXPECT_EQ(src, dst) << "payload differs";
  // Nothing reached a thread that does not own its QP (it would be dropped as an unknown QP).
  const NicCounters ca = a.dev->counters(), cb = b.dev->counters();
  EXPECT_EQ(ca.rx_dropped_by_reason[static_cast<size_t>(RxDropReason::kUnknownQp)], 0u);
  EXPECT_EQ(cb.rx_dropped_by_reason[static_cast<size_t>(RxDropReason::kUnknownQp)], 0u);
  EXPECT_GE(cb.rx_packets, kPairs * (kBytes / 1024));
  EXPECT_EQ(ca.retransmitted_packets + cb.retransmitted_packets, 0u);
}

// QPs of every thread complete into one CQ at once: each thread has a ring of its own in it (one
// ring with several producers lost and repeated completions), and a QP's completions stay in order.
TEST(DatapathThreads, ThreadsShareACompletionQueue) {
  constexpr uint32_t kThreads = 4;
  constexpr size_t kPairs = 16;
  constexpr uint64_t kWrites = 3000;
  std::string skip;
  Endpoint a, b;
  make_endpoint(a, open_device("soft", threaded_config(kThreads), &skip), 64);
  make_endpoint(b, open_device("soft", threaded_config(kThreads), &skip), 64);
  ASSERT_TRUE(a.dev && b.dev) << skip;
  auto pairs = connect_pairs(a, b, kPairs);
  std::vector<uint8_t> src(64, 7), dst(kPairs * 64, 0);
  auto src_mr = std::move(a.pd->reg_mr(src.data(), src.size(), kAccessLocalWrite).value());
  auto dst_mr = std::move(b.pd->reg_mr(dst.data(), dst.size(), kAccessLocalWrite | kAccessRemoteWrite).value());
  std::vector<uint64_t> posted(kPairs, 0), next(kPairs, 0);
  uint64_t done = 0;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  WorkCompletion wc[64];
  while (done < kPairs * kWrites && std::chrono::steady_clock::now() < deadline) {
    for (size_t q = 0; q < kPairs; ++q) {
      while (posted[q] < kWrites && posted[q] - next[q] < 16) {  // 16 in flight per QP: 256 in the 256-entry CQ
        SendWr w;
        w.wr_id = q << 32 | posted[q];
        w.opcode = WrOpcode::kRdmaWrite;
        w.sge = {reinterpret_cast<uint64_t>(src.data()), 64, src_mr->lkey()};
        w.remote_addr = reinterpret_cast<uint64_t>(dst.data()) + q * 64;
        w.rkey = dst_mr->rkey();
        ASSERT_TRUE(pairs[q].a->post_send({&w, 1}).ok());
        ++posted[q];
      }
    }
    const size_t n = a.scq->poll(wc);
    for (size_t i = 0; i < n; ++i) {
      ASSERT_EQ(wc[i].status, WcStatus::kSuccess) << to_string(wc[i].status);
      const uint64_t q = wc[i].wr_id >> 32, seq = wc[i].wr_id & 0xFFFFFFFF;
      ASSERT_LT(q, kPairs);
      ASSERT_EQ(seq, next[q]) << "QP " << q << ": a completion lost, repeated or out of order";
      ++next[q];
    }
    done += n;
  }
  EXPECT_EQ(done, kPairs * kWrites);
  EXPECT_EQ(a.scq->poll(wc), 0u) << "more completions than work requests";
}

TEST(DatapathThreads, OneThreadAndManyGiveTheSameBytes) {
  // The same transfer through a 1-thread NIC and a 3-thread NIC (QP table indices not a multiple
  // of the thread count: 1024 = 3·341 + 1).
  for (uint32_t threads : {1u, 3u}) {
    std::string skip;
    Endpoint a, b;
    make_endpoint(a, open_device("soft", threaded_config(threads), &skip), 64);
    make_endpoint(b, open_device("soft", threaded_config(1), &skip), 64);
    ASSERT_TRUE(a.dev && b.dev) << skip;
    auto pairs = connect_pairs(a, b, 6);
    std::vector<uint8_t> src(6 * 65536), dst(6 * 65536, 0);
    fill_pattern(src, threads);
    auto src_mr = std::move(b.pd->reg_mr(src.data(), src.size(), kAccessLocalWrite | kAccessRemoteRead).value());
    auto dst_mr = std::move(a.pd->reg_mr(dst.data(), dst.size(), kAccessLocalWrite).value());
    for (size_t i = 0; i < pairs.size(); ++i) {  // READs: responses flow b -> a's threads
      SendWr w;
      w.wr_id = i;
      w.opcode = WrOpcode::kRdmaRead;
      w.sge = {reinterpret_cast<uint64_t>(dst.data()) + i * 65536, 65536, dst_mr->lkey()};
      w.remote_addr = reinterpret_cast<uint64_t>(src.data()) + i * 65536;
      w.rkey = src_mr->rkey();
      ASSERT_TRUE(pairs[i].a->post_send({&w, 1}).ok());
    }
    auto wcs = wait_completions(*a.scq, pairs.size());
    ASSERT_EQ(wcs.size(), pairs.size()) << threads << " threads";
    for (const WorkCompletion& wc : wcs) EXPECT_EQ(wc.status, WcStatus::kSuccess);
    EXPECT_EQ(src, dst) << threads << " threads";
  }
}

// 65536 QPs on one NIC (the table's size), a few hundred of them connected and busy: the rest cost
// the datapath nothing.
TEST(EngineScale, SixtyFourThousandQpsOnOneNic) {
  constexpr uint32_t kTable = 65536;
  constexpr size_t kActive = 256;
  std::string skip;
  Endpoint a, b;
  // CQs of 4·kActive entries: every active QP's completion fits.
  make_endpoint(a, open_device("soft", threaded_config(1, kTable), &skip), kActive);
  make_endpoint(b, open_device("soft", threaded_config(1, kTable), &skip), kActive);
  ASSERT_TRUE(a.dev && b.dev) << skip;
  // 256 QPs start 64 KiB each at once over loopback, where nothing marks ECN: the receiver's socket
  // queue holds up to 8 MiB, tens of ms, so the retransmit timeout is 268 ms (timeout 16), not the
  // tests' usual 16.8 ms.
  ConnectOptions slow;
  slow.timeout = 16;
  auto active = connect_pairs(a, b, kActive, slow);
  QpInitAttr ia;
  ia.send_cq = a.scq.get();
  ia.recv_cq = a.rcq.get();
  ia.max_send_wr = 1;
  ia.max_recv_wr = 1;
  std::vector<std::unique_ptr<QueuePair>> idle;
  // The table holds kTable: make_endpoint's QP and the active ones are already in it.
  const auto created0 = std::chrono::steady_clock::now();
  for (size_t i = 1 + kActive; i < kTable; ++i) {
    auto q = a.pd->create_qp(ia);
    ASSERT_TRUE(q.ok()) << "qp " << i << ": " << q.status().message();
    idle.push_back(std::move(q.value()));
  }
  EXPECT_EQ(a.pd->create_qp(ia).status().code(), StatusCode::kNoResource) << "the table is full";
  std::printf("created %zu QPs in %.2f s\n", idle.size(),
              std::chrono::duration<double>(std::chrono::steady_clock::now() - created0).count());

  // Busy on the active QPs: 64 KiB WRITEs on each, and the datapath's CPU per byte.
  std::vector<uint8_t> src(kActive * 65536, 0x3C), dst(kActive * 65536, 0);
  auto src_mr = std::move(a.pd->reg_mr(src.data(), src.size(), kAccessLocalWrite).value());
  auto dst_mr = std::move(b.pd->reg_mr(dst.data(), dst.size(), kAccessLocalWrite | kAccessRemoteWrite).value());
  for (size_t i = 0; i < kActive; ++i) {
    SendWr w;
    w.wr_id = i;
    w.opcode = WrOpcode::kRdmaWrite;
    w.sge = {reinterpret_cast<uint64_t>(src.data()) + i * 65536, 65536, src_mr->lkey()};
    w.remote_addr = reinterpret_cast<uint64_t>(dst.data()) + i * 65536;
    w.rkey = dst_mr->rkey();
    ASSERT_TRUE(active[i].a->post_send({&w, 1}).ok());
  }
  auto wcs = wait_completions(*a.scq, kActive);
  ASSERT_EQ(wcs.size(), kActive);
  for (const WorkCompletion& wc : wcs) ASSERT_EQ(wc.status, WcStatus::kSuccess);
  EXPECT_EQ(src, dst);

  // Idle: 65280 QPs that exist and 256 connected ones with nothing to do. The datapath sleeps;
  // in 300 ms it may wake for its idle timeout, never to scan the table.
  const auto settle = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  uint64_t cpu0 = a.dev->counters().datapath_cpu_ns;
  engine::PassStats p0 = engine::pass_stats_for_test(*a.dev);
  while (std::chrono::steady_clock::now() < settle) {  // the last ACKs settle first
    std::this_thread::sleep_for(std::chrono::milliseconds(300));  // a measurement window, not a wait
    const uint64_t cpu1 = a.dev->counters().datapath_cpu_ns;
    const engine::PassStats p1 = engine::pass_stats_for_test(*a.dev);
    if (p1.qps_visited == p0.qps_visited && cpu1 - cpu0 < 3'000'000) break;
    cpu0 = cpu1;
    p0 = p1;
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // the measurement window
  const uint64_t idle_cpu = a.dev->counters().datapath_cpu_ns - cpu0;
  const engine::PassStats p = engine::pass_stats_for_test(*a.dev);
  EXPECT_EQ(p.qps_visited, p0.qps_visited) << "idle QPs were visited";
  // 1% of a core over 300 ms; scanning 64k entries per pass would cost far more.
  EXPECT_LT(idle_cpu, 3'000'000u) << idle_cpu << " ns of datapath CPU in 300 ms idle";
}

}  // namespace
}  // namespace rdmad::verbs::test
