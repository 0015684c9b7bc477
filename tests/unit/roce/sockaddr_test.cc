#include "rdmad/roce/sockaddr.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>

namespace rdmad::roce {
namespace {

sockaddr_in v4(const char* a, uint16_t port) {
  sockaddr_in s{};
  s.sin_family = AF_INET;
  s.sin_port = htons(port);
  inet_pton(AF_INET, a, &s.sin_addr);
  return s;
}

sockaddr_in6 v6(const char* a, uint16_t port) {
  sockaddr_in6 s{};
  s.sin6_family = AF_INET6;
  s.sin6_port = htons(port);
  inet_pton(AF_INET6, a, &s.sin6_addr);
  return s;
}

TEST(RoceSockaddr, Ipv4) {
  const sockaddr_in s = v4("22.22.22.8", 56238);
  const sockaddr_in d = v4("22.22.22.7", 4791);
  IpUdpInfo ip;
  ASSERT_TRUE(
      set_endpoints(ip, reinterpret_cast<const sockaddr*>(&s), reinterpret_cast<const sockaddr*>(&d)));
  EXPECT_EQ(ip.src, IpAddr::v4(0x16161608));
  EXPECT_EQ(ip.dst, IpAddr::v4(0x16161607));
  EXPECT_EQ(ip.src_port, 56238);
  EXPECT_EQ(ip.dst_port, 4791);
}

TEST(RoceSockaddr, Ipv6AndMapped) {
  const sockaddr_in6 s = v6("fd00::1", 50000);
  const sockaddr_in6 d = v6("fd00::2", 4791);
  IpUdpInfo ip;
  ASSERT_TRUE(
      set_endpoints(ip, reinterpret_cast<const sockaddr*>(&s), reinterpret_cast<const sockaddr*>(&d)));
  EXPECT_TRUE(ip.src.v6);
  EXPECT_EQ(ip.src.bytes[0], 0xfd);
  EXPECT_EQ(ip.dst.bytes[15], 2);
  const sockaddr_in6 ms = v6("::ffff:10.0.0.1", 1);
  const sockaddr_in md = v4("10.0.0.2", 2);
  ASSERT_TRUE(
      set_endpoints(ip, reinterpret_cast<const sockaddr*>(&ms), reinterpret_cast<const sockaddr*>(&md)));
  EXPECT_EQ(ip.src, IpAddr::v4(0x0A000001));
  const IpUdpInfo before = ip;
  EXPECT_FALSE(
      set_endpoints(ip, reinterpret_cast<const sockaddr*>(&s), reinterpret_cast<const sockaddr*>(&md)))
      << "mixed families";
  EXPECT_EQ(ip, before);
}

}  // namespace
}  // namespace rdmad::roce
