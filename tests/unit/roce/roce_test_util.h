#pragma once
// Hex helpers and a reference packet description shared by the codec tests.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "rdmad/roce/ip_udp.h"

namespace rdmad::roce::test {

inline std::vector<uint8_t> from_hex(std::string_view hex) {
  std::vector<uint8_t> out;
  int hi = -1;
  for (char c : hex) {
    int v;
    if (c >= '0' && c <= '9') {
      v = c - '0';
    } else if (c >= 'a' && c <= 'f') {
      v = c - 'a' + 10;
    } else if (c >= 'A' && c <= 'F') {
      v = c - 'A' + 10;
    } else {
      continue;
    }
    if (hi < 0) {
      hi = v;
    } else {
      out.push_back(static_cast<uint8_t>(hi << 4 | v));
      hi = -1;
    }
  }
  return out;
}

// The golden CNP of the RoCEv2 design notes: a whole IPv4 frame 22.22.22.8 -> 22.22.22.7, TOS 0x89,
// TTL 0x20, id 0x98c6, DF, UDP 56238 -> 4791, DestQP 0xD2, ICRC DAFC1BEF.
inline const std::vector<uint8_t>& golden_cnp() {
  static const std::vector<uint8_t> frame = from_hex(
      "4589003C98C640002011692716161608 16161607DBAE12B7002800008100FFFF"
      "400000D2000000000000000000000000 0000000000000000DAFC1BEF");
  return frame;
}

// 10.0.0.1:49200 -> 10.0.0.2:4791, ECT(0).
inline IpUdpInfo v4_info() {
  IpUdpInfo ip;
  ip.src = IpAddr::v4(0x0A000001);
  ip.dst = IpAddr::v4(0x0A000002);
  ip.src_port = 49200;
  return ip;
}

// fd00::1 -> fd00::2.
inline IpUdpInfo v6_info() {
  IpUdpInfo ip;
  std::array<uint8_t, 16> a{0xfd};
  a[15] = 1;
  ip.src = IpAddr::from_v6(a);
  a[15] = 2;
  ip.dst = IpAddr::from_v6(a);
  ip.src_port = 50000;
  ip.flow_label = 0x12345;
  return ip;
}

}  // namespace rdmad::roce::test
