// The dpdk backend's frames without DPDK: the headers it builds around the engine's datagrams are
// byte for byte what roce::encode_frame (an independent encoder) makes of the same packet, over
// IPv4 and IPv6, whole or with the payload in its own piece; and the receive side takes exactly
// RoCEv2 to its own MAC, address and port, with every IP field the ICRC and ECN need.
#include <gtest/gtest.h>

#include <vector>

#include "frame.h"
#include "rdmad/roce/packet.h"

namespace rdmad::verbs::dpdk {
namespace {

constexpr MacAddr kMacA = {0x02, 0, 0, 0, 0, 0x0a};
constexpr MacAddr kMacB = {0x02, 0, 0, 0, 0, 0x0b};

roce::IpUdpInfo path_ip(bool v6) {
  roce::IpUdpInfo ip;
  ip.src = *parse_ip(v6 ? "fd00::a" : "10.1.0.10");
  ip.dst = *parse_ip(v6 ? "fd00::b" : "10.1.0.11");
  ip.src_port = source_port_for(0x123, 0x456);
  ip.dst_port = 4791;
  ip.flow_label = v6 ? 0x12345 : 0;
  return ip;
}

roce::Packet write_packet(const std::vector<uint8_t>& payload) {
  roce::Packet p;
  p.bth.opcode = roce::Opcode::kWriteOnly;
  p.bth.dest_qp = 0x456;
  p.bth.psn = 77;
  p.reth.va = 0x1000;
  p.reth.rkey = 0x99;
  p.reth.dma_length = static_cast<uint32_t>(payload.size());
  p.payload = payload;
  return p;
}

// The frame the port would send: its headers, then the datagram (in one piece or three).
std::vector<uint8_t> port_frame(const roce::IpUdpInfo& ip, const roce::Packet& pkt, uint8_t tos, bool gather) {
  const PathHeader h = make_path_header(kMacA, kMacB, ip);
  std::vector<uint8_t> slot(4200);
  std::vector<uint8_t> frame(h.size());
  if (!gather) {
    const size_t n = roce::encode_datagram(ip, pkt, slot);
    frame.insert(frame.end(), slot.begin(), slot.begin() + static_cast<std::ptrdiff_t>(n));
    write_frame_header(h, n, tos, frame.data());
    if (h.v6) finish_udp6_checksum(frame.data(), {std::span<const uint8_t>(slot.data(), n)});
    return frame;
  }
  const roce::GatherEncoding e = roce::encode_datagram_gather(ip, pkt, slot);
  const std::span<const uint8_t> head(slot.data(), e.head_bytes), tail(slot.data() + e.head_bytes, e.tail_bytes);
  frame.insert(frame.end(), head.begin(), head.end());
  frame.insert(frame.end(), pkt.payload.begin(), pkt.payload.end());
  frame.insert(frame.end(), tail.begin(), tail.end());
  write_frame_header(h, e.head_bytes + pkt.payload.size() + e.tail_bytes, tos, frame.data());
  if (h.v6) finish_udp6_checksum(frame.data(), {head, pkt.payload, tail});
  return frame;
}

class FrameTest : public ::testing::TestWithParam<bool> {};

TEST_P(FrameTest, HeadersAreWhatTheReferenceEncoderWrites) {
  const bool v6 = GetParam();
  for (size_t size : {0u, 1u, 255u, 256u, 1023u, 4096u}) {
    for (bool gather : {false, true}) {
      if (gather && size == 0) continue;
      std::vector<uint8_t> payload(size);
      for (size_t i = 0; i < size; ++i) payload[i] = static_cast<uint8_t>(i * 7 + 3);
      const roce::Packet pkt = write_packet(payload);
      roce::IpUdpInfo ip = path_ip(v6);
      const std::vector<uint8_t> frame = port_frame(ip, pkt, 0x8a, gather);
      ip.tos = 0x8a;
      std::vector<uint8_t> want(4300);
      want.resize(roce::encode_frame(ip, pkt, want));
      ASSERT_EQ(frame.size(), kEthHeaderBytes + want.size()) << size;
      EXPECT_TRUE(std::equal(want.begin(), want.end(), frame.begin() + kEthHeaderBytes))
          << (v6 ? "IPv6" : "IPv4") << " " << size << " B" << (gather ? " gathered" : "");
      EXPECT_TRUE(std::equal(kMacB.begin(), kMacB.end(), frame.begin()));
      EXPECT_TRUE(std::equal(kMacA.begin(), kMacA.end(), frame.begin() + 6));
      EXPECT_EQ(load_be16(frame.data() + 12), v6 ? kEtherTypeIpv6 : kEtherTypeIpv4);
    }
  }
}

TEST_P(FrameTest, ReceiverTakesTheFrameWithEveryIpField) {
  const bool v6 = GetParam();
  std::vector<uint8_t> payload(1000, 0x5c);
  const roce::Packet pkt = write_packet(payload);
  const roce::IpUdpInfo ip = path_ip(v6);
  const std::vector<uint8_t> frame = port_frame(ip, pkt, 0x03 /* CE */, true);
  const LinkAddress b{kMacB, ip.dst, 4791};
  const RxFrame f = classify_frame(frame, b);
  ASSERT_EQ(f.kind, FrameKind::kRoce);
  EXPECT_EQ(f.ip.src, ip.src);
  EXPECT_EQ(f.ip.dst, ip.dst);
  EXPECT_EQ(f.ip.src_port, ip.src_port);
  EXPECT_EQ(f.ip.dst_port, 4791);
  EXPECT_EQ(f.ip.tos, 0x03);
  EXPECT_EQ(f.ip.ttl, 64);
  EXPECT_EQ(f.ip.ip_id, 0);
  EXPECT_TRUE(f.ip.ip_id_known);
  EXPECT_TRUE(f.ip.dont_fragment);
  EXPECT_EQ(f.ip.flow_label, ip.flow_label);
  EXPECT_EQ(datagram_dest_qpn(f.datagram), 0x456u);
  roce::Packet got;
  ASSERT_EQ(roce::decode_datagram(f.datagram, &f.ip, &got), roce::DecodeError::kOk);
  EXPECT_TRUE(std::equal(payload.begin(), payload.end(), got.payload.begin(), got.payload.end()));
}

INSTANTIATE_TEST_SUITE_P(Dpdk, FrameTest, ::testing::Values(false, true),
                         [](const ::testing::TestParamInfo<bool>& i) { return i.param ? "Ipv6" : "Ipv4"; });

// A frame from another RoCEv2 sender, with a real IPv4 id its ICRC covers: the id is read off the
// header (ip_id_known), so the ICRC check needs no solving.
TEST(FrameRx, ForeignIpv4IdIsReadAndCoveredByTheIcrc) {
  std::vector<uint8_t> payload(64, 1);
  roce::IpUdpInfo ip = path_ip(false);
  ip.ip_id = 0x4d2;
  ip.ttl = 3;
  std::vector<uint8_t> frame(kEthHeaderBytes + 200);
  const PathHeader h = make_path_header(kMacA, kMacB, ip);
  std::copy(h.bytes.begin(), h.bytes.begin() + kEthHeaderBytes, frame.begin());
  frame.resize(kEthHeaderBytes + roce::encode_frame(ip, write_packet(payload), std::span(frame).subspan(kEthHeaderBytes)));
  const RxFrame f = classify_frame(frame, {kMacB, ip.dst, 4791});
  ASSERT_EQ(f.kind, FrameKind::kRoce);
  EXPECT_EQ(f.ip.ip_id, 0x4d2);
  EXPECT_EQ(f.ip.ttl, 3);
  roce::Packet got;
  EXPECT_EQ(roce::decode_datagram(f.datagram, &f.ip, &got), roce::DecodeError::kOk);
  roce::IpUdpInfo wrong = f.ip;
  wrong.ip_id = 0;
  EXPECT_EQ(roce::decode_datagram(f.datagram, &wrong, &got), roce::DecodeError::kIcrcMismatch)
      << "the id must matter to the ICRC, or this test proves nothing";
}

TEST(FrameRx, OnlyRoceToOurMacAddressAndPortIsTaken) {
  std::vector<uint8_t> payload(300, 9);
  const roce::IpUdpInfo ip = path_ip(false);
  const std::vector<uint8_t> good = port_frame(ip, write_packet(payload), 2, false);
  const LinkAddress b{kMacB, ip.dst, 4791};
  ASSERT_EQ(classify_frame(good, b).kind, FrameKind::kRoce);
  auto with = [&](auto change) {
    std::vector<uint8_t> f = good;
    change(f);
    return classify_frame(f, b).kind;
  };
  EXPECT_EQ(with([](auto& f) { f[5] ^= 1; }), FrameKind::kOther) << "another MAC";
  EXPECT_EQ(with([](auto& f) { f[0] = 0xff; }), FrameKind::kOther) << "a group MAC";
  EXPECT_EQ(with([](auto& f) { f[14 + 10] ^= 1; }), FrameKind::kBadIpChecksum);
  EXPECT_EQ(with([](auto& f) { f[14 + 19] ^= 1; }), FrameKind::kOther) << "another IP";
  EXPECT_EQ(with([](auto& f) { f[14 + 20 + 3] ^= 1; }), FrameKind::kOther) << "another UDP port";
  EXPECT_EQ(with([](auto& f) { f.resize(40); }), FrameKind::kOther) << "truncated";
  EXPECT_EQ(with([](auto& f) { store_be16(f.data() + 12, 0x88b5); }), FrameKind::kOther) << "another ethertype";
  auto refreshed = [](std::vector<uint8_t>& f) { store_be16(f.data() + 24, ipv4_header_checksum(f.data() + 14)); };
  EXPECT_EQ(with([&](auto& f) { f[14 + 6] |= 0x20; refreshed(f); }), FrameKind::kOther) << "a fragment";
  EXPECT_EQ(with([&](auto& f) { f[14 + 9] = 6; refreshed(f); }), FrameKind::kOther) << "TCP";
  EXPECT_EQ(with([&](auto& f) { f[14] = 0x46; refreshed(f); }), FrameKind::kOther) << "IPv4 options";
  // Ethernet padding after a short packet is not part of it.
  std::vector<uint8_t> padded = good;
  padded.resize(padded.size() + 20, 0);
  const RxFrame p = classify_frame(padded, b);
  ASSERT_EQ(p.kind, FrameKind::kRoce);
  EXPECT_EQ(p.datagram.size(), good.size() - frame_header_bytes(false));
}

TEST(FrameRx, ArpAndNeighborDiscoveryAreRecognised) {
  std::vector<uint8_t> arp(60, 0);
  std::copy(kBroadcastMac.begin(), kBroadcastMac.end(), arp.begin());
  store_be16(arp.data() + 12, kEtherTypeArp);
  const LinkAddress v4{kMacB, *parse_ip("10.1.0.11"), 4791};
  EXPECT_EQ(classify_frame(arp, v4).kind, FrameKind::kArp);
  const LinkAddress v6{kMacB, *parse_ip("fd00::b"), 4791};
  EXPECT_EQ(classify_frame(arp, v6).kind, FrameKind::kOther) << "an IPv6 NIC has no use for ARP";
  std::vector<uint8_t> ns(86, 0);
  const MacAddr group = {0x33, 0x33, 0xff, 0, 0, 0x0b};
  std::copy(group.begin(), group.end(), ns.begin());
  store_be16(ns.data() + 12, kEtherTypeIpv6);
  ns[14] = 0x60;
  store_be16(ns.data() + 18, 32);
  ns[20] = kIpProtoIcmpv6;
  ns[21] = 255;
  ns[54] = 135;
  EXPECT_EQ(classify_frame(ns, v6).kind, FrameKind::kNeighborDiscovery);
  ns[54] = 128;  // an echo request
  EXPECT_EQ(classify_frame(ns, v6).kind, FrameKind::kOther);
}

TEST(FrameChecksum, PiecesOfAnyLengthSumAsTheWhole) {
  std::vector<uint8_t> bytes(101);
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<uint8_t>(i * 31 + 7);
  InetChecksum whole;
  whole.add(bytes);
  for (size_t a = 0; a < 10; ++a) {
    for (size_t b = a; b < 14; ++b) {
      InetChecksum parts;
      parts.add(std::span(bytes).subspan(0, a));
      parts.add(std::span(bytes).subspan(a, b - a));
      parts.add(std::span(bytes).subspan(b));
      ASSERT_EQ(parts.value(), whole.value()) << a << " " << b;
    }
  }
}

TEST(FrameAddresses, MacAndIpTextRoundTrip) {
  const auto mac = parse_mac("02:0A:ff:00:10:9b");
  ASSERT_TRUE(mac);
  EXPECT_EQ(mac_string(*mac), "02:0a:ff:00:10:9b");
  for (const char* bad : {"", "02:0a:ff:00:10", "02:0a:ff:00:10:9g", "02-0a-ff-00-10-9b", "02:0a:ff:00:10:9b:"})
    EXPECT_FALSE(parse_mac(bad)) << bad;
  EXPECT_EQ(ip_string(*parse_ip("10.0.0.2")), "10.0.0.2");
  EXPECT_EQ(ip_string(*parse_ip("fd00::2")), "fd00::2");
  EXPECT_FALSE(parse_ip("10.0.0"));
}

TEST(FrameAddresses, SourcePortIsFixedPerPairAndInTheRoceRange) {
  EXPECT_EQ(source_port_for(1, 2), source_port_for(1, 2));
  uint32_t distinct = 0;
  uint16_t last = 0;
  for (uint32_t q = 0; q < 64; ++q) {
    const uint16_t p = source_port_for(0x100 + q, 0x200);
    EXPECT_GE(p, 49152);
    distinct += p != last;
    last = p;
  }
  EXPECT_GT(distinct, 60u) << "consecutive QP numbers should spread over ports";
}

}  // namespace
}  // namespace rdmad::verbs::dpdk
