// Flows end to end: two rdmad processes with two soft NICs each, the test as the client of both.
// 1 GiB WRITE, READ and SEND byte-exact; the split over two equal NICs; refusals that leave the
// target memory untouched.
#include <cstdlib>

#include "flow_cluster.h"

namespace rdmad::test {
namespace {

size_t transfer_bytes() {
  const char* env = std::getenv("RDMAD_FLOW_TEST_BYTES");
  return env != nullptr ? std::strtoull(env, nullptr, 0) : size_t{1} << 30;
}

class FlowPair : public ::testing::Test {
 protected:
  void SetUp() override {
    pair_ = std::make_unique<Pair>(two_nic_node("node-a", 11), two_nic_node("node-b", 21));
    ASSERT_TRUE(pair_->start());
    // a's flow to b and b's flow to a (for receives and imports on b's side).
    ASSERT_EQ(rdmad_flow_open(a()->client(), "node-b", nullptr, &fa_), RDMAD_OK) << rdmad_last_error(a()->client());
    ASSERT_EQ(rdmad_flow_open(b()->client(), "node-a", nullptr, &fb_), RDMAD_OK) << rdmad_last_error(b()->client());
    ASSERT_EQ(rdmad_flow_wait_connected(fa_, 10000), RDMAD_OK) << a()->output();
    ASSERT_EQ(rdmad_flow_wait_connected(fb_, 10000), RDMAD_OK) << b()->output();
  }
  void TearDown() override {
    rdmad_flow_close(fa_);
    rdmad_flow_close(fb_);
  }
  Node* a() { return pair_->a.get(); }
  Node* b() { return pair_->b.get(); }

  // Exports [0, bytes) of `on_b` from node-b to node-a and imports it on a's flow.
  rdmad_remote export_b_to_a(const Buffer& on_b, size_t bytes, uint32_t rights) {
    return export_and_import(*b(), on_b, bytes, *a(), fa_, rights);
  }

  std::unique_ptr<Pair> pair_;
  rdmad_flow* fa_ = nullptr;
  rdmad_flow* fb_ = nullptr;
};

TEST_F(FlowPair, WriteReadAndSendOneGibibyteByteExact) {
  write_read_send_byte_exact(*a(), *b(), fa_, fb_, transfer_bytes());
}

// The split follows measured throughput, and soft NICs' throughput is their datapath threads' share
// of the cores: four of them on two cores finish a 1 GiB WRITE in well under a second, too short
// for scheduling luck to even out. Four WRITEs of fresh data are judged together. The balancer's
// own 5 % bound is a unit test (BalancerSplit.TwoEqualNicsSplitWithinFivePercent, measured rates
// given); here real daemons on a shared machine split 44-56 % (2026-12-02, 7 runs, 2 beyond 5 %),
// so 10 %: what this catches is a lane left out or weighted wrongly, which shows as 2:1 or worse.
TEST_F(FlowPair, TwoEqualNicsSplitWithinTenPercent) {
  const size_t n = transfer_bytes();
  Buffer src(a()->client(), n, kAllAccess);
  Buffer dst(b()->client(), n, kAllAccess);
  const rdmad_remote remote = export_b_to_a(dst, n, RDMAD_ACCESS_REMOTE_WRITE);
  for (uint64_t round = 0; round < 4; ++round) {
    fill(src.data(), n, 5 + round);
    ASSERT_EQ(rdmad_flow_write(fa_, 9 + round, src.mr, 0, &remote, 0, n), RDMAD_OK);
    auto c = wait_completion(fa_, 120s);
    ASSERT_TRUE(c.has_value());
    ASSERT_EQ(c->status, RDMAD_OK);
    EXPECT_EQ(first_difference(src.data(), dst.data(), n), -1) << "round " << round;
  }
  const double b0 = a()->metric("rdmad_balancer_bytes_sent_total{device=\"node-a0\"}").value_or(-1);
  const double b1 = a()->metric("rdmad_balancer_bytes_sent_total{device=\"node-a1\"}").value_or(-1);
  ASSERT_GT(b0, 0);
  ASSERT_GT(b1, 0);
  std::printf("split: nic0 %.1f%%, nic1 %.1f%%\n", 100 * b0 / (b0 + b1), 100 * b1 / (b0 + b1));
  EXPECT_NEAR(b0 / (b0 + b1), 0.5, 0.10) << "nic0 " << b0 << " nic1 " << b1;
}

TEST_F(FlowPair, RefusalsLeaveTargetMemoryUntouched) {
  const size_t n = 4 << 20;
  Buffer src(a()->client(), n, kAllAccess);
  Buffer dst(b()->client(), n, kAllAccess);
  fill(src.data(), n, 6);
  fill(dst.data(), n, 7);
  std::vector<uint8_t> before(dst.data(), dst.data() + n);
  // Read-only export: a WRITE is refused.
  const rdmad_remote ro = export_b_to_a(dst, n / 2, RDMAD_ACCESS_REMOTE_READ);
  ASSERT_EQ(rdmad_flow_write(fa_, 1, src.mr, 0, &ro, 0, 4096), RDMAD_OK);
  auto c = wait_completion(fa_, 10s);
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(c->status, RDMAD_ERR_REMOTE_ACCESS);
  // Out of bounds of the export (it covers half the buffer).
  const rdmad_remote rw = export_b_to_a(dst, n / 2, RDMAD_ACCESS_REMOTE_WRITE);
  ASSERT_EQ(rdmad_flow_write(fa_, 2, src.mr, 0, &rw, n / 2 - 4096, 8192), RDMAD_OK);
  c = wait_completion(fa_, 10s);
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(c->status, RDMAD_ERR_REMOTE_ACCESS);
  // A token nobody exported, and a handle never imported.
  rdmad_token bogus{};
  bogus.bytes[0] = 1;
  rdmad_remote r{};
  EXPECT_EQ(rdmad_flow_import(fa_, &bogus, &r), RDMAD_ERR_NOT_FOUND);
  rdmad_remote never{999999, n, RDMAD_ACCESS_REMOTE_WRITE};
  ASSERT_EQ(rdmad_flow_write(fa_, 3, src.mr, 0, &never, 0, 4096), RDMAD_OK);
  c = wait_completion(fa_, 10s);
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(c->status, RDMAD_ERR_NOT_FOUND);
  // A token exported to node-a cannot be imported on node-b's side (the wrong peer).
  rdmad_token to_a{};
  ASSERT_EQ(rdmad_export(b()->client(), dst.mr, 0, n, "node-a", RDMAD_ACCESS_REMOTE_WRITE, &to_a), RDMAD_OK);
  EXPECT_EQ(rdmad_flow_import(fb_, &to_a, &r), RDMAD_ERR_NOT_FOUND);
  // A revoked export is gone for the importer.
  rdmad_token revoked{};
  ASSERT_EQ(rdmad_export(b()->client(), dst.mr, 0, n, "node-a", RDMAD_ACCESS_REMOTE_WRITE, &revoked), RDMAD_OK);
  ASSERT_EQ(rdmad_revoke(b()->client(), &revoked), RDMAD_OK);
  EXPECT_TRUE([&] {
    for (int i = 0; i < 200; ++i) {
      if (rdmad_flow_import(fa_, &revoked, &r) == RDMAD_ERR_NOT_FOUND) return true;
      usleep(5000);
    }
    return false;
  }());
  EXPECT_EQ(std::memcmp(before.data(), dst.data(), n), 0) << "target memory changed";
  // The flow still works after all that.
  ASSERT_EQ(rdmad_flow_write(fa_, 4, src.mr, 0, &rw, 0, n / 2), RDMAD_OK);
  c = wait_completion(fa_, 30s);
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(c->status, RDMAD_OK);
  EXPECT_EQ(std::memcmp(src.data(), dst.data(), n / 2), 0);
}

TEST_F(FlowPair, TargetReleasedMidWriteFailsTheWriteNotTheDaemon) {
  // node-b's client revokes the export and deregisters the buffer a 1 GiB WRITE from node-a is
  // landing in, as node-b does for a client that dies: node-b drops the export's registration and
  // unmaps its view of the memory while packets for it are still arriving. The WRITE must fail
  // cleanly (the NIC refuses the rest), node-b must keep running, and the flow must carry the
  // next WRITE.
  const size_t n = size_t{1} << 30;
  Buffer src(a()->client(), n, kAllAccess);
  auto dst = std::make_unique<Buffer>(b()->client(), n, kAllAccess);
  fill(src.data(), n, 8);
  fill(dst->data(), n, 9);
  const uint64_t want = *reinterpret_cast<const uint64_t*>(src.data());
  rdmad_token token{};
  ASSERT_EQ(rdmad_export(b()->client(), dst->mr, 0, n, "node-a", RDMAD_ACCESS_REMOTE_WRITE, &token), RDMAD_OK);
  rdmad_remote remote{};
  ASSERT_EQ(rdmad_flow_import(fa_, &token, &remote), RDMAD_OK) << rdmad_last_error(a()->client());
  ASSERT_EQ(rdmad_flow_write(fa_, 1, src.mr, 0, &remote, 0, n), RDMAD_OK);
  // Wait for the first bytes to land (the test maps the same memory as node-b).
  const volatile uint64_t* first = reinterpret_cast<const volatile uint64_t*>(dst->data());
  const auto deadline = std::chrono::steady_clock::now() + 30s;
  while (*first != want && std::chrono::steady_clock::now() < deadline) usleep(50);
  ASSERT_EQ(*first, want) << "the WRITE never started\n" << b()->output();
  ASSERT_EQ(rdmad_revoke(b()->client(), &token), RDMAD_OK) << rdmad_last_error(b()->client());
  ASSERT_EQ(rdmad_deregister(b()->client(), dst->mr), RDMAD_OK) << rdmad_last_error(b()->client());
  dst->mr = nullptr;
  // Within seconds: chunks of a request the peer refused are not sent again on other lanes
  // (each would fail the same way and take that lane down with a growing back-off; the WRITE
  // used to fail only after ~23 s of that).
  auto c = wait_completion(fa_, 5s);
  ASSERT_TRUE(c.has_value()) << "no completion within 5 s of the release\n" << a()->output();
  ASSERT_FALSE(b()->process()->wait_exit(0ms).has_value()) << "node-b exited:\n" << b()->output();
  const bool all_landed = first_difference(src.data(), dst->data(), n) == -1;
  EXPECT_TRUE(c->status != RDMAD_OK || all_landed) << "the WRITE reported success without its data";
  if (c->status == RDMAD_OK) std::fprintf(stderr, "note: the WRITE finished before the release\n");
  // A refused request is not a path failure: node-a rebuilds the QPs it ran on without counting
  // failovers (or backing off before the lanes rejoin), and so does node-b, which the rebuild
  // offer tells why (it used to count one failover per NIC here).
  if (c->status != RDMAD_OK) {
    const char* refused = "rdmad_peer_rebuilds_total{cause=\"request_refused\"}";
    EXPECT_TRUE(eventually([&] { return b()->metric(refused).value_or(0) >= 1; }, 10s)) << b()->output();
    EXPECT_GE(a()->metric(refused).value_or(0), 1.0);
    EXPECT_EQ(b()->metric("rdmad_peer_rebuilds_total{cause=\"path_fault\"}").value_or(-1), 0.0);
  }
  for (const char* nic : {"node-a0", "node-a1", "node-b0", "node-b1"}) {
    Node* node = nic[5] == 'a' ? a() : b();
    EXPECT_EQ(node->metric(fmt::format("rdmad_balancer_failovers_total{{device=\"{}\"}}", nic)).value_or(-1), 0.0)
        << node->output();
  }

  // node-b still serves, and the flow still carries a WRITE into a new buffer.
  const size_t m = 8 << 20;
  Buffer dst2(b()->client(), m, kAllAccess);
  const rdmad_remote remote2 = export_b_to_a(dst2, m, RDMAD_ACCESS_REMOTE_WRITE);
  ASSERT_EQ(rdmad_flow_write(fa_, 2, src.mr, 0, &remote2, 0, m), RDMAD_OK);
  c = wait_completion(fa_, 60s);
  ASSERT_TRUE(c.has_value()) << a()->output() << b()->output();
  EXPECT_EQ(c->status, RDMAD_OK);
  EXPECT_EQ(first_difference(src.data(), dst2.data(), m), -1);
}

// A SEND of one chunk with nothing before it on its flow goes as one RDMA WRITE with immediate,
// which completes node-b's receive by itself: no send-done. A SEND of several chunks (chunk_bytes
// is 1 MiB) keeps the send-done after its WRITEs.
TEST_F(FlowPair, ASendOfOneChunkCompletesTheReceiveByItsImmediate) {
  const size_t n = 3u << 20;
  Buffer src(a()->client(), n, kAllAccess);
  Buffer dst(b()->client(), n, kAllAccess);
  fill(src.data(), n, 31);
  fill(dst.data(), n, 32);
  auto metric = [&](const char* path) {
    return a()->metric(fmt::format("rdmad_flow_send_dones_total{{path=\"{}\"}}", path)).value_or(-1);
  };
  ASSERT_EQ(rdmad_flow_recv(fb_, 1, dst.mr, 0, 65536), RDMAD_OK);
  ASSERT_EQ(rdmad_flow_send(fa_, 2, src.mr, 0, 4000), RDMAD_OK);
  auto r = wait_completion(fb_, 30s);
  ASSERT_TRUE(r.has_value()) << a()->output() << b()->output();
  EXPECT_EQ(r->status, RDMAD_OK);
  EXPECT_EQ(r->wr_id, 1u);
  EXPECT_EQ(r->length, 4000u);  // the immediate's completion gives the bytes placed
  EXPECT_EQ(first_difference(src.data(), dst.data(), 4000), -1);
  auto s = wait_completion(fa_, 30s);
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(s->status, RDMAD_OK);
  EXPECT_EQ(metric("immediate"), 1.0);
  EXPECT_EQ(metric("lane"), 0.0);
  EXPECT_EQ(metric("control"), 0.0);

  ASSERT_EQ(rdmad_flow_recv(fb_, 3, dst.mr, 0, n), RDMAD_OK);
  ASSERT_EQ(rdmad_flow_send(fa_, 4, src.mr, 0, n), RDMAD_OK);
  r = wait_completion(fb_, 30s);
  ASSERT_TRUE(r.has_value()) << a()->output() << b()->output();
  EXPECT_EQ(r->status, RDMAD_OK);
  EXPECT_EQ(r->length, n);
  EXPECT_EQ(first_difference(src.data(), dst.data(), n), -1);
  s = wait_completion(fa_, 30s);
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(s->status, RDMAD_OK);
  EXPECT_EQ(metric("immediate"), 1.0);
  EXPECT_EQ(metric("lane"), 1.0);
  EXPECT_EQ(metric("control"), 0.0);
}

TEST_F(FlowPair, SendWaitsForAReceiveAndKeepsOrderAfterWrites) {
  const size_t n = 8 << 20;
  Buffer src(a()->client(), n, kAllAccess);
  Buffer dst(b()->client(), n, kAllAccess);
  Buffer msg_a(a()->client(), 4096, kAllAccess);
  Buffer msg_b(b()->client(), 4096, kAllAccess);
  const rdmad_remote remote = export_b_to_a(dst, n, RDMAD_ACCESS_REMOTE_WRITE);
  fill(src.data(), n, 8);
  std::memcpy(msg_a.data(), "done", 5);
  // The send is posted before any receive: it waits (no RNR error), after the write.
  ASSERT_EQ(rdmad_flow_write(fa_, 1, src.mr, 0, &remote, 0, n), RDMAD_OK);
  ASSERT_EQ(rdmad_flow_send(fa_, 2, msg_a.mr, 0, 5), RDMAD_OK);
  ASSERT_EQ(rdmad_flow_recv(fb_, 10, msg_b.mr, 0, 4096), RDMAD_OK);
  auto r = wait_completion(fb_, 60s);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->status, RDMAD_OK);
  EXPECT_EQ(r->length, 5u);
  EXPECT_STREQ(reinterpret_cast<const char*>(msg_b.data()), "done");
  // When the receive completes, the write before the send has been placed.
  EXPECT_EQ(first_difference(src.data(), dst.data(), n), -1);
  auto c1 = wait_completion(fa_, 30s);
  auto c2 = wait_completion(fa_, 30s);
  ASSERT_TRUE(c1 && c2);
  EXPECT_EQ(c1->wr_id, 1u);  // completions in submission order
  EXPECT_EQ(c2->wr_id, 2u);
  rdmad_completion none{};
  EXPECT_EQ(rdmad_flow_poll(fa_, &none, 1), 0u);
  // Node-b learnt of the send on a lane, not through the control channel: by a send-done SEND
  // when the write was still in flight as the receive arrived, else by the send's own WRITE
  // with immediate.
  EXPECT_EQ(a()->metric("rdmad_flow_send_dones_total{path=\"lane\"}").value_or(0) +
                a()->metric("rdmad_flow_send_dones_total{path=\"immediate\"}").value_or(0),
            1.0);
  EXPECT_EQ(a()->metric("rdmad_flow_send_dones_total{path=\"control\"}").value_or(-1), 0.0);
  // A send larger than the posted receive fails on both sides.
  ASSERT_EQ(rdmad_flow_recv(fb_, 11, msg_b.mr, 0, 16), RDMAD_OK);
  ASSERT_EQ(rdmad_flow_send(fa_, 3, msg_a.mr, 0, 4096), RDMAD_OK);
  auto c3 = wait_completion(fa_, 30s);
  ASSERT_TRUE(c3);
  EXPECT_EQ(c3->status, RDMAD_ERR_INVALID_ARGUMENT);
  auto r2 = wait_completion(fb_, 30s);
  ASSERT_TRUE(r2);
  EXPECT_EQ(r2->wr_id, 11u);
  EXPECT_NE(r2->status, RDMAD_OK);
}

// Receives withdrawn before any send filled them (their flow closed) give their credits back: the
// sending node drops them (recv cancel), so a user who posts receives and closes the flow, again
// and again, cannot use up the receive credits that every flow from its node to the peer shares
// (max_receives_per_peer, 4 here). Three rounds of four, then one more receive and a send into it,
// byte-exact. (Without the cancel node-a held four dead credits after the first round, refused
// every later advertisement from node-b, and the last send waited for ever.)
TEST(FlowCredits, ReceivesWithdrawnByClosingTheirFlowGiveTheirCreditsBack) {
  const std::string extra = "[flow]\nmax_receives_per_peer = 4\n";
  Pair pair(two_nic_node("node-a", 11, extra), two_nic_node("node-b", 21, extra));
  ASSERT_TRUE(pair.start());
  Node* a = pair.a.get();
  Node* b = pair.b.get();
  rdmad_flow* fa = nullptr;
  ASSERT_EQ(rdmad_flow_open(a->client(), "node-b", nullptr, &fa), RDMAD_OK) << rdmad_last_error(a->client());
  ASSERT_EQ(rdmad_flow_wait_connected(fa, 10000), RDMAD_OK) << a->output();
  Buffer src(a->client(), 4096, kAllAccess);
  Buffer dst(b->client(), 4 * 4096, kAllAccess);
  fill(src.data(), 4096, 61);
  fill(dst.data(), 4 * 4096, 62);
  auto open_b = [&] {
    rdmad_flow* fb = nullptr;
    EXPECT_EQ(rdmad_flow_open(b->client(), "node-a", nullptr, &fb), RDMAD_OK) << rdmad_last_error(b->client());
    EXPECT_EQ(rdmad_flow_wait_connected(fb, 10000), RDMAD_OK) << b->output();
    return fb;
  };
  auto advertised = [&] {
    return b->metric("rdmad_flow_recv_posts_total{path=\"lane\"}").value_or(0) +
           b->metric("rdmad_flow_recv_posts_total{path=\"control\"}").value_or(0);
  };
  for (int round = 0; round < 3; ++round) {
    rdmad_flow* fb = open_b();
    for (uint64_t i = 0; i < 4; ++i) ASSERT_EQ(rdmad_flow_recv(fb, i, dst.mr, 4096 * i, 4096), RDMAD_OK);
    ASSERT_TRUE(eventually([&] { return advertised() >= 4.0 * (round + 1); }, 10s)) << b->output();
    rdmad_flow_close(fb);
  }
  // node-a took the twelve withdrawals (a send racing one could still take its credit, and fail
  // at the NIC, as a send into a receive withdrawn meanwhile does).
  EXPECT_TRUE(eventually([&] { return a->metric("rdmad_flow_recv_posts_withdrawn_total").value_or(0) >= 12.0; }, 10s))
      << a->output();
  rdmad_flow* fb = open_b();
  ASSERT_EQ(rdmad_flow_recv(fb, 9, dst.mr, 0, 4096), RDMAD_OK);
  ASSERT_EQ(rdmad_flow_send(fa, 10, src.mr, 0, 1000), RDMAD_OK);
  auto r = wait_completion(fb, 20s);
  ASSERT_TRUE(r.has_value()) << a->output() << b->output();
  EXPECT_EQ(r->wr_id, 9u);
  EXPECT_EQ(r->status, RDMAD_OK);
  EXPECT_EQ(r->length, 1000u);
  EXPECT_EQ(first_difference(src.data(), dst.data(), 1000), -1);
  auto s = wait_completion(fa, 20s);
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(s->status, RDMAD_OK);
  EXPECT_EQ(a->metric("rdmad_peer_messages_refused_total{kind=\"receive_credit\"}").value_or(-1), 0.0) << a->output();
  rdmad_flow_close(fb);
  rdmad_flow_close(fa);
}

}  // namespace
}  // namespace rdmad::test
