#pragma once
// A live RC connection for attackers to aim at: soft NIC A (127.0.0.11, the requester) and B
// (127.0.0.12, the responder), DCQCN on, one QP each, transfers that alternate a WRITE A -> B and
// a READ A <- B of 256 KiB with fresh data each, every one checked byte-exact the moment it
// completes (a WRITE reported done before its bytes landed is silent loss and fails the check).
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "rdmad/roce/packet.h"
#include "unit/verbs/verbs_test_util.h"

namespace rdmad::security::test {

using namespace rdmad::verbs;
using verbs::test::Endpoint;

inline uint64_t dropped(const NicCounters& c, RxDropReason r) {
  return c.rx_dropped_by_reason[static_cast<size_t>(r)];
}

class LivePair : public ::testing::Test {
 protected:
  static constexpr uint32_t kMsg = 256u << 10;
  static constexpr uint32_t kMtu = 1024;
  static constexpr uint32_t kPsnsPerWr = kMsg / kMtu;
  static constexpr uint32_t kAPsn = 0x0F0000;  // A's first request PSN (B's expected PSN)
  static constexpr uint32_t kBPsn = 0x7FFF00;  // B's (unused) send PSNs

  void SetUp() override {
    std::string skip;
    verbs::test::make_endpoint(a_, verbs::test::open_device("soft", config("127.0.0.11"), &skip), 64);
    if (!a_.dev) GTEST_SKIP() << skip;
    verbs::test::make_endpoint(b_, verbs::test::open_device("soft", config("127.0.0.12"), &skip), 64);
    ASSERT_TRUE(b_.dev) << skip;
    verbs::test::ConnectOptions o;
    o.mtu = kMtu;
    o.timeout = 14;  // 67 ms: a loaded machine's scheduling gaps are not losses
    pa_ = a_.dev->query_port(1).value();
    pb_ = b_.dev->query_port(1).value();
    ASSERT_TRUE(verbs::test::connect_qp(*a_.qp, pb_, b_.qp->qp_num(), kAPsn, kBPsn, o).ok());
    ASSERT_TRUE(verbs::test::connect_qp(*b_.qp, pa_, a_.qp->qp_num(), kBPsn, kAPsn, o).ok());
    a_buf_.resize(kMsg);
    b_buf_.resize(kMsg);
    a_mr_ = std::move(a_.pd->reg_mr(a_buf_.data(), kMsg, kAccessLocalWrite).value());
    b_mr_ = std::move(b_.pd->reg_mr(b_buf_.data(), kMsg, kAccessLocalWrite | kAccessRemoteWrite | kAccessRemoteRead)
                          .value());
    rates_before_ = rates();
  }

  static DeviceConfig config(const char* address) {
    DeviceConfig c = verbs::test::soft_config(address);
    c.backend_options["cc_enabled"] = true;
    return c;
  }

  roce::IpAddr a_ip() const { return v4_of(pa_); }
  roce::IpAddr b_ip() const { return v4_of(pb_); }
  static roce::IpAddr v4_of(const PortInfo& p) {
    roce::IpAddr ip;
    std::memcpy(ip.bytes.data(), p.gid.raw.data() + 12, 4);
    return ip;
  }

  // Runs `n` more transfers; `attack(first_psn)` runs right after each is posted, while its PSNs
  // [first_psn, first_psn + kPsnsPerWr) are in flight. Every transfer must succeed byte-exact.
  template <class Attack>
  void run(int n, Attack attack) {
    for (int i = 0; i < n; ++i) {
      const bool write = i % 2 == 0;
      std::vector<uint8_t> want(kMsg);
      verbs::test::fill_pattern(want, 1000 + i);
      std::vector<uint8_t>& src = write ? a_buf_ : b_buf_;
      std::vector<uint8_t>& dst = write ? b_buf_ : a_buf_;
      src = want;
      std::fill(dst.begin(), dst.end(), 0xEE);
      SendWr wr;
      wr.wr_id = i;
      wr.opcode = write ? WrOpcode::kRdmaWrite : WrOpcode::kRdmaRead;
      wr.sge = {reinterpret_cast<uint64_t>(a_buf_.data()), kMsg, a_mr_->lkey()};
      wr.remote_addr = reinterpret_cast<uint64_t>(b_buf_.data());
      wr.rkey = b_mr_->rkey();
      ASSERT_TRUE(a_.qp->post_send({&wr, 1}).ok());
      attack(next_psn_);
      auto wc = verbs::test::wait_completions(*a_.scq, 1, std::chrono::seconds(30));
      ASSERT_EQ(wc.size(), 1u) << "transfer " << i << " never completed";
      ASSERT_EQ(wc[0].status, WcStatus::kSuccess) << "transfer " << i << ": " << to_string(wc[0].status);
      // Checked at once: the bytes must be there when the requester says so.
      ASSERT_TRUE(dst == want) << "transfer " << i << (write ? " (WRITE)" : " (READ)") << " reported success, "
                               << "bytes differ";
      next_psn_ = roce::psn_add(next_psn_, kPsnsPerWr);
    }
    EXPECT_EQ(a_.qp->query().state, QpState::kRts);
    EXPECT_EQ(b_.qp->query().state, QpState::kRts);
  }

  // One 64-byte WRITE A -> B (one PSN), waited for: a few packets on the wire to learn from.
  void small_write() {
    SendWr wr;
    wr.opcode = WrOpcode::kRdmaWrite;
    wr.sge = {reinterpret_cast<uint64_t>(a_buf_.data()), 64, a_mr_->lkey()};
    wr.remote_addr = reinterpret_cast<uint64_t>(b_buf_.data());
    wr.rkey = b_mr_->rkey();
    ASSERT_TRUE(a_.qp->post_send({&wr, 1}).ok());
    auto wc = verbs::test::wait_completions(*a_.scq, 1, std::chrono::seconds(30));
    ASSERT_EQ(wc.size(), 1u);
    ASSERT_EQ(wc[0].status, WcStatus::kSuccess);
    next_psn_ = roce::psn_add(next_psn_, 1);
  }

  // The reaction-point rate of each NIC's one QP in RTS (A's, then B's).
  std::vector<double> rates() const {
    std::vector<double> r;
    for (const Endpoint* e : {&a_, &b_}) {
      for (const DcqcnSample& s : e->dev->dcqcn_samples()) r.push_back(s.rate_mbps);
    }
    return r;
  }

  // No CNP was applied: both QPs still send at the rate they started with.
  void expect_no_rate_change() const {
    EXPECT_EQ(rates(), rates_before_) << "a forged CNP moved a reaction point";
    EXPECT_EQ(a_.dev->counters().rp_cnp_handled, 0u);
    EXPECT_EQ(b_.dev->counters().rp_cnp_handled, 0u);
  }

  // Polls (with a deadline) until A's and B's drops for `reason` add up to `n`; returns the sum.
  uint64_t wait_drops(RxDropReason reason, uint64_t n) const {
    return wait_count(n, [&] { return dropped(a_.dev->counters(), reason) + dropped(b_.dev->counters(), reason); });
  }
  // Polls (with a deadline) until count() reaches `n` (the datapath handles what was sent
  // asynchronously); returns the last count.
  template <typename Count>
  static uint64_t wait_count(uint64_t n, Count count) {
    uint64_t got = 0;
    const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    do {
      got = count();
      if (got >= n) break;
      std::this_thread::yield();
    } while (std::chrono::steady_clock::now() < end);
    return got;
  }

  // Forged packets, each with the PSN given.
  static roce::Packet packet(roce::Opcode op, uint32_t qpn, uint32_t psn) {
    roce::Packet p;
    p.bth.opcode = op;
    p.bth.dest_qp = qpn;
    p.bth.psn = psn;
    p.bth.ack_req = !roce::opcode_info(op).aeth;  // requests ask for an ACK
    return p;
  }
  roce::Packet cnp_to(uint32_t qpn) const { return roce::make_cnp(qpn); }
  roce::Packet ack_to_a(uint32_t psn, roce::Aeth aeth) const {
    roce::Packet p = packet(roce::Opcode::kAcknowledge, a_.qp->qp_num(), psn);
    p.aeth = aeth;
    return p;
  }
  roce::Packet read_response_to_a(uint32_t psn) const {
    roce::Packet p = packet(roce::Opcode::kReadResponseOnly, a_.qp->qp_num(), psn);
    p.aeth = roce::Aeth::ack(0);
    p.payload = garbage_;
    return p;
  }
  roce::Packet write_to_b(uint32_t psn) const {
    roce::Packet p = packet(roce::Opcode::kWriteOnly, b_.qp->qp_num(), psn);
    p.reth = {reinterpret_cast<uint64_t>(b_buf_.data()), b_mr_->rkey(), sizeof garbage_};
    p.payload = garbage_;
    return p;
  }
  roce::Packet read_to_b(uint32_t psn) const {
    roce::Packet p = packet(roce::Opcode::kReadRequest, b_.qp->qp_num(), psn);
    p.reth = {reinterpret_cast<uint64_t>(b_buf_.data()), b_mr_->rkey(), kMtu};
    return p;
  }
  // Every kind of NAK a requester acts on: sequence error (rewinds), RNR (waits), and the three
  // that fail a WR.
  static std::vector<roce::Aeth> naks() {
    return {roce::Aeth::nak(0, roce::NakCode::kPsnSequenceError), roce::Aeth::rnr_nak(0, 0),
            roce::Aeth::nak(0, roce::NakCode::kRemoteAccessError), roce::Aeth::nak(0, roce::NakCode::kInvalidRequest),
            roce::Aeth::nak(0, roce::NakCode::kRemoteOperationalError)};
  }

  Endpoint a_, b_;
  PortInfo pa_, pb_;
  std::vector<uint8_t> a_buf_, b_buf_;
  std::unique_ptr<MemoryRegion> a_mr_, b_mr_;
  std::vector<double> rates_before_;
  uint32_t next_psn_ = kAPsn;  // the first PSN of the next transfer
  uint8_t garbage_[64] = {0xBA, 0xD0, 0xBA, 0xD0, 0xBA, 0xD0, 0xBA, 0xD0};
};

}  // namespace rdmad::security::test
