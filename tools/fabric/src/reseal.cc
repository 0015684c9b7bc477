#include "reseal.h"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <string>

#include "rdmad/roce/packet.h"
#include "rdmad/roce/sockaddr.h"

namespace rdmad::fabric {
namespace {

bool is_wildcard(const Endpoint& e) {
  if (e.family() == AF_INET6) {
    return IN6_IS_ADDR_UNSPECIFIED(&reinterpret_cast<const sockaddr_in6*>(&e.addr)->sin6_addr);
  }
  return reinterpret_cast<const sockaddr_in*>(&e.addr)->sin_addr.s_addr == htonl(INADDR_ANY);
}

// The source address the kernel gives datagrams from `bound` to `forward`: `bound` itself unless
// it is a wildcard, else what a socket connected to `forward` is bound to (a route lookup).
Endpoint source_towards(const Endpoint& bound, const Endpoint& forward) {
  if (!is_wildcard(bound)) return bound;
  const int fd = socket(forward.family(), SOCK_DGRAM | SOCK_CLOEXEC, 0);
  Endpoint e;
  socklen_t len = sizeof e.addr;
  const bool ok = fd >= 0 && connect(fd, forward.sa(), forward.length()) == 0 && getsockname(fd, e.sa(), &len) == 0;
  const int err = errno;
  if (fd >= 0) close(fd);
  if (!ok) throw std::runtime_error("fabric: source address towards " + forward.to_string() + ": " + std::strerror(err));
  if (e.family() == AF_INET6) {
    reinterpret_cast<sockaddr_in6*>(&e.addr)->sin6_port = htons(bound.port());
  } else {
    reinterpret_cast<sockaddr_in*>(&e.addr)->sin_port = htons(bound.port());
  }
  return e;
}

}  // namespace

Resealer::Resealer(const Endpoint& bound, const Endpoint& forward) : listen_port_(bound.port()) {
  const Endpoint src = source_towards(bound, forward);
  if (!roce::set_endpoints(out_, src.sa(), forward.sa())) {
    throw std::runtime_error("fabric: cannot describe " + src.to_string() + " -> " + forward.to_string());
  }
}

bool Resealer::reseal(std::span<uint8_t> datagram, const sockaddr* from, const sockaddr_storage& to) const {
  roce::IpUdpInfo in;
  if (!roce::set_endpoints(in, from, reinterpret_cast<const sockaddr*>(&to))) return false;
  in.dst_port = listen_port_;
  roce::Packet pkt;
  if (roce::decode_datagram(datagram, &in, &pkt) != roce::DecodeError::kOk) return false;
  roce::seal_datagram(out_, datagram);
  return true;
}

}  // namespace rdmad::fabric
