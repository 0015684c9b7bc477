// RED/ECN at dequeue: CE appears only once the queue exceeds Kmin, always above Kmax, never on
// non-ECT traffic, and the receiver reads it from the IP header (IP_RECVTOS).
#include <gtest/gtest.h>

#include <thread>

#include "fabric_test_util.h"
#include "rdmad/roce/headers.h"

namespace rdmad::fabric {
namespace {

using test::UdpPeer;

constexpr size_t kBytes = 1000;
constexpr size_t kCount = 400;

PortConfig marking_port(const UdpPeer& receiver) {
  PortConfig p = test::port_to(receiver);
  p.rate_bps = 200'000'000;  // 1000 B + 28 B headers: ~41 µs each, 400 take ~16 ms
  p.buffer_bytes = 1 << 20;
  p.red = {20'000, 100'000, 0.2};
  p.seed = 9;
  return p;
}

std::vector<test::Datagram> burst(Fabric& fabric, UdpPeer& receiver, uint8_t tos) {
  UdpPeer sender;
  std::vector<test::Datagram> got;
  std::thread rx([&] { got = receiver.receive_all(kCount, std::chrono::seconds(2)); });
  for (size_t i = 0; i < kCount; ++i) sender.send(fabric.listen_endpoint(0), test::numbered(i, kBytes), tos);
  rx.join();
  return got;
}

// The port thread counts a departure after handing the batch to the kernel, so the receiver can
// hold every datagram a moment before the counters do: poll (with a deadline) until they agree.
PortStats settled_stats(Fabric& fabric, size_t departures) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  PortStats s = fabric.stats(0);
  while (s.departures_below_kmin + s.departures_between + s.departures_above_kmax < departures &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    s = fabric.stats(0);
  }
  return s;
}

TEST(FabricMarking, CeAboveKminArrivesAtTheReceiver) {
  UdpPeer receiver;
  const PortConfig p = marking_port(receiver);
  auto fabric = test::start_fabric(p);
  const auto got = burst(*fabric, receiver, roce::kEcnEct0);
  ASSERT_EQ(got.size(), kCount);
  size_t ce = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_EQ(test::seq_of(got[i].data), i);
    const uint8_t ecn = got[i].tos & roce::kEcnMask;
    ASSERT_TRUE(ecn == roce::kEcnEct0 || ecn == roce::kEcnCe) << int(got[i].tos);
    if (ecn == roce::kEcnCe) ++ce;
  }
  const PortStats s = settled_stats(*fabric, kCount);
  EXPECT_EQ(ce, s.marked) << "every mark the port counts reaches the receiver";
  EXPECT_GT(s.departures_above_kmax, 0u) << "the burst must overflow Kmax";
  EXPECT_GE(s.marked, s.departures_above_kmax) << "above Kmax every datagram is marked";
  EXPECT_GT(s.departures_below_kmin, 0u);
  // The last datagrams leave a queue holding only themselves and their successors: at most
  // 20 of 1000 B, i.e. at or below Kmin, so they are never marked.
  for (size_t i = kCount - p.red.kmin_bytes / kBytes; i < kCount; ++i) {
    EXPECT_EQ(got[i].tos & roce::kEcnMask, roce::kEcnEct0) << "datagram " << i << " left below Kmin";
  }
  // Marks are a prefix-heavy pattern: the queue only shrinks after the burst, so the second half
  // of the departures sees less marking than the first.
  size_t first_half = 0;
  for (size_t i = 0; i < kCount / 2; ++i) first_half += (got[i].tos & roce::kEcnMask) == roce::kEcnCe;
  EXPECT_GT(first_half, ce - first_half);
}

TEST(FabricMarking, NonEctTrafficIsNeverMarked) {
  UdpPeer receiver;
  auto fabric = test::start_fabric(marking_port(receiver));
  const auto got = burst(*fabric, receiver, 0xB8);  // DSCP 46, Not-ECT
  ASSERT_EQ(got.size(), kCount);
  for (const auto& d : got) ASSERT_EQ(d.tos, 0xB8);
  const PortStats s = settled_stats(*fabric, kCount);
  EXPECT_EQ(s.marked, 0u);
  EXPECT_GT(s.departures_above_kmax, 0u) << "the queue was long enough to mark ECT traffic";
}

TEST(FabricMarking, EcnOffDisablesMarking) {
  UdpPeer receiver;
  PortConfig p = marking_port(receiver);
  p.ecn = false;
  auto fabric = test::start_fabric(p);
  const auto got = burst(*fabric, receiver, roce::kEcnEct0);
  ASSERT_EQ(got.size(), kCount);
  for (const auto& d : got) ASSERT_EQ(d.tos, roce::kEcnEct0);
}

}  // namespace
}  // namespace rdmad::fabric
