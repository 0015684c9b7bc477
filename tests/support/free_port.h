#pragma once
// A loopback port nobody listens on right now, for a daemon the caller starts a moment later.
// Header-only and free of GoogleTest so benchmarks that start daemons use it too.
//
// Taken below the kernel's ephemeral range (net.ipv4.ip_local_port_range), at random: a port the
// kernel hands to a bind(0) (the metrics exposer's listen = "127.0.0.1:0", any client socket) is
// never one of these. Before, the port came from a bind(0) too, and the kernel handed the same
// port to the daemon's metrics listener a moment later, so the peer channel could not listen.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdio>
#include <random>

namespace rdmad::test {

namespace detail {

inline bool can_bind(int type, int port) {
  int s = ::socket(AF_INET, type | SOCK_CLOEXEC, 0);
  if (s < 0) return false;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(static_cast<uint16_t>(port));
  const bool ok = ::bind(s, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0;
  ::close(s);
  return ok;
}

// A port from the kernel's ephemeral range (the fallback).
inline int kernel_port(int type) {
  int s = ::socket(AF_INET, type | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(s, reinterpret_cast<sockaddr*>(&a), sizeof(a));
  socklen_t len = sizeof(a);
  ::getsockname(s, reinterpret_cast<sockaddr*>(&a), &len);
  ::close(s);
  return ntohs(a.sin_port);
}

}  // namespace detail

/// `type`: SOCK_STREAM or SOCK_DGRAM.
inline int free_port(int type) {
  int low = 32768;
  if (std::FILE* f = std::fopen("/proc/sys/net/ipv4/ip_local_port_range", "r")) {
    int hi = 0;
    if (std::fscanf(f, "%d %d", &low, &hi) != 2) low = 32768;
    std::fclose(f);
  }
  const int first = 10000;
  if (low - first >= 1000) {
    static std::mt19937 rng(std::random_device{}());
    std::uniform_int_distribution<int> pick(first, low - 1);
    for (int tries = 0; tries < 200; ++tries) {
      const int port = pick(rng);
      if (detail::can_bind(type, port)) return port;
    }
  }
  return detail::kernel_port(type);
}

}  // namespace rdmad::test
