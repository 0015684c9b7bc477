#pragma once
// A plain UDP socket on 127.0.0.1 standing in for a soft NIC's peer: it sees what the NIC puts on
// the wire (decoded, ICRC verified against the real source) and sends it packets a test crafts
// (with the ICRC over its own real addresses, so the NIC verifies them as it would a peer's).
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <span>
#include <vector>

#include "rdmad/roce/packet.h"
#include "rdmad/verbs/device.h"
#include "verbs_test_util.h"

namespace rdmad::verbs::test {

struct FakePeer {
  int fd = -1;
  uint16_t port = 0;
  /// Bound to 127.0.0.1:`bind_port` (0: an ephemeral port). With kRoceSourcePorts, a free port in
  /// 49152-65535, the range a soft NIC's QP accepts from its peer's address besides the peer's own
  /// UDP port: such a socket passes for the peer of any QP connected to 127.0.0.1. With
  /// kOutsideRoceSourcePorts, a free port in 20000-40000 (below the range and the kernel's
  /// ephemeral ports): from there only a QP connected to this very port takes its packets.
  static constexpr int kRoceSourcePorts = -1;
  static constexpr int kOutsideRoceSourcePorts = -2;
  explicit FakePeer(int bind_port = 0) {
    fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    int rc = -1;
    const bool ranged = bind_port == kRoceSourcePorts || bind_port == kOutsideRoceSourcePorts;
    const int lo = bind_port == kRoceSourcePorts ? 49152 : 20000, span = bind_port == kRoceSourcePorts ? 16384 : 20000;
    for (int k = 0; ranged && rc != 0 && k < span; k += 97) {
      sa.sin_port = htons(static_cast<uint16_t>(lo + (getpid() + k) % span));
      rc = bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa);
    }
    if (!ranged) {
      sa.sin_port = htons(static_cast<uint16_t>(bind_port));
      rc = bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa);
    }
    EXPECT_EQ(rc, 0);
    socklen_t len = sizeof sa;
    getsockname(fd, reinterpret_cast<sockaddr*>(&sa), &len);
    port = ntohs(sa.sin_port);
  }
  ~FakePeer() { close(fd); }
  FakePeer(const FakePeer&) = delete;
  FakePeer& operator=(const FakePeer&) = delete;

  /// Next datagram (ICRC verified against its real source) decoded into `pkt`, or false by the
  /// deadline. `from` receives the sender's address.
  bool receive(roce::Packet* pkt, sockaddr_in* from, uint8_t* buf, size_t cap,
               std::chrono::steady_clock::time_point deadline) {
    while (std::chrono::steady_clock::now() < deadline) {
      pollfd p{fd, POLLIN, 0};
      if (poll(&p, 1, 10) <= 0) continue;
      socklen_t len = sizeof *from;
      ssize_t n = recvfrom(fd, buf, cap, 0, reinterpret_cast<sockaddr*>(from), &len);
      if (n <= 0) continue;
      roce::IpUdpInfo ip;
      ip.src = roce::IpAddr::v4(ntohl(from->sin_addr.s_addr));
      ip.dst = ip.src;
      ip.src_port = ntohs(from->sin_port);
      ip.dst_port = port;
      EXPECT_EQ(roce::decode_datagram({buf, static_cast<size_t>(n)}, &ip, pkt), roce::DecodeError::kOk)
          << "ICRC over the real source port";
      return true;
    }
    return false;
  }

  /// `pkt` as a datagram to the loopback UDP port `to_port`, sealed for this socket's address;
  /// empty if it cannot be encoded.
  std::vector<uint8_t> encode(const roce::Packet& pkt, uint16_t to_port) const {
    roce::IpUdpInfo ip;
    ip.src = roce::IpAddr::v4(0x7F000001);
    ip.dst = ip.src;
    ip.src_port = port;
    ip.dst_port = to_port;
    std::vector<uint8_t> out(roce::datagram_bytes(pkt));
    if (out.empty() || roce::encode_datagram(ip, pkt, out) != out.size()) return {};
    return out;
  }

  /// Sends `pkt` to the loopback UDP port `to_port`; false if it cannot be encoded or sent.
  bool send(const roce::Packet& pkt, uint16_t to_port) const {
    const std::vector<uint8_t> d = encode(pkt, to_port);
    return !d.empty() && send_raw(d, to_port);
  }

  /// Sends the packets in one sendmmsg call, so that they reach the NIC's socket together (and
  /// most likely its datapath in one receive batch).
  bool send_burst(const std::vector<roce::Packet>& pkts, uint16_t to_port) const {
    std::vector<std::vector<uint8_t>> d;
    std::vector<iovec> iov(pkts.size());
    std::vector<mmsghdr> msgs(pkts.size());
    sockaddr_in to{};
    to.sin_family = AF_INET;
    to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    to.sin_port = htons(to_port);
    for (const roce::Packet& p : pkts) d.push_back(encode(p, to_port));
    for (size_t i = 0; i < pkts.size(); ++i) {
      if (d[i].empty()) return false;
      iov[i] = {d[i].data(), d[i].size()};
      msgs[i] = {};
      msgs[i].msg_hdr.msg_name = &to;
      msgs[i].msg_hdr.msg_namelen = sizeof to;
      msgs[i].msg_hdr.msg_iov = &iov[i];
      msgs[i].msg_hdr.msg_iovlen = 1;
    }
    return sendmmsg(fd, msgs.data(), static_cast<unsigned>(msgs.size()), 0) == static_cast<int>(msgs.size());
  }

  /// Sends the bytes as they are (a test's malformed datagram).
  bool send_raw(std::span<const uint8_t> datagram, uint16_t to_port) const {
    sockaddr_in to{};
    to.sin_family = AF_INET;
    to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    to.sin_port = htons(to_port);
    return sendto(fd, datagram.data(), datagram.size(), 0, reinterpret_cast<sockaddr*>(&to), sizeof to) ==
           static_cast<ssize_t>(datagram.size());
  }
};

/// The peer as a QP's remote port (loopback GID, its UDP port).
inline PortInfo port_of(const FakePeer& peer) {
  PortInfo p;
  p.gid = Gid::from_ip("127.0.0.1").value();
  p.udp_port = peer.port;
  return p;
}

/// Opens a soft endpoint whose QP is connected (RTS) to `peer`, which plays QP `peer_qpn`.
inline void open_connected(Endpoint& e, const FakePeer& peer, const ConnectOptions& o, uint32_t peer_qpn = 0x4242) {
  std::string skip;
  make_endpoint(e, open_device("soft", soft_config(), &skip));
  ASSERT_TRUE(e.dev) << skip;
  ASSERT_TRUE(connect_qp(*e.qp, port_of(peer), peer_qpn, o.sq_psn, o.rq_psn, o).ok());
}

}  // namespace rdmad::verbs::test
