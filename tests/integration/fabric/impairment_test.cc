// Seeded loss, duplication and reordering: the rates match the configured probabilities, the
// receiver sees exactly what the counters say, and the same seed gives the same output sequence.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <thread>

#include "fabric_test_util.h"

namespace rdmad::fabric {
namespace {

using test::UdpPeer;

constexpr size_t kCount = 4000;
constexpr double kLoss = 0.10;
constexpr double kDup = 0.05;
constexpr double kReorder = 0.05;

struct Outcome {
  std::vector<uint64_t> seqs;  // in arrival order
  PortStats stats;
};

Outcome run_once(uint64_t seed) {
  UdpPeer receiver;
  UdpPeer sender;
  PortConfig p = test::port_to(receiver);
  p.loss = kLoss;
  p.duplicate = kDup;
  p.reorder = kReorder;
  // Long enough that a held datagram always leaves right after its successor, never on the timer,
  // so the output order depends only on the seed.
  p.reorder_hold_us = 200'000;
  p.seed = seed;
  auto fabric = test::start_fabric(p);
  for (size_t i = 0; i < kCount; ++i) sender.send(fabric->listen_endpoint(0), test::numbered(i, 16), 0);
  const PortStats in =
      test::wait_for_stats(*fabric, [](const PortStats& s) { return s.rx_packets == kCount; });
  EXPECT_EQ(in.rx_packets, kCount);
  const uint64_t expect = kCount - in.drops_loss + in.duplicated;
  Outcome r;
  for (const auto& d : receiver.receive_all(expect, std::chrono::seconds(2)))
    r.seqs.push_back(test::seq_of(d.data));
  r.stats = test::wait_for_stats(*fabric, [&](const PortStats& s) { return s.tx_packets == expect; });
  return r;
}

// |x - n·p| within 4.5 standard deviations of a binomial(n, p).
void expect_binomial(uint64_t x, double n, double prob, const char* what) {
  const double mean = n * prob;
  const double sd = std::sqrt(n * prob * (1 - prob));
  EXPECT_NEAR(static_cast<double>(x), mean, 4.5 * sd) << what;
}

TEST(FabricImpairments, RatesMatchAndTheReceiverSeesTheCounters) {
  const Outcome r = run_once(42);
  const PortStats& s = r.stats;
  expect_binomial(s.drops_loss, kCount, kLoss, "loss");
  const double kept = static_cast<double>(kCount - s.drops_loss);
  expect_binomial(s.duplicated, kept, kDup, "duplicates");
  expect_binomial(s.reordered, kept + static_cast<double>(s.duplicated), kReorder, "reordered");

  ASSERT_EQ(r.seqs.size(), s.tx_packets);
  std::map<uint64_t, int> copies;
  for (uint64_t q : r.seqs) ++copies[q];
  EXPECT_EQ(copies.size(), kCount - s.drops_loss) << "distinct datagrams = sent - lost";
  size_t dups = 0;
  for (const auto& [q, n] : copies) {
    ASSERT_LT(q, kCount);
    ASSERT_LE(n, 2);
    dups += static_cast<size_t>(n - 1);
  }
  EXPECT_EQ(dups, s.duplicated);
  // A held datagram comes right after its successor: one adjacent inversion each, unless the
  // successor was its own duplicate (then the swap is invisible).
  size_t inversions = 0;
  for (size_t i = 1; i < r.seqs.size(); ++i) inversions += r.seqs[i] < r.seqs[i - 1];
  EXPECT_LE(inversions, s.reordered);
  EXPECT_GE(inversions + s.duplicated, s.reordered);
  EXPECT_GT(inversions, 0u);
}

TEST(FabricImpairments, SameSeedSameSequenceOtherSeedDiffers) {
  const Outcome a = run_once(7);
  const Outcome b = run_once(7);
  const Outcome c = run_once(8);
  ASSERT_EQ(a.seqs.size(), b.seqs.size());
  for (size_t i = 0; i < a.seqs.size(); ++i) ASSERT_EQ(a.seqs[i], b.seqs[i]) << "position " << i;
  EXPECT_EQ(a.stats.drops_loss, b.stats.drops_loss);
  EXPECT_NE(a.seqs, c.seqs);
}

// drop_opcode with drop_opcode_after: the first N datagrams of the opcode pass, then none (the
// numbered datagrams' first byte, the opcode's place, is 0 for small numbers).
TEST(FabricImpairments, DropOpcodeAfterLetsTheFirstOnesThrough) {
  UdpPeer receiver;
  UdpPeer sender;
  PortConfig p = test::port_to(receiver);
  p.drop_opcode = 0;
  p.drop_opcode_after = 5;
  auto fabric = test::start_fabric(p);
  for (size_t i = 0; i < 20; ++i) sender.send(fabric->listen_endpoint(0), test::numbered(i, 16), 0);
  const PortStats in = test::wait_for_stats(*fabric, [](const PortStats& s) { return s.rx_packets == 20; });
  EXPECT_EQ(in.drops_loss, 15u);
  std::vector<uint64_t> seqs;
  for (const auto& d : receiver.receive_all(5, std::chrono::milliseconds(500))) seqs.push_back(test::seq_of(d.data));
  EXPECT_EQ(seqs, (std::vector<uint64_t>{0, 1, 2, 3, 4}));
}

}  // namespace
}  // namespace rdmad::fabric
