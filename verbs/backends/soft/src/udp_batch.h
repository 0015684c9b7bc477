#pragma once
// A fixed set of packet buffers with their mmsghdr/iovec/cmsg, allocated once, used for one
// sendmmsg or recvmmsg call at a time. Every data packet carries its own TOS byte in a cmsg
// (IP_TOS / IPV6_TCLASS) so data (ECT(0)) and CNPs (DSCP 48) share one socket; received packets
// report their TOS (IP_RECVTOS / IPV6_RECVTCLASS) so CE marks are seen per packet.
#include <netinet/in.h>
#include <sys/socket.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>

#include "rdmad/roce/ip_udp.h"

namespace rdmad::verbs::soft {

inline constexpr size_t kBatchSize = 64;
inline constexpr size_t kPacketBufBytes = 4096 + 128;

class UdpBatch {
 public:
  explicit UdpBatch(bool v6);

  // ---- send ----
  bool full() const { return count_ == kBatchSize; }
  size_t count() const { return count_; }
  /// Buffer of the next packet to fill (kPacketBufBytes).
  std::span<uint8_t> next_buffer() { return {buf(count_), kPacketBufBytes}; }
  /// Makes the filled buffer a packet of `len` bytes to `dst` with TOS/traffic class `tos`.
  void commit(size_t len, const sockaddr_storage& dst, socklen_t dst_len, uint8_t tos);
  /// Sends all committed packets; returns how many the kernel took (the rest are dropped: UDP).
  size_t send(int fd);

  // ---- receive ----
  /// Receives up to kBatchSize packets without blocking; returns the count.
  size_t receive(int fd);
  std::span<const uint8_t> packet(size_t i) const { return {buf(i), msgs_[i].msg_len}; }
  uint8_t tos(size_t i) const { return tos_[i]; }
  const sockaddr_storage& source(size_t i) const { return addrs_[i]; }

 private:
  uint8_t* buf(size_t i) const { return storage_.get() + i * kPacketBufBytes; }

  bool v6_;
  size_t count_ = 0;
  std::unique_ptr<uint8_t[]> storage_;
  mmsghdr msgs_[kBatchSize];
  iovec iovs_[kBatchSize];
  sockaddr_storage addrs_[kBatchSize];
  alignas(cmsghdr) uint8_t cmsgs_[kBatchSize][CMSG_SPACE(sizeof(int)) * 2];
  uint8_t tos_[kBatchSize];
};

/// Fills `out` from an IP address and port; returns the address length.
socklen_t make_sockaddr(const roce::IpAddr& ip, uint16_t port, sockaddr_storage* out);
/// Reads an address and port back from a sockaddr (IPv4-mapped IPv6 sources become IPv4).
void from_sockaddr(const sockaddr_storage& sa, roce::IpAddr* ip, uint16_t* port);

}  // namespace rdmad::verbs::soft
