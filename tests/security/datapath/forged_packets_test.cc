// Forged CNPs, NAKs, ACKs, READ responses, WRITEs and READs at a live RC connection, from an
// off-path host (another address, its own real source) and, as root, from a raw socket that
// forges the source (the peer's address with a wrong port, another address, and the peer's exact
// address and a RoCEv2 port but PSNs outside the window). QPNs are the real ones (as if learned),
// learned by sniffing lo, or guessed from the old numbering (0x100 up). Every transfer must
// succeed byte-exact at the moment it completes, no reaction point may move, and the receivers'
// drop counters must show every forged packet under its reason.
#include <gtest/gtest.h>

#include "attackers.h"
#include "live_pair.h"

namespace rdmad::security::test {
namespace {

using roce::psn_add;

constexpr int kTransfers = 20;
constexpr uint32_t kStride = 32;  // the attacker's PSNs: every 32nd of the transfer in flight

class ForgedPackets : public LivePair {};

// The attacker sees nothing but is handed both QPNs and the PSNs in flight, as if its spray were
// lucky: what stops it must be the source check, not the odds.
TEST_F(ForgedPackets, OffPathAttackerKnowingQpnsAndPsnsChangesNothing) {
  OffPathSender attacker("127.0.0.66", 0);
  ASSERT_TRUE(attacker.ok());
  uint64_t forged = 0;
  uint64_t guessed = 0;
  const uint32_t a_qpn = a_.qp->qp_num(), b_qpn = b_.qp->qp_num();
  run(kTransfers, [&](uint32_t first) {
    for (uint32_t k = 0; k < kPsnsPerWr; k += kStride) {
      const uint32_t psn = psn_add(first, k);
      int sent = 0;
      sent += attacker.send(cnp_to(a_qpn), a_ip(), pa_.udp_port);
      for (const roce::Aeth& nak : naks()) sent += attacker.send(ack_to_a(psn, nak), a_ip(), pa_.udp_port);
      sent += attacker.send(ack_to_a(psn, roce::Aeth::ack(0)), a_ip(), pa_.udp_port);
      sent += attacker.send(read_response_to_a(psn), a_ip(), pa_.udp_port);
      sent += attacker.send(cnp_to(b_qpn), b_ip(), pb_.udp_port);
      sent += attacker.send(write_to_b(psn), b_ip(), pb_.udp_port);
      sent += attacker.send(read_to_b(psn), b_ip(), pb_.udp_port);
      forged += sent;
    }
    // QPNs counted up from 0x100 before: the first QP of each NIC was 0x100.
    for (uint32_t q = 0x100; q < 0x108; ++q) {
      guessed += attacker.send(cnp_to(q), a_ip(), pa_.udp_port);
      guessed += attacker.send(cnp_to(q), b_ip(), pb_.udp_port);
    }
  });
  expect_no_rate_change();
  EXPECT_EQ(wait_drops(RxDropReason::kWrongSource, forged), forged);
  EXPECT_EQ(wait_drops(RxDropReason::kUnknownQp, guessed), guessed);
  EXPECT_EQ(b_.dev->counters().resp_remote_access_errors, 0u);
}

// An idle connection (nothing in flight) swept with WRITEs to a key nobody has across 4096 PSNs
// around the one the responder expects: one of them is in sequence, and taken it would NAK and
// move the QP to ERR (the review's "PSN sweep killed an idle lane").
TEST_F(ForgedPackets, IdleConnectionSurvivesAPsnSweepFromAnotherAddress) {
  OffPathSender attacker("127.0.0.66", 0);
  ASSERT_TRUE(attacker.ok());
  uint64_t forged = 0;
  for (uint32_t k = 0; k < 4096; ++k) {
    roce::Packet p = write_to_b(psn_add(kAPsn, k - 2048));
    p.reth.rkey ^= 0x5A5A0000;
    forged += attacker.send(p, b_ip(), pb_.udp_port);
  }
  EXPECT_EQ(wait_drops(RxDropReason::kWrongSource, forged), forged);
  EXPECT_EQ(b_.qp->query().state, QpState::kRts);
  run(2, [](uint32_t) {});
}

class SpoofedPackets : public LivePair {
 protected:
  void SetUp() override {
    LivePair::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    if (!spoofer_.unavailable().empty()) GTEST_SKIP() << "raw sockets not permitted: " << spoofer_.unavailable();
    if (!sniffer_.unavailable().empty()) GTEST_SKIP() << "packet sockets not permitted: " << sniffer_.unavailable();
    // Learn both QPNs from the wire: a WRITE to B names B's QP, B's ACK names A's.
    small_write();
    const auto write = sniffer_.next(b_ip(), pb_.udp_port, [](uint8_t op) { return op == 0x0A; },
                                     std::chrono::seconds(5));
    const auto ack = sniffer_.next(a_ip(), pa_.udp_port, [](uint8_t op) { return op == 0x11; },
                                   std::chrono::seconds(5));
    ASSERT_TRUE(write && ack) << "nothing sniffed on lo";
    b_qpn_ = write->dest_qp;
    a_qpn_ = ack->dest_qp;
    ASSERT_EQ(b_qpn_, b_.qp->qp_num());
    ASSERT_EQ(a_qpn_, a_.qp->qp_num());
    peer_port_ = write->src_port;  // A's real source port, in 49152-65535
    // A port outside the RoCEv2 range that is neither NIC's listening port.
    while (wrong_port_ == pa_.udp_port || wrong_port_ == pb_.udp_port) ++wrong_port_;
  }

  RawSpoofer spoofer_;
  LoopbackSniffer sniffer_;
  uint32_t a_qpn_ = 0, b_qpn_ = 0;
  uint16_t peer_port_ = 0;
  uint16_t wrong_port_ = 40000;
};

// Sources a spoofer can forge that are not the peer's: its address with a port a peer never sends
// from, and another address with a RoCEv2 port. Everything the off-path attacker sent, again.
TEST_F(SpoofedPackets, ForgedSourcesThatAreNotThePeersAreDropped) {
  const roce::IpAddr other = v4("127.0.0.13");
  uint64_t forged = 0;
  run(kTransfers, [&](uint32_t first) {
    for (uint32_t k = 0; k < kPsnsPerWr; k += kStride) {
      const uint32_t psn = psn_add(first, k);
      for (const auto& [ip, port] : {std::pair{b_ip(), wrong_port_}, std::pair{other, uint16_t{50000}}}) {
        int sent = 0;
        sent += spoofer_.send(cnp_to(a_qpn_), ip, port, a_ip(), pa_.udp_port);
        for (const roce::Aeth& nak : naks()) sent += spoofer_.send(ack_to_a(psn, nak), ip, port, a_ip(), pa_.udp_port);
        sent += spoofer_.send(ack_to_a(psn, roce::Aeth::ack(0)), ip, port, a_ip(), pa_.udp_port);
        sent += spoofer_.send(read_response_to_a(psn), ip, port, a_ip(), pa_.udp_port);
        forged += sent;
      }
      for (const auto& [ip, port] : {std::pair{a_ip(), wrong_port_}, std::pair{other, uint16_t{50000}}}) {
        int sent = 0;
        sent += spoofer_.send(cnp_to(b_qpn_), ip, port, b_ip(), pb_.udp_port);
        sent += spoofer_.send(write_to_b(psn), ip, port, b_ip(), pb_.udp_port);
        sent += spoofer_.send(read_to_b(psn), ip, port, b_ip(), pb_.udp_port);
        forged += sent;
      }
    }
  });
  expect_no_rate_change();
  EXPECT_EQ(wait_drops(RxDropReason::kWrongSource, forged), forged);
}

// The peer's exact address and a RoCEv2 source port pass the source check: what stops the rest is
// the PSN window. ACKs for PSNs never sent or long acknowledged, NAKs and READ responses for PSNs
// not outstanding are dropped (out_of_window); requests far ahead or behind get only the sequence
// NAK or duplicate ACK of IB 9.7.5, never ERR. (Inside the window a spoofer that sees the wire is
// believed: RoCE has no integrity it cannot redo, docs/verbs.md.)
TEST_F(SpoofedPackets, PeerSourceButPsnsOutsideTheWindowChangeNothing) {
  uint64_t at_a = 0, ahead = 0, behind = 0;
  const NicCounters b0 = b_.dev->counters();
  run(kTransfers, [&](uint32_t first) {
    const uint32_t long_ago = psn_add(first, roce::kPsnMask - 999);  // first - 1000
    const uint32_t never = psn_add(first, 1u << 22);
    at_a += spoofer_.send(ack_to_a(never, roce::Aeth::ack(0)), b_ip(), peer_port_, a_ip(), pa_.udp_port);
    at_a += spoofer_.send(ack_to_a(long_ago, roce::Aeth::ack(0)), b_ip(), peer_port_, a_ip(), pa_.udp_port);
    for (const roce::Aeth& nak : naks()) {
      at_a += spoofer_.send(ack_to_a(long_ago, nak), b_ip(), peer_port_, a_ip(), pa_.udp_port);
      at_a += spoofer_.send(ack_to_a(never, nak), b_ip(), peer_port_, a_ip(), pa_.udp_port);
    }
    at_a += spoofer_.send(read_response_to_a(long_ago), b_ip(), peer_port_, a_ip(), pa_.udp_port);
    at_a += spoofer_.send(read_response_to_a(never), b_ip(), peer_port_, a_ip(), pa_.udp_port);
    roce::Packet w = write_to_b(never);
    w.reth.rkey ^= 0x5A5A0000;  // taken in sequence it would fail the QP
    ahead += spoofer_.send(w, a_ip(), peer_port_, b_ip(), pb_.udp_port);
    w.bth.psn = long_ago;
    behind += spoofer_.send(w, a_ip(), peer_port_, b_ip(), pb_.udp_port);
  });
  expect_no_rate_change();
  EXPECT_GE(wait_drops(RxDropReason::kOutOfWindow, at_a), at_a);
  EXPECT_GE(wait_count(ahead, [&] { return b_.dev->counters().out_of_sequence - b0.out_of_sequence; }), ahead);
  EXPECT_GE(wait_count(behind, [&] { return b_.dev->counters().duplicate_request - b0.duplicate_request; }), behind);
  const NicCounters b1 = b_.dev->counters();
  EXPECT_EQ(b1.resp_remote_access_errors, 0u);
  EXPECT_EQ(dropped(a_.dev->counters(), RxDropReason::kWrongSource), 0u);
}

}  // namespace
}  // namespace rdmad::security::test
