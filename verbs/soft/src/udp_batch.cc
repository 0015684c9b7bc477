#include "udp_batch.h"

#include <netinet/udp.h>

#include <cerrno>
#include <cstring>

#include "rdmad/base/trace_points.h"

#ifndef UDP_SEGMENT
#define UDP_SEGMENT 103
#endif
#ifndef UDP_GRO
#define UDP_GRO 104
#endif

namespace rdmad::verbs::soft {
namespace {

// A UDP_GRO buffer holds whatever the kernel coalesced: at most 64 KiB of UDP payload.
constexpr size_t kGroBufBytes = 65536;
constexpr size_t kGroSlots = 16;
constexpr size_t kMaxSegmentsPerDatagram = 64;

void put_int_cmsg(cmsghdr* c, int level, int type, int value) {
  c->cmsg_level = level;
  c->cmsg_type = type;
  c->cmsg_len = CMSG_LEN(sizeof(int));
  std::memcpy(CMSG_DATA(c), &value, sizeof value);
}

}  // namespace

UdpTxBatch::UdpTxBatch(bool v6, bool offload)
    : v6_(v6), offload_(offload), storage_(std::make_unique<uint8_t[]>(kBatchSize * kPacketBufBytes)) {
  std::memset(msgs_, 0, sizeof msgs_);
  std::memset(tos_, 0, sizeof tos_);
}

void UdpTxBatch::commit(int fd, size_t len, const sockaddr_storage& dst, socklen_t dst_len, uint8_t tos) {
  iov_first_[count_] = static_cast<uint16_t>(iovs_used_);
  iov_count_[count_] = 1;
  iovs_[iovs_used_++] = {buf(count_), len};
  commit_common(fd, len, dst, dst_len, tos);
}

void UdpTxBatch::commit_gather(int fd, size_t head, std::span<const uint8_t> payload, size_t tail,
                               const sockaddr_storage& dst, socklen_t dst_len, uint8_t tos) {
  uint8_t* b = buf(count_);
  iov_first_[count_] = static_cast<uint16_t>(iovs_used_);
  iov_count_[count_] = 3;
  iovs_[iovs_used_++] = {b, head};
  // sendmsg only reads through the iovec; it is not const for recvmsg's sake.
  iovs_[iovs_used_++] = {const_cast<uint8_t*>(payload.data()), payload.size()};
  iovs_[iovs_used_++] = {b + head, tail};
  commit_common(fd, head + payload.size() + tail, dst, dst_len, tos);
}

void UdpTxBatch::commit_common(int fd, size_t len, const sockaddr_storage& dst, socklen_t dst_len,
                               uint8_t tos) {
  const size_t i = count_++;
  fds_[i] = fd;
  lens_[i] = static_cast<uint32_t>(len);
  std::memcpy(&addrs_[i], &dst, dst_len);
  addr_lens_[i] = dst_len;
  tos_[i] = tos;
}

// Packet i can ride in the message of packet i - 1: same socket, destination and TOS.
bool UdpTxBatch::joins_previous(size_t i) const {
  const size_t prev = i - 1;
  return fds_[i] == fds_[prev] && tos_[i] == tos_[prev] && addr_lens_[i] == addr_lens_[prev] &&
         std::memcmp(&addrs_[i], &addrs_[prev], addr_lens_[i]) == 0;
}

size_t UdpTxBatch::build_messages(bool segment) {
  size_t m = 0;
  size_t first = 0;
  while (first < count_) {
    size_t end = first + 1;
    size_t bytes = lens_[first];
    size_t iovs = iov_count_[first];
    if (segment) {
      // The kernel cuts the message back at the first packet's size: every packet before the last
      // has that size, and the last is no longer.
      const size_t seg = lens_[first];
      while (end < count_ && end - first < kGsoMaxSegments && bytes + lens_[end] <= kGsoMaxBytes &&
             lens_[end - 1] == seg && lens_[end] <= seg && joins_previous(end)) {
        bytes += lens_[end];
        iovs += iov_count_[end];
        ++end;
      }
    }
    msghdr& h = msgs_[m].msg_hdr;
    h.msg_name = &addrs_[first];
    h.msg_namelen = addr_lens_[first];
    h.msg_iov = &iovs_[iov_first_[first]];
    h.msg_iovlen = iovs;
    h.msg_control = cmsgs_[m];
    h.msg_flags = 0;
    cmsghdr* c = reinterpret_cast<cmsghdr*>(cmsgs_[m]);
    put_int_cmsg(c, v6_ ? IPPROTO_IPV6 : IPPROTO_IP, v6_ ? IPV6_TCLASS : IP_TOS, tos_[first]);
    h.msg_controllen = CMSG_SPACE(sizeof(int));
    if (end - first > 1) {
      c = reinterpret_cast<cmsghdr*>(cmsgs_[m] + CMSG_SPACE(sizeof(int)));
      c->cmsg_level = SOL_UDP;
      c->cmsg_type = UDP_SEGMENT;
      c->cmsg_len = CMSG_LEN(sizeof(uint16_t));
      const auto seg = static_cast<uint16_t>(lens_[first]);
      std::memcpy(CMSG_DATA(c), &seg, sizeof seg);
      h.msg_controllen += CMSG_SPACE(sizeof(uint16_t));
    }
    msg_segments_[m] = static_cast<uint8_t>(end - first);
    msg_fds_[m] = fds_[first];
    ++m;
    first = end;
  }
  return m;
}

size_t UdpTxBatch::send() {
  base::trace::mark(base::trace::Point::kPacketsSent, count_);
  size_t msgs = build_messages(offload_);
  size_t done = 0;
  size_t sent = 0;
  while (done < msgs) {
    // One sendmmsg per run of messages through the same socket.
    size_t run = done + 1;
    while (run < msgs && msg_fds_[run] == msg_fds_[done]) ++run;
    int n = sendmmsg(msg_fds_[done], msgs_ + done, static_cast<unsigned>(run - done), 0);
    if (n <= 0) {
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && offload_ && (errno == EINVAL || errno == EIO || errno == ENOPROTOOPT)) {
        // The kernel or the route cannot segment: from now on every packet goes by itself. Nothing
        // sent yet: send this batch again that way; otherwise this run is lost like any other.
        offload_ = false;
        if (sent == 0) {
          msgs = build_messages(false);
          done = 0;
          continue;
        }
      }
      // EAGAIN/ENOBUFS/unreachable: this run's packets are lost, reliability resends them.
      done = run;
      continue;
    }
    for (int k = 0; k < n; ++k) sent += msg_segments_[done + static_cast<size_t>(k)];
    done += static_cast<size_t>(n);
  }
  count_ = 0;
  iovs_used_ = 0;
  return sent;
}

UdpRxBatch::UdpRxBatch(bool offload)
    : slots_(offload ? kGroSlots : kBatchSize),
      buf_bytes_(offload ? kGroBufBytes : kPacketBufBytes),
      storage_(std::make_unique<uint8_t[]>(slots_ * buf_bytes_)),
      segments_(std::make_unique<Segment[]>(slots_ * kMaxSegmentsPerDatagram)) {
  std::memset(msgs_, 0, sizeof msgs_);
  std::memset(tos_, 0, sizeof tos_);
}

size_t UdpRxBatch::receive(int fd) {
  for (size_t i = 0; i < slots_; ++i) {
    iovs_[i] = {buf(i), buf_bytes_};
    msghdr& h = msgs_[i].msg_hdr;
    h.msg_name = &addrs_[i];
    h.msg_namelen = sizeof(sockaddr_storage);
    h.msg_iov = &iovs_[i];
    h.msg_iovlen = 1;
    h.msg_control = cmsgs_[i];
    h.msg_controllen = sizeof cmsgs_[i];
    h.msg_flags = 0;
  }
  truncated_ = 0;
  datagrams_ = 0;
  int n = recvmmsg(fd, msgs_, static_cast<unsigned>(slots_), MSG_DONTWAIT, nullptr);
  if (n <= 0) return 0;
  base::trace::mark(base::trace::Point::kPacketsReceived, n);
  datagrams_ = static_cast<size_t>(n);
  size_t segs = 0;
  for (size_t i = 0; i < static_cast<size_t>(n); ++i) {
    tos_[i] = 0;
    size_t gso_size = 0;
    msghdr& h = msgs_[i].msg_hdr;
    for (cmsghdr* c = CMSG_FIRSTHDR(&h); c != nullptr; c = CMSG_NXTHDR(&h, c)) {
      int v = 0;
      if (c->cmsg_level == IPPROTO_IP && c->cmsg_type == IP_TOS) {
        tos_[i] = *CMSG_DATA(c);  // IP_TOS arrives as one byte
      } else if (c->cmsg_level == IPPROTO_IPV6 && c->cmsg_type == IPV6_TCLASS) {
        std::memcpy(&v, CMSG_DATA(c), sizeof v);
        tos_[i] = static_cast<uint8_t>(v);
      } else if (c->cmsg_level == SOL_UDP && c->cmsg_type == UDP_GRO) {
        std::memcpy(&v, CMSG_DATA(c), sizeof v);
        gso_size = v > 0 ? static_cast<size_t>(v) : 0;
      } else if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SO_RXQ_OVFL) {
        std::memcpy(&socket_drops_, CMSG_DATA(c), sizeof socket_drops_);
      }
    }
    if ((h.msg_flags & MSG_TRUNC) != 0) {
      ++truncated_;
      continue;
    }
    const uint8_t* p = buf(i);
    size_t left = msgs_[i].msg_len;
    const size_t step = gso_size == 0 ? left : gso_size;
    for (size_t k = 0; left > 0 && k < kMaxSegmentsPerDatagram; ++k) {
      const size_t len = left < step ? left : step;
      segments_[segs++] = {p, static_cast<uint32_t>(len), static_cast<uint32_t>(i)};
      p += len;
      left -= len;
    }
    if (left > 0) ++truncated_;
  }
  return segs;
}

bool enable_drop_count(int fd) {
  int one = 1;
  return setsockopt(fd, SOL_SOCKET, SO_RXQ_OVFL, &one, sizeof one) == 0;
}

bool enable_udp_gro(int fd) {
  int one = 1;
  return setsockopt(fd, SOL_UDP, UDP_GRO, &one, sizeof one) == 0;
}

socklen_t make_sockaddr(const roce::IpAddr& ip, uint16_t port, sockaddr_storage* out) {
  std::memset(out, 0, sizeof *out);
  if (ip.v6) {
    auto* s6 = reinterpret_cast<sockaddr_in6*>(out);
    s6->sin6_family = AF_INET6;
    s6->sin6_port = htons(port);
    std::memcpy(&s6->sin6_addr, ip.bytes.data(), 16);
    return sizeof(sockaddr_in6);
  }
  auto* s4 = reinterpret_cast<sockaddr_in*>(out);
  s4->sin_family = AF_INET;
  s4->sin_port = htons(port);
  std::memcpy(&s4->sin_addr, ip.bytes.data(), 4);
  return sizeof(sockaddr_in);
}

void from_sockaddr(const sockaddr_storage& sa, roce::IpAddr* ip, uint16_t* port) {
  *ip = roce::IpAddr{};
  if (sa.ss_family == AF_INET6) {
    const auto* s6 = reinterpret_cast<const sockaddr_in6*>(&sa);
    *port = ntohs(s6->sin6_port);
    ip->v6 = true;
    std::memcpy(ip->bytes.data(), &s6->sin6_addr, 16);
  } else {
    const auto* s4 = reinterpret_cast<const sockaddr_in*>(&sa);
    *port = ntohs(s4->sin_port);
    std::memcpy(ip->bytes.data(), &s4->sin_addr, 4);
  }
}

}  // namespace rdmad::verbs::soft
