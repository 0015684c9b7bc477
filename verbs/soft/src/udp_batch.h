#pragma once
// Batched UDP I/O for one soft NIC, allocated once and used for one sendmmsg or recvmmsg call at a
// time. Every data packet carries its own TOS byte in a cmsg (IP_TOS / IPV6_TCLASS) so data (ECT(0))
// and CNPs (DSCP 48) share one socket; received packets report their TOS (IP_RECVTOS /
// IPV6_RECVTCLASS) so CE marks are seen per packet.
//
// UDP segmentation offload (`udp_offload`): consecutive packets to the same destination with the same
// TOS and size leave in one sendmmsg entry with a UDP_SEGMENT cmsg (up to 64 packets, 63 KiB), and the
// receive socket sets UDP_GRO, so on loopback and veth a run of packets crosses the kernel as one
// buffer in each direction instead of one per packet. Each segment is a complete RoCEv2 packet with
// its own BTH and ICRC; where the kernel does split them (a NIC without UDP segmentation offload, a
// receiver without UDP_GRO) the wire carries ordinary packets.
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
// One UDP_SEGMENT send carries at most this many packets and bytes (the kernel's limits are 64 or
// 128 segments and 64 KiB of UDP payload).
inline constexpr size_t kGsoMaxSegments = 64;
inline constexpr size_t kGsoMaxBytes = 63 * 1024;
// Payloads at least this long leave from where they are (UdpTxBatch::commit_gather); shorter ones
// are copied into the packet buffer, where one iovec costs the kernel less than three.
inline constexpr size_t kGatherMinPayloadBytes = 256;

/// Packets queued for one sendmmsg call.
class UdpTxBatch {
 public:
  UdpTxBatch(bool v6, bool offload);

  bool full() const { return count_ == kBatchSize; }
  size_t count() const { return count_; }
  bool offload() const { return offload_; }
  /// Buffer of the next packet to fill (kPacketBufBytes).
  std::span<uint8_t> next_buffer() { return {buf(count_), kPacketBufBytes}; }
  /// Makes the filled buffer a packet of `len` bytes to `dst` with TOS/traffic class `tos`, to leave
  /// through socket `fd`.
  void commit(int fd, size_t len, const sockaddr_storage& dst, socklen_t dst_len, uint8_t tos);
  /// The same for a packet whose payload stays in place: the buffer holds `head` bytes of headers
  /// then `tail` bytes (pad and ICRC), and the packet is head, `payload`, tail. The payload is read
  /// by send(), so it must stay valid and unchanged until then.
  void commit_gather(int fd, size_t head, std::span<const uint8_t> payload, size_t tail,
                     const sockaddr_storage& dst, socklen_t dst_len, uint8_t tos);
  /// Sends all committed packets; returns how many the kernel took (the rest are dropped: UDP).
  /// A kernel that refuses UDP_SEGMENT turns offload off for good and the packets go one by one.
  size_t send();

 private:
  uint8_t* buf(size_t i) const { return storage_.get() + i * kPacketBufBytes; }
  bool joins_previous(size_t i) const;
  void commit_common(int fd, size_t len, const sockaddr_storage& dst, socklen_t dst_len, uint8_t tos);
  /// Fills msgs_ from the committed packets; returns the message count.
  size_t build_messages(bool segment);

  bool v6_;
  bool offload_;
  size_t count_ = 0;
  std::unique_ptr<uint8_t[]> storage_;
  mmsghdr msgs_[kBatchSize];
  uint8_t msg_segments_[kBatchSize];  // packets in each message
  // A packet has one iovec (copied) or three (headers, payload in place, tail); a message's iovecs
  // are consecutive.
  static constexpr size_t kMaxIovsPerPacket = 3;
  iovec iovs_[kBatchSize * kMaxIovsPerPacket];
  size_t iovs_used_ = 0;
  uint16_t iov_first_[kBatchSize];  // per packet
  uint8_t iov_count_[kBatchSize];
  uint32_t lens_[kBatchSize];
  sockaddr_storage addrs_[kBatchSize];
  socklen_t addr_lens_[kBatchSize];
  int fds_[kBatchSize];  // per packet
  int msg_fds_[kBatchSize];
  uint8_t tos_[kBatchSize];
  alignas(cmsghdr) uint8_t cmsgs_[kBatchSize][CMSG_SPACE(sizeof(int)) + CMSG_SPACE(sizeof(uint16_t))];
};

/// Datagrams received by one recvmmsg call, split back into packets.
class UdpRxBatch {
 public:
  explicit UdpRxBatch(bool offload);

  /// Receives without blocking; returns the number of packets (segments), 0 when none waited.
  size_t receive(int fd);
  std::span<const uint8_t> packet(size_t i) const { return {segments_[i].data, segments_[i].len}; }
  uint8_t tos(size_t i) const { return tos_[segments_[i].datagram]; }
  const sockaddr_storage& source(size_t i) const { return addrs_[segments_[i].datagram]; }
  /// Datagrams the last receive took from the socket (coalesced runs count once).
  size_t datagrams() const { return datagrams_; }
  /// Datagrams of the last receive cut short by a too-small buffer (their packets are dropped).
  size_t truncated() const { return truncated_; }
  /// The socket's count of datagrams it dropped for a full receive buffer, as of the last datagram
  /// received (SO_RXQ_OVFL; 0 until the socket enables it).
  uint32_t socket_drops() const { return socket_drops_; }

 private:
  struct Segment {
    const uint8_t* data;
    uint32_t len;
    uint32_t datagram;
  };
  uint8_t* buf(size_t i) const { return storage_.get() + i * buf_bytes_; }

  size_t slots_;
  size_t buf_bytes_;
  size_t truncated_ = 0;
  size_t datagrams_ = 0;
  uint32_t socket_drops_ = 0;
  std::unique_ptr<uint8_t[]> storage_;
  std::unique_ptr<Segment[]> segments_;
  mmsghdr msgs_[kBatchSize];
  iovec iovs_[kBatchSize];
  sockaddr_storage addrs_[kBatchSize];
  alignas(cmsghdr) uint8_t cmsgs_[kBatchSize][CMSG_SPACE(sizeof(int)) * 3];
  uint8_t tos_[kBatchSize];
};

/// Makes the socket report its full-buffer drops with every datagram (SO_RXQ_OVFL).
bool enable_drop_count(int fd);

/// Turns UDP_GRO on for a socket; false when the kernel does not support it.
bool enable_udp_gro(int fd);

/// Fills `out` from an IP address and port; returns the address length.
socklen_t make_sockaddr(const roce::IpAddr& ip, uint16_t port, sockaddr_storage* out);
/// Reads an address and port back from a sockaddr (IPv4-mapped IPv6 sources become IPv4).
void from_sockaddr(const sockaddr_storage& sa, roce::IpAddr* ip, uint16_t* port);

}  // namespace rdmad::verbs::soft
