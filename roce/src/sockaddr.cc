#include "rdmad/roce/sockaddr.h"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <cstring>

namespace rdmad::roce {
namespace {

bool to_ip(const sockaddr* sa, IpAddr& addr, uint16_t& port) {
  if (sa == nullptr) return false;
  if (sa->sa_family == AF_INET) {
    sockaddr_in in;
    std::memcpy(&in, sa, sizeof in);
    addr = IpAddr::v4(ntohl(in.sin_addr.s_addr));
    port = ntohs(in.sin_port);
    return true;
  }
  if (sa->sa_family == AF_INET6) {
    sockaddr_in6 in6;
    std::memcpy(&in6, sa, sizeof in6);
    port = ntohs(in6.sin6_port);
    if (IN6_IS_ADDR_V4MAPPED(&in6.sin6_addr)) {
      IpAddr a;
      std::memcpy(a.bytes.data(), in6.sin6_addr.s6_addr + 12, 4);
      addr = a;
    } else {
      std::array<uint8_t, 16> b;
      std::memcpy(b.data(), in6.sin6_addr.s6_addr, 16);
      addr = IpAddr::from_v6(b);
    }
    return true;
  }
  return false;
}

}  // namespace

bool set_endpoints(IpUdpInfo& ip, const sockaddr* src, const sockaddr* dst) {
  IpAddr s;
  IpAddr d;
  uint16_t sp = 0;
  uint16_t dp = 0;
  if (!to_ip(src, s, sp) || !to_ip(dst, d, dp) || s.v6 != d.v6) return false;
  ip.src = s;
  ip.dst = d;
  ip.src_port = sp;
  ip.dst_port = dp;
  return true;
}

}  // namespace rdmad::roce
