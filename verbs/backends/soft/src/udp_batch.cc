#include "udp_batch.h"

#include <cstring>

namespace rdmad::verbs::soft {

UdpBatch::UdpBatch(bool v6) : v6_(v6), storage_(std::make_unique<uint8_t[]>(kBatchSize * kPacketBufBytes)) {
  std::memset(msgs_, 0, sizeof msgs_);
  std::memset(tos_, 0, sizeof tos_);
  for (size_t i = 0; i < kBatchSize; ++i) {
    iovs_[i].iov_base = buf(i);
    iovs_[i].iov_len = kPacketBufBytes;
  }
}

void UdpBatch::commit(size_t len, const sockaddr_storage& dst, socklen_t dst_len, uint8_t tos) {
  size_t i = count_++;
  addrs_[i] = dst;
  iovs_[i].iov_len = len;
  msghdr& h = msgs_[i].msg_hdr;
  h.msg_name = &addrs_[i];
  h.msg_namelen = dst_len;
  h.msg_iov = &iovs_[i];
  h.msg_iovlen = 1;
  h.msg_control = cmsgs_[i];
  h.msg_controllen = CMSG_SPACE(sizeof(int));
  h.msg_flags = 0;
  cmsghdr* c = CMSG_FIRSTHDR(&h);
  c->cmsg_level = v6_ ? IPPROTO_IPV6 : IPPROTO_IP;
  c->cmsg_type = v6_ ? IPV6_TCLASS : IP_TOS;
  c->cmsg_len = CMSG_LEN(sizeof(int));
  int value = tos;
  std::memcpy(CMSG_DATA(c), &value, sizeof value);
}

size_t UdpBatch::send(int fd) {
  size_t done = 0;
  while (done < count_) {
    int n = sendmmsg(fd, msgs_ + done, static_cast<unsigned>(count_ - done), 0);
    if (n <= 0) {
      if (n < 0 && errno == EINTR) continue;
      break;  // EAGAIN/ENOBUFS/unreachable: the packets are lost, reliability resends them
    }
    done += static_cast<size_t>(n);
  }
  size_t sent = done;
  count_ = 0;
  return sent;
}

size_t UdpBatch::receive(int fd) {
  for (size_t i = 0; i < kBatchSize; ++i) {
    iovs_[i].iov_len = kPacketBufBytes;
    msghdr& h = msgs_[i].msg_hdr;
    h.msg_name = &addrs_[i];
    h.msg_namelen = sizeof(sockaddr_storage);
    h.msg_iov = &iovs_[i];
    h.msg_iovlen = 1;
    h.msg_control = cmsgs_[i];
    h.msg_controllen = sizeof cmsgs_[i];
    h.msg_flags = 0;
  }
  int n = recvmmsg(fd, msgs_, kBatchSize, MSG_DONTWAIT, nullptr);
  if (n <= 0) return 0;
  for (int i = 0; i < n; ++i) {
    tos_[i] = 0;
    msghdr& h = msgs_[i].msg_hdr;
    for (cmsghdr* c = CMSG_FIRSTHDR(&h); c != nullptr; c = CMSG_NXTHDR(&h, c)) {
      bool v4_tos = c->cmsg_level == IPPROTO_IP && c->cmsg_type == IP_TOS;
      bool v6_tc = c->cmsg_level == IPPROTO_IPV6 && c->cmsg_type == IPV6_TCLASS;
      if (v4_tos) {
        tos_[i] = *CMSG_DATA(c);  // IP_TOS arrives as one byte
      } else if (v6_tc) {
        int v = 0;
        std::memcpy(&v, CMSG_DATA(c), sizeof v);
        tos_[i] = static_cast<uint8_t>(v);
      }
    }
  }
  return static_cast<size_t>(n);
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
