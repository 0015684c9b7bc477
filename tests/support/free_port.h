#pragma once
// A loopback port nobody listens on right now, for a daemon the caller starts a moment later.
// Header-only and free of GoogleTest so benchmarks that start daemons use it too.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

namespace rdmad::test {

/// `type`: SOCK_STREAM or SOCK_DGRAM.
inline int free_port(int type) {
  int s = ::socket(AF_INET, type, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(s, reinterpret_cast<sockaddr*>(&a), sizeof(a));
  socklen_t len = sizeof(a);
  ::getsockname(s, reinterpret_cast<sockaddr*>(&a), &len);
  ::close(s);
  return ntohs(a.sin_port);
}

}  // namespace rdmad::test
