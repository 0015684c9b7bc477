#include "rdmad/tools/fabric/endpoint.h"

#include <arpa/inet.h>

#include <charconv>
#include <cstring>
#include <stdexcept>

namespace rdmad::fabric {

socklen_t Endpoint::length() const {
  return family() == AF_INET6 ? sizeof(sockaddr_in6) : sizeof(sockaddr_in);
}

uint16_t Endpoint::port() const {
  if (family() == AF_INET6) return ntohs(reinterpret_cast<const sockaddr_in6*>(&addr)->sin6_port);
  return ntohs(reinterpret_cast<const sockaddr_in*>(&addr)->sin_port);
}

Endpoint Endpoint::parse(std::string_view text) {
  const auto bad = [&] {
    return std::invalid_argument("bad address '" + std::string(text) + "' (want ip:port or [ip6]:port)");
  };
  std::string host;
  std::string_view port_text;
  if (!text.empty() && text.front() == '[') {
    const size_t close = text.find(']');
    if (close == std::string_view::npos || close + 1 >= text.size() || text[close + 1] != ':') throw bad();
    host = std::string(text.substr(1, close - 1));
    port_text = text.substr(close + 2);
  } else {
    const size_t colon = text.rfind(':');
    if (colon == std::string_view::npos || text.find(':') != colon) throw bad();
    host = std::string(text.substr(0, colon));
    port_text = text.substr(colon + 1);
  }
  unsigned port = 0;
  const auto [end, ec] = std::from_chars(port_text.data(), port_text.data() + port_text.size(), port);
  if (ec != std::errc{} || end != port_text.data() + port_text.size() || port > 65535 || port_text.empty()) {
    throw bad();
  }
  Endpoint e;
  auto* v4 = reinterpret_cast<sockaddr_in*>(&e.addr);
  auto* v6 = reinterpret_cast<sockaddr_in6*>(&e.addr);
  if (inet_pton(AF_INET, host.c_str(), &v4->sin_addr) == 1) {
    v4->sin_family = AF_INET;
    v4->sin_port = htons(static_cast<uint16_t>(port));
  } else if (inet_pton(AF_INET6, host.c_str(), &v6->sin6_addr) == 1) {
    v6->sin6_family = AF_INET6;
    v6->sin6_port = htons(static_cast<uint16_t>(port));
  } else {
    throw bad();
  }
  return e;
}

std::string Endpoint::to_string() const {
  char buf[INET6_ADDRSTRLEN] = {};
  if (family() == AF_INET6) {
    inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6*>(&addr)->sin6_addr, buf, sizeof buf);
    return "[" + std::string(buf) + "]:" + std::to_string(port());
  }
  inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(&addr)->sin_addr, buf, sizeof buf);
  return std::string(buf) + ":" + std::to_string(port());
}

}  // namespace rdmad::fabric
