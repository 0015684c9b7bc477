#pragma once
// A UDP endpoint (IPv4 or IPv6 address and port) as the socket API wants it.
#include <netinet/in.h>
#include <sys/socket.h>

#include <cstdint>
#include <string>
#include <string_view>

namespace rdmad::fabric {

struct Endpoint {
  sockaddr_storage addr{};

  int family() const { return addr.ss_family; }
  socklen_t length() const;
  uint16_t port() const;
  const sockaddr* sa() const { return reinterpret_cast<const sockaddr*>(&addr); }
  sockaddr* sa() { return reinterpret_cast<sockaddr*>(&addr); }

  // "127.0.0.1:4791", "[::1]:4791". Throws std::invalid_argument on anything else.
  static Endpoint parse(std::string_view text);
  // The same notation as parse().
  std::string to_string() const;
};

}  // namespace rdmad::fabric
