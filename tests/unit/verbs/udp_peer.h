#pragma once
// A bare UDP socket on 127.0.0.1 (ephemeral port) in the place of a peer NIC: it receives what a
// soft NIC sends it and never answers, or sends the NIC packets a test crafts.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdint>

namespace rdmad::verbs::test {

class UdpPeer {
 public:
  /// A receive that waits longer than `recv_timeout_s` fails (a missing packet fails the test
  /// instead of hanging it).
  explicit UdpPeer(int recv_timeout_s = 2) {
    fd_ = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof sa;
    if (fd_ < 0 || bind(fd_, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0 ||
        getsockname(fd_, reinterpret_cast<sockaddr*>(&sa), &len) != 0) {
      return;
    }
    port_ = ntohs(sa.sin_port);
    timeval tv{recv_timeout_s, 0};
    setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  }
  ~UdpPeer() {
    if (fd_ >= 0) close(fd_);
  }
  UdpPeer(const UdpPeer&) = delete;
  UdpPeer& operator=(const UdpPeer&) = delete;

  bool ok() const { return port_ != 0; }
  int fd() const { return fd_; }
  uint16_t port() const { return port_; }

 private:
  int fd_ = -1;
  uint16_t port_ = 0;
};

}  // namespace rdmad::verbs::test
