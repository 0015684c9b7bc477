#pragma once
// Re-sealing: a fabric port is a middlebox that rewrites the IP/UDP headers of what it forwards
// (its listen address becomes the source, the forward address the destination), and a RoCEv2 ICRC
// covers those headers. A port therefore verifies each datagram's ICRC against the headers it
// arrived with and, when it holds, recomputes it over the headers it leaves with, so receivers
// verify every packet. A datagram that does not verify (not RoCEv2, or corrupted) is forwarded
// unchanged and still fails at the receiver: the port never seals what it could not check.
#include <cstdint>
#include <span>

#include "rdmad/tools/fabric/endpoint.h"
#include "rdmad/roce/ip_udp.h"

namespace rdmad::fabric {

class Resealer {
 public:
  // `bound`: the port's listen socket address; `forward`: where it sends. A wildcard listen address
  // is replaced by the source address the kernel picks towards `forward`. Throws on failure.
  Resealer(const Endpoint& bound, const Endpoint& forward);

  // Verifies `datagram` (UDP payload) as sent from `from` to `to` (the address from IP_PKTINFO,
  // port ignored: it is the listen port) and re-seals it in place for the forwarded headers.
  // False, leaving it unchanged, when it is not a RoCEv2 packet whose ICRC holds.
  bool reseal(std::span<uint8_t> datagram, const sockaddr* from, const sockaddr_storage& to) const;

 private:
  uint16_t listen_port_;
  roce::IpUdpInfo out_;  // the forwarded headers
};

}  // namespace rdmad::fabric
