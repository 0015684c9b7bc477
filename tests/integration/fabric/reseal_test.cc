// A port re-seals RoCEv2 packets: what leaves it carries an ICRC over the headers it leaves with
// (the port's address as source, the forward address as destination), so a receiver verifies it;
// what did not verify on arrival (corrupted, not RoCEv2) leaves unchanged and still fails.
#include <gtest/gtest.h>

#include "fabric_test_util.h"
#include "rdmad/roce/packet.h"
#include "rdmad/roce/sockaddr.h"

namespace rdmad::fabric {
namespace {

using test::UdpPeer;

roce::IpUdpInfo headers(const Endpoint& from, const Endpoint& to) {
  roce::IpUdpInfo ip;
  EXPECT_TRUE(roce::set_endpoints(ip, from.sa(), to.sa()));
  return ip;
}

// The address a datagram to `port` is sent to (a wildcard listen address is reached on loopback).
Endpoint reachable(const Endpoint& port, const char* loopback) {
  Endpoint e = Endpoint::parse(std::string(loopback) + ":0");
  if (e.family() == AF_INET6) {
    reinterpret_cast<sockaddr_in6*>(&e.addr)->sin6_port = htons(port.port());
  } else {
    reinterpret_cast<sockaddr_in*>(&e.addr)->sin_port = htons(port.port());
  }
  return e;
}

std::vector<roce::Packet> roce_packets(std::span<const uint8_t> payload) {
  std::vector<roce::Packet> out;
  roce::Packet w;
  w.bth.opcode = roce::Opcode::kWriteOnly;
  w.bth.dest_qp = 0x123456;
  w.bth.psn = 77;
  w.reth = {0x1000, 0xABCD1234, static_cast<uint32_t>(payload.size())};
  w.payload = payload;
  out.push_back(w);
  roce::Packet ack;
  ack.bth.opcode = roce::Opcode::kAcknowledge;
  ack.bth.dest_qp = 0x654321;
  ack.aeth = roce::Aeth::ack(5);
  out.push_back(ack);
  out.push_back(roce::make_cnp(0x222222));
  return out;
}

struct ResealCase {
  const char* listen;    // the port's bind address
  const char* loopback;  // where the sender and receiver live
  const char* name;
};

class Reseal : public ::testing::TestWithParam<ResealCase> {};

TEST_P(Reseal, ForwardedPacketsVerifyAgainstTheHeadersTheyArriveWith) {
  UdpPeer receiver((std::string(GetParam().loopback) + ":0").c_str());
  UdpPeer sender((std::string(GetParam().loopback) + ":0").c_str());
  PortConfig pc = test::port_to(receiver, GetParam().listen);
  pc.rate_bps = 1'000'000'000;  // a real queue, and RED marks CE (masked out of the ICRC)
  pc.red = {0, 1, 1.0};
  auto fabric = test::start_fabric(pc);
  const Endpoint port = reachable(fabric->listen_endpoint(0), GetParam().loopback);
  std::vector<uint8_t> payload(1024);
  for (size_t i = 0; i < payload.size(); ++i) payload[i] = static_cast<uint8_t>(i * 7);
  const auto packets = roce_packets(payload);
  const roce::IpUdpInfo in = headers(sender.endpoint(), port);
  for (const roce::Packet& p : packets) {
    std::vector<uint8_t> d(roce::datagram_bytes(p));
    ASSERT_EQ(roce::encode_datagram(in, p, d), d.size());
    sender.send(port, d, roce::kEcnEct0);
  }
  const auto got = receiver.receive_all(packets.size(), std::chrono::seconds(5));
  ASSERT_EQ(got.size(), packets.size());
  const roce::IpUdpInfo out = headers(port, receiver.endpoint());
  for (size_t i = 0; i < got.size(); ++i) {
    roce::Packet pkt;
    EXPECT_EQ(roce::decode_datagram(got[i].data, &out, &pkt), roce::DecodeError::kOk) << "packet " << i;
    EXPECT_EQ(pkt.bth.dest_qp, packets[i].bth.dest_qp);
    EXPECT_EQ(roce::decode_datagram(got[i].data, &in, &pkt), roce::DecodeError::kIcrcMismatch)
        << "packet " << i << " left with the sender's ICRC";
  }
  const PortStats s = test::wait_for_stats(*fabric, [&](const PortStats& st) { return st.tx_packets == packets.size(); });
  EXPECT_EQ(s.resealed, packets.size());
  EXPECT_EQ(s.not_resealed, 0u);
  EXPECT_GT(s.marked, 0u) << "CE marks change the TOS, which the ICRC does not cover";
}

TEST_P(Reseal, WhatDoesNotVerifyLeavesUnchanged) {
  UdpPeer receiver((std::string(GetParam().loopback) + ":0").c_str());
  UdpPeer sender((std::string(GetParam().loopback) + ":0").c_str());
  auto fabric = test::start_fabric(test::port_to(receiver, GetParam().listen));
  const Endpoint port = reachable(fabric->listen_endpoint(0), GetParam().loopback);
  std::vector<uint8_t> payload(256, 0x5A);
  const roce::Packet p = roce_packets(payload)[0];
  std::vector<uint8_t> corrupted(roce::datagram_bytes(p));
  ASSERT_EQ(roce::encode_datagram(headers(sender.endpoint(), port), p, corrupted), corrupted.size());
  corrupted[40] ^= 1;  // a payload bit flipped in flight: the port must not seal over it
  const std::vector<uint8_t> not_roce = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18};
  sender.send(port, corrupted, 0);
  sender.send(port, not_roce, 0);
  const auto got = receiver.receive_all(2, std::chrono::seconds(5));
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].data, corrupted);
  EXPECT_EQ(got[1].data, not_roce);
  roce::Packet pkt;
  const roce::IpUdpInfo out = headers(port, receiver.endpoint());
  EXPECT_EQ(roce::decode_datagram(got[0].data, &out, &pkt), roce::DecodeError::kIcrcMismatch);
  const PortStats s = test::wait_for_stats(*fabric, [](const PortStats& st) { return st.tx_packets == 2; });
  EXPECT_EQ(s.resealed, 0u);
  EXPECT_EQ(s.not_resealed, 2u);
}

INSTANTIATE_TEST_SUITE_P(Listen, Reseal,
                         ::testing::Values(ResealCase{"127.0.0.1:0", "127.0.0.1", "v4_address"},
                                           ResealCase{"0.0.0.0:0", "127.0.0.1", "v4_wildcard"},
                                           ResealCase{"[::1]:0", "[::1]", "v6_address"},
                                           ResealCase{"[::]:0", "[::1]", "v6_wildcard"}),
                         [](const ::testing::TestParamInfo<ResealCase>& c) { return std::string(c.param.name); });

}  // namespace
}  // namespace rdmad::fabric
