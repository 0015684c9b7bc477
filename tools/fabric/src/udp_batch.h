#pragma once
// Batched UDP I/O with the IP TOS / IPv6 traffic class carried per datagram in control messages:
// recvmmsg with IP_RECVTOS / IPV6_RECVTCLASS, sendmmsg with an IP_TOS / IPV6_TCLASS cmsg each.
// Received datagrams also report their source and, through IP_PKTINFO / IPV6_RECVPKTINFO, the
// address they were sent to: the IP/UDP headers a RoCEv2 ICRC covers (the port re-seals with them).
#include <sys/socket.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "rdmad/tools/fabric/endpoint.h"

namespace rdmad::fabric {

inline constexpr size_t kMaxDatagramBytes = 9216;  // jumbo frame; RoCEv2 needs at most ~4.2 KB
inline constexpr size_t kIoBatch = 32;

// Owns a UDP socket bound to an address, with TOS and destination-address reception enabled. IPv4
// datagrams leave with DF set and IP id 0 (IP_PMTUDISC_DO), the header a re-sealed ICRC assumes.
class UdpSocket {
 public:
  UdpSocket() = default;
  // Throws std::runtime_error naming `what` and errno.
  UdpSocket(const Endpoint& bind_to, const char* what);
  ~UdpSocket();
  UdpSocket(UdpSocket&& o) noexcept : fd_(o.fd_), family_(o.family_) { o.fd_ = -1; }
  UdpSocket& operator=(UdpSocket&&) = delete;

  int fd() const { return fd_; }
  int family() const { return family_; }
  Endpoint local_endpoint() const;

 private:
  int fd_ = -1;
  int family_ = 0;
};

struct ReceivedDatagram {
  std::span<uint8_t> data;  // in the batch's buffer, which the port may re-seal in place
  uint8_t tos = 0;
  bool truncated = false;
  const sockaddr* from = nullptr;  // the sender
  sockaddr_storage to{};           // the address it was sent to (port 0); AF_UNSPEC when unknown
};

class RecvBatch {
 public:
  RecvBatch();
  // Non-blocking recvmmsg of up to kIoBatch datagrams; returns how many (0 when none is waiting).
  size_t receive(const UdpSocket& socket);
  ReceivedDatagram get(size_t i);

 private:
  std::vector<uint8_t> data_;
  std::array<mmsghdr, kIoBatch> msgs_{};
  std::array<iovec, kIoBatch> iov_{};
  std::array<sockaddr_storage, kIoBatch> from_{};
  // TOS/traffic class and packet info: CMSG_SPACE(4) + CMSG_SPACE(sizeof(in6_pktinfo)) = 56.
  std::array<std::array<uint8_t, 64>, kIoBatch> ctrl_{};
};

class SendBatch {
 public:
  explicit SendBatch(const Endpoint& to);
  bool full() const { return count_ == kIoBatch; }
  bool empty() const { return count_ == 0; }
  // Queues a datagram; `data` must stay valid until flush(). The batch must not be full().
  void add(std::span<const uint8_t> data, uint8_t tos);
  // Sends everything queued. Returns the datagrams the kernel refused (counted as errors).
  size_t flush(const UdpSocket& socket);

 private:
  Endpoint to_;
  size_t count_ = 0;
  std::array<mmsghdr, kIoBatch> msgs_{};
  std::array<iovec, kIoBatch> iov_{};
  std::array<std::array<uint8_t, 32>, kIoBatch> ctrl_{};
};

}  // namespace rdmad::fabric
