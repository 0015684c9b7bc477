#pragma once
// Bridges the socket API to the codec: the addresses and ports of an IpUdpInfo from the sockaddrs a
// UDP endpoint knows (its bound address and the peer's, or recvmsg's source and IP_PKTINFO).
#include <sys/socket.h>

#include "rdmad/roce/ip_udp.h"

namespace rdmad::roce {

// Sets ip.src/ip.dst and the UDP ports from two AF_INET or two AF_INET6 socket addresses (IPv4-mapped
// IPv6 addresses become IPv4). Leaves the other fields alone. Returns false, changing nothing, for
// other or mixed families.
bool set_endpoints(IpUdpInfo& ip, const sockaddr* src, const sockaddr* dst);

}  // namespace rdmad::roce
