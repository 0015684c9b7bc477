// The engine's timers run on its port's clock (PortQueue::now_ns), not on the wall clock: a soft
// NIC whose port clock is held still never times out a WRITE its peer does not answer, however long
// it waits in real time; moved past the QP's timeout, the resend follows, and only one.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <vector>

#include "fake_peer.h"
#include "rdmad/verbs/engine/engine.h"
#include "soft_options.h"
#include "udp_port.h"
#include "verbs_test_util.h"

namespace rdmad::verbs::test {
namespace {

// A port queue that is the inner one in everything but its clock, which the test moves.
class ManualClockQueue final : public engine::PortQueue {
 public:
  ManualClockQueue(engine::PortQueue& inner, const std::atomic<int64_t>& clock) : inner_(inner), clock_(clock) {}
  Result<uint32_t> open_path(const engine::PathRequest& r, roce::IpUdpInfo* ip) override {
    return inner_.open_path(r, ip);
  }
  void close_path(uint32_t path) override { inner_.close_path(path); }
  std::span<uint8_t> tx_slot() override { return inner_.tx_slot(); }
  void tx_commit(uint32_t path, size_t head, std::span<const uint8_t> payload, size_t tail, uint8_t tos) override {
    inner_.tx_commit(path, head, payload, tail, tos);
  }
  bool tx_full() const override { return inner_.tx_full(); }
  size_t tx_pending() const override { return inner_.tx_pending(); }
  size_t tx_flush() override { return inner_.tx_flush(); }
  size_t receive(std::span<engine::RxPacket> out, engine::RxStats* stats) override {
    return inner_.receive(out, stats);
  }
  int wait_fd() const override { return inner_.wait_fd(); }
  int64_t poll_interval_ns() const override { return inner_.poll_interval_ns(); }
  void before_sleep() override { inner_.before_sleep(); }
  void after_sleep() override { inner_.after_sleep(); }
  int64_t now_ns() const override { return clock_.load(); }

 private:
  engine::PortQueue& inner_;
  const std::atomic<int64_t>& clock_;
};

class ManualClockPort final : public engine::PacketPort {
 public:
  ManualClockPort(std::unique_ptr<engine::PacketPort> inner, const std::atomic<int64_t>& clock)
      : inner_(std::move(inner)) {
    for (uint32_t i = 0; i < inner_->queue_count(); ++i)
      queues_.push_back(std::make_unique<ManualClockQueue>(inner_->queue(i), clock));
  }
  std::string describe() const override { return inner_->describe() + " (manual clock)"; }
  const roce::IpAddr& local_ip() const override { return inner_->local_ip(); }
  uint16_t udp_port() const override { return inner_->udp_port(); }
  uint32_t link_mtu() const override { return inner_->link_mtu(); }
  engine::PortOffloads offloads() const override { return inner_->offloads(); }
  bool link_up() const override { return inner_->link_up(); }
  uint64_t rx_overflow_drops() const override { return inner_->rx_overflow_drops(); }
  uint32_t queue_count() const override { return static_cast<uint32_t>(queues_.size()); }
  engine::PortQueue& queue(uint32_t i) override { return *queues_[i]; }

 private:
  std::unique_ptr<engine::PacketPort> inner_;
  std::vector<std::unique_ptr<ManualClockQueue>> queues_;
};

TEST(PortClock, QpTimersRunOnThePortsClockNotTheWallClock) {
  // Starts where the real clock is, so the only difference is that it stands still.
  std::atomic<int64_t> clock{engine::PortQueue::monotonic_ns()};
  auto soft = soft::soft_config(soft_config());
  ASSERT_TRUE(soft.ok()) << soft.status().message();
  const soft::UdpPortConfig port_config = soft.value().port;
  auto dev = engine::open_device(
      soft.value().engine, [&](const engine::PortSteering& s) -> Result<std::unique_ptr<engine::PacketPort>> {
        return std::unique_ptr<engine::PacketPort>(
            std::make_unique<ManualClockPort>(std::make_unique<soft::UdpPort>(port_config, s), clock));
      });
  ASSERT_TRUE(dev.ok()) << dev.status().message();
  Endpoint a;
  make_endpoint(a, std::move(dev.value()));

  // The peer is a socket that never answers: only the retransmit timer moves the QP on.
  FakePeer peer;
  ConnectOptions o;
  o.timeout = 12;  // 16.8 ms
  ASSERT_TRUE(connect_qp(*a.qp, port_of(peer), 0x4242, o.sq_psn, o.rq_psn, o).ok());
  std::vector<uint8_t> src(64, 0x5A);
  auto mr = a.pd->reg_mr(src.data(), src.size(), kAccessLocalWrite);
  ASSERT_TRUE(mr.ok()) << mr.status().message();
  SendWr w;
  w.wr_id = 1;
  w.opcode = WrOpcode::kRdmaWrite;
  w.sge = {reinterpret_cast<uint64_t>(src.data()), 64, mr.value()->lkey()};
  w.remote_addr = 0x1000;
  w.rkey = 0x77;
  const NicCounters c0 = a.dev->counters();
  ASSERT_TRUE(a.qp->post_send({&w, 1}).ok());
  roce::Packet pkt;
  sockaddr_in from{};
  uint8_t buf[9000];
  ASSERT_TRUE(peer.receive(&pkt, &from, buf, sizeof buf, std::chrono::steady_clock::now() + std::chrono::seconds(5)))
      << "the WRITE never left";

  // Twelve timeouts of real time with the port's clock held: the datapath keeps making passes (each
  // counters() read is one) and none of them may find the timer due.
  const engine::PassStats p0 = engine::pass_stats_for_test(*a.dev);
  const auto window_end = std::chrono::steady_clock::now() + std::chrono::milliseconds(200);
  while (std::chrono::steady_clock::now() < window_end) (void)a.dev->counters();
  const NicCounters held = a.dev->counters();
  EXPECT_GT(engine::pass_stats_for_test(*a.dev).passes - p0.passes, 10u);
  EXPECT_EQ(held.local_ack_timeout_err - c0.local_ack_timeout_err, 0u) << "timed out on the wall clock";
  EXPECT_EQ(held.retransmitted_packets - c0.retransmitted_packets, 0u);

  // One timeout and a little on the port's clock: exactly one timeout and one resend.
  clock.fetch_add(20'000'000);
  const uint64_t resent = counter_reaching(
      [&] { return a.dev->counters().retransmitted_packets - c0.retransmitted_packets; }, 1,
      std::chrono::milliseconds(5000));
  EXPECT_EQ(resent, 1u);
  EXPECT_TRUE(peer.receive(&pkt, &from, buf, sizeof buf, std::chrono::steady_clock::now() + std::chrono::seconds(5)))
      << "the resend never left";
  const NicCounters after = a.dev->counters();
  EXPECT_EQ(after.local_ack_timeout_err - c0.local_ack_timeout_err, 1u);
  EXPECT_EQ(after.retransmitted_packets - c0.retransmitted_packets, 1u);
}

}  // namespace
}  // namespace rdmad::verbs::test
