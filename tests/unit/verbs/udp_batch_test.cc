// The soft NIC's batched UDP I/O over real loopback sockets: packets leave and arrive byte-exact,
// in order, with their own TOS, whether runs are coalesced (UDP_SEGMENT + UDP_GRO), split by the
// receiving kernel (sender coalesces, receiver without UDP_GRO) or sent one by one, and with
// payloads sent from where they are (commit_gather) mixed with copied packets.
#include "udp_batch.h"

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <vector>

namespace rdmad::verbs::soft {
namespace {

struct Socket {
  int fd = -1;
  sockaddr_storage sa{};
  socklen_t len = 0;
  Socket() {
    fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    roce::IpAddr lo;
    lo.bytes[0] = 127;
    lo.bytes[3] = 1;
    len = make_sockaddr(lo, 0, &sa);
    EXPECT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&sa), len), 0);
    len = sizeof sa;
    getsockname(fd, reinterpret_cast<sockaddr*>(&sa), &len);
    int one = 1;
    setsockopt(fd, IPPROTO_IP, IP_RECVTOS, &one, sizeof one);
    int big = 8 << 20;
    setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &big, sizeof big);
  }
  ~Socket() { close(fd); }
};

struct Sent {
  std::vector<uint8_t> bytes;
  uint8_t tos;
  const Socket* to;
  const Socket* from;
};

uint16_t port_of(const sockaddr_storage& sa) {
  roce::IpAddr ip;
  uint16_t port = 0;
  from_sockaddr(sa, &ip, &port);
  return port;
}

// Packets shaped like a segmented WRITE: equal runs, a short tail, a change of TOS (a CNP) in the
// middle of a run, a second destination, a second source socket, and a run longer than one
// UDP_SEGMENT send.
std::vector<Sent> traffic(const Socket& a, const Socket& b, const Socket& s1, const Socket& s2) {
  std::vector<Sent> out;
  uint8_t fill = 1;
  const Socket* from = &s1;
  auto add = [&](size_t len, uint8_t tos, const Socket& to) {
    Sent s{std::vector<uint8_t>(len), tos, &to, from};
    for (auto& x : s.bytes) x = fill++;
    out.push_back(std::move(s));
  };
  for (int i = 0; i < 5; ++i) add(1052, 0x02, a);
  add(300, 0x02, a);
  add(1052, 0x02, a);
  add(20, 0xC0, a);  // CNP: DSCP 48
  add(1052, 0x02, a);
  add(1052, 0x02, b);
  from = &s2;
  add(1052, 0x02, a);
  add(1052, 0x02, a);
  from = &s1;
  add(1052, 0x02, a);
  for (int i = 0; i < 20; ++i) add(4124, 0x02, a);  // 82 KB: more than one send can carry
  add(4000, 0x02, a);
  return out;
}

struct Received {
  std::vector<uint8_t> bytes;
  uint8_t tos;
  uint16_t source_port;
};

std::vector<Received> receive_all(const Socket& s, UdpRxBatch& rx, size_t want, size_t* datagrams) {
  std::vector<Received> got;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (got.size() < want && std::chrono::steady_clock::now() < deadline) {
    pollfd p{s.fd, POLLIN, 0};
    poll(&p, 1, 100);
    size_t n = rx.receive(s.fd);
    EXPECT_EQ(rx.truncated(), 0u);
    *datagrams += rx.datagrams();
    for (size_t i = 0; i < n; ++i) {
      auto pkt = rx.packet(i);
      got.push_back({{pkt.begin(), pkt.end()}, rx.tos(i), port_of(rx.source(i))});
    }
  }
  return got;
}

// gather: packets of 1 KB and more are committed as head (12 bytes), payload left in place (the
// Sent's own bytes) and tail (4 bytes), as the soft NIC sends WRITE data; shorter ones are copied.
void run(bool send_offload, bool receive_gro, bool expect_coalesced, bool gather = false) {
  Socket sender, sender2, a, b;
  if (receive_gro) {
    ASSERT_TRUE(enable_udp_gro(a.fd));
    ASSERT_TRUE(enable_udp_gro(b.fd));
  }
  UdpTxBatch tx(false, send_offload);
  UdpRxBatch rx_a(receive_gro), rx_b(receive_gro);
  auto sent = traffic(a, b, sender, sender2);
  size_t packets = 0;
  for (const Sent& s : sent) {
    if (tx.full()) packets += tx.send();
    auto buf = tx.next_buffer();
    if (gather && s.bytes.size() >= 1000) {
      const size_t head = 12, tail = 4, payload = s.bytes.size() - head - tail;
      std::memcpy(buf.data(), s.bytes.data(), head);
      std::memcpy(buf.data() + head, s.bytes.data() + head + payload, tail);
      tx.commit_gather(s.from->fd, head, {s.bytes.data() + head, payload}, tail, s.to->sa, s.to->len, s.tos);
      continue;
    }
    std::memcpy(buf.data(), s.bytes.data(), s.bytes.size());
    tx.commit(s.from->fd, s.bytes.size(), s.to->sa, s.to->len, s.tos);
  }
  packets += tx.send();
  ASSERT_EQ(packets, sent.size());
  EXPECT_EQ(tx.offload(), send_offload) << "the kernel refused UDP_SEGMENT";

  size_t want_a = 0;
  for (const Sent& s : sent) want_a += s.to == &a ? 1 : 0;
  size_t datagrams = 0;
  auto got_a = receive_all(a, rx_a, want_a, &datagrams);
  size_t datagrams_b = 0;
  auto got_b = receive_all(b, rx_b, 1, &datagrams_b);
  ASSERT_EQ(got_a.size(), want_a);
  ASSERT_EQ(got_b.size(), 1u);
  size_t ia = 0;
  for (const Sent& s : sent) {
    const Received& r = s.to == &a ? got_a[ia++] : got_b[0];
    EXPECT_EQ(r.bytes, s.bytes) << "packet " << ia;
    EXPECT_EQ(r.tos, s.tos) << "packet " << ia;
    EXPECT_EQ(r.source_port, port_of(s.from->sa)) << "packet " << ia;
  }
  if (expect_coalesced) {
    EXPECT_LT(datagrams, want_a / 2) << "runs were not coalesced";
  } else {
    EXPECT_EQ(datagrams, want_a);
  }
}

TEST(UdpBatch, CoalescedRunsArriveByteExactInOrder) { run(true, true, true); }
TEST(UdpBatch, ReceiverWithoutGroGetsSinglePackets) { run(true, false, false); }
TEST(UdpBatch, OffloadOffSendsOneByOne) { run(false, true, false); }
TEST(UdpBatch, GatheredPayloadsArriveByteExactCoalesced) { run(true, true, true, true); }
TEST(UdpBatch, GatheredPayloadsArriveByteExactOneByOne) { run(false, true, false, true); }

}  // namespace
}  // namespace rdmad::verbs::soft
