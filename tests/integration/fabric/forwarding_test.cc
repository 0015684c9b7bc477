// A port forwards every datagram byte for byte, in order, with its TOS / traffic class intact.
#include <gtest/gtest.h>

#include <random>

#include "fabric_test_util.h"
#include "rdmad/roce/packet.h"

namespace rdmad::fabric {
namespace {

using test::UdpPeer;

void forwards_byte_exact(const char* any_addr) {
  UdpPeer receiver(any_addr);
  UdpPeer sender(any_addr);
  auto fabric = test::start_fabric(test::port_to(receiver, any_addr));
  const Endpoint port = fabric->listen_endpoint(0);
  ASSERT_NE(port.port(), 0);

  std::mt19937 rng(3);
  std::vector<std::vector<uint8_t>> sent;
  std::vector<uint8_t> tos;
  // RoCEv2 frames of every size class the soft backend sends, plus random datagrams up to 9000 B.
  std::vector<uint8_t> payload(4096);
  for (auto& b : payload) b = static_cast<uint8_t>(rng());
  for (size_t len : {0, 1, 64, 1024, 4096}) {
    roce::Packet p;
    p.bth.opcode = roce::Opcode::kWriteOnly;
    p.bth.dest_qp = 0x33;
    p.payload = std::span<const uint8_t>(payload).first(len);
    std::vector<uint8_t> d(roce::datagram_bytes(p));
    roce::IpUdpInfo ip;
    ASSERT_EQ(roce::encode_datagram(ip, p, d), d.size());
    sent.push_back(std::move(d));
  }
  for (int i = 0; i < 200; ++i) {
    std::vector<uint8_t> d(rng() % 9000);
    for (auto& b : d) b = static_cast<uint8_t>(rng());
    sent.push_back(std::move(d));
  }
  const uint8_t kTos[] = {roce::kEcnEct0, 0xC0 | roce::kEcnEct0, 0x00, roce::kEcnEct1, 0xB8 | roce::kEcnCe};
  for (size_t i = 0; i < sent.size(); ++i) {
    tos.push_back(kTos[i % std::size(kTos)]);
    sender.send(port, sent[i], tos.back());
  }
  const auto got = receiver.receive_all(sent.size(), std::chrono::seconds(5));
  ASSERT_EQ(got.size(), sent.size());
  for (size_t i = 0; i < sent.size(); ++i) {
    ASSERT_EQ(got[i].data, sent[i]) << "datagram " << i;
    EXPECT_EQ(got[i].tos, tos[i]) << "datagram " << i;
  }
  const PortStats s =
      test::wait_for_stats(*fabric, [&](const PortStats& st) { return st.tx_packets == sent.size(); });
  EXPECT_EQ(s.rx_packets, sent.size());
  EXPECT_EQ(s.tx_packets, sent.size());
  EXPECT_EQ(s.rx_bytes, s.tx_bytes);
  EXPECT_EQ(s.marked, 0u) << "an unlimited port never queues";
  EXPECT_EQ(s.ce_received, sent.size() / std::size(kTos));
  EXPECT_EQ(s.drops_buffer + s.drops_loss + s.drops_oversize + s.tx_errors, 0u);
}

TEST(FabricForwarding, Ipv4ByteExactInOrderWithTos) { forwards_byte_exact("127.0.0.1:0"); }

TEST(FabricForwarding, Ipv6ByteExactInOrderWithTrafficClass) {
  try {
    UdpPeer probe("[::1]:0");
  } catch (const std::exception&) {
    GTEST_SKIP() << "no IPv6 loopback on this host";
  }
  forwards_byte_exact("[::1]:0");
}

TEST(FabricForwarding, OversizeDatagramsAreCountedNotForwarded) {
  UdpPeer receiver;
  UdpPeer sender;
  auto fabric = test::start_fabric(test::port_to(receiver));
  std::vector<uint8_t> big(20000, 1);
  std::vector<uint8_t> small(10, 2);
  sender.send(fabric->listen_endpoint(0), big, 0);
  sender.send(fabric->listen_endpoint(0), small, 0);
  auto d = receiver.receive(std::chrono::seconds(5));
  ASSERT_TRUE(d);
  EXPECT_EQ(d->data, small);
  const PortStats s = test::wait_for_stats(*fabric, [](const PortStats& st) { return st.tx_packets == 1; });
  EXPECT_EQ(s.drops_oversize, 1u);
}

TEST(FabricForwarding, TailDropsWhenTheBufferIsFull) {
  UdpPeer receiver;
  UdpPeer sender;
  PortConfig p = test::port_to(receiver);
  p.rate_bps = 10'000'000;  // 10 Mb/s: a 1000-byte datagram takes ~0.8 ms
  p.buffer_bytes = 10'000;
  p.ecn = false;
  auto fabric = test::start_fabric(p);
  std::vector<uint8_t> d(1000, 7);
  for (int i = 0; i < 100; ++i) sender.send(fabric->listen_endpoint(0), d, 0);
  const PortStats s = test::wait_for_stats(*fabric, [](const PortStats& st) { return st.rx_packets == 100; });
  EXPECT_GT(s.drops_buffer, 50u);
  EXPECT_LE(s.queue_peak_bytes, 10'000u);
  const auto got = receiver.receive_all(100, std::chrono::milliseconds(500));
  EXPECT_EQ(got.size(), 100 - fabric->stats(0).drops_buffer);
}

}  // namespace
}  // namespace rdmad::fabric
