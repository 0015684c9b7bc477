#include "udp_port.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <linux/filter.h>
#include <net/if.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <optional>
#include <random>
#include <stdexcept>

#include "rdmad/verbs/types.h"

#ifndef SO_ATTACH_REUSEPORT_CBPF
#define SO_ATTACH_REUSEPORT_CBPF 51
#endif

namespace rdmad::verbs::soft {
namespace {

[[noreturn]] void fail(const std::string& what) {
  throw std::runtime_error("soft nic: " + what + ": " + std::strerror(errno));
}

roce::IpAddr to_ip_addr(const Gid& gid) {
  if (gid.is_ipv4_mapped()) {
    roce::IpAddr a;
    std::memcpy(a.bytes.data(), gid.raw.data() + 12, 4);
    return a;
  }
  return roce::IpAddr::from_v6(gid.raw);
}

roce::IpAddr nic_address(const std::string& address) {
  auto gid = Gid::from_ip(address);
  if (!gid) throw std::runtime_error("soft nic: bad address '" + address + "'");
  return to_ip_addr(*gid);
}

void set_buffer(int fd, int opt_force, int opt, uint32_t bytes) {
  int v = static_cast<int>(bytes);
  // The *FORCE variants pass rmem_max/wmem_max when we have CAP_NET_ADMIN; fall back otherwise.
  if (setsockopt(fd, SOL_SOCKET, opt_force, &v, sizeof v) != 0) setsockopt(fd, SOL_SOCKET, opt, &v, sizeof v);
}

// A UDP socket that sends ECT(0) by default, reads the TOS of what it receives, and (IPv4) sets DF.
int open_udp_socket(bool v6, uint32_t send_buffer_bytes, uint32_t receive_buffer_bytes) {
  int fd = socket(v6 ? AF_INET6 : AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) fail("socket");
  int one = 1;
  int tos = roce::kEcnEct0;
  if (v6) {
    setsockopt(fd, IPPROTO_IPV6, IPV6_RECVTCLASS, &one, sizeof one);
    setsockopt(fd, IPPROTO_IPV6, IPV6_TCLASS, &tos, sizeof tos);
  } else {
    setsockopt(fd, IPPROTO_IP, IP_RECVTOS, &one, sizeof one);
    setsockopt(fd, IPPROTO_IP, IP_TOS, &tos, sizeof tos);
    // DF set and IP id 0: what compute_icrc assumes for the headers the kernel builds.
    int pmtu = IP_PMTUDISC_DO;
    setsockopt(fd, IPPROTO_IP, IP_MTU_DISCOVER, &pmtu, sizeof pmtu);
  }
  set_buffer(fd, SO_SNDBUFFORCE, SO_SNDBUF, send_buffer_bytes);
  set_buffer(fd, SO_RCVBUFFORCE, SO_RCVBUF, receive_buffer_bytes);
  return fd;
}

constexpr uint32_t kSourcePortMin = 49152;
constexpr uint32_t kSourcePortCount = 65536 - kSourcePortMin;
constexpr int kBindAttempts = 32;

// Send-only sockets on random RoCEv2 source ports; a port in use is skipped, and fewer sockets than
// asked (a crowded port range) is not an error.
std::vector<SourceSocket> open_source_sockets(const roce::IpAddr& ip, uint32_t count, uint32_t send_buffer_bytes,
                                              uint32_t seed) {
  std::vector<SourceSocket> out;
  std::minstd_rand rng(seed);
  for (uint32_t i = 0; i < count; ++i) {
    // Nothing is addressed to these ports, so they keep a small receive buffer.
    int fd = open_udp_socket(ip.v6, send_buffer_bytes, 4096);
    bool bound = false;
    for (int attempt = 0; attempt < kBindAttempts && !bound; ++attempt) {
      const auto port = static_cast<uint16_t>(kSourcePortMin + rng() % kSourcePortCount);
      sockaddr_storage sa{};
      socklen_t len = make_sockaddr(ip, port, &sa);
      if (bind(fd, reinterpret_cast<sockaddr*>(&sa), len) == 0) {
        out.push_back({fd, port});
        bound = true;
      }
    }
    if (!bound) {
      close(fd);
      break;
    }
  }
  return out;
}

// The SO_REUSEPORT group's program: it runs on the UDP payload (the kernel has pulled the UDP header)
// and returns the index of the socket to deliver to, in bind order: (BTH destination QP & mask) %
// queues. The destination QP is bytes 5..7 of the BTH; the 32-bit load at offset 4 takes them with
// the reserved byte in front, which the mask drops. A datagram too short for the load is delivered
// to socket 0 (the filter returns 0), whose datapath drops it as truncated.
void attach_steering(int fd, const engine::PortSteering& steering) {
  sock_filter code[] = {
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, 4),
      BPF_STMT(BPF_ALU | BPF_AND | BPF_K, steering.index_mask),
      BPF_STMT(BPF_ALU | BPF_MOD | BPF_K, steering.queues),
      BPF_STMT(BPF_RET | BPF_A, 0),
  };
  sock_fprog prog{static_cast<unsigned short>(sizeof code / sizeof code[0]), code};
  if (setsockopt(fd, SOL_SOCKET, SO_ATTACH_REUSEPORT_CBPF, &prog, sizeof prog) != 0) {
    fail("SO_ATTACH_REUSEPORT_CBPF (datapath_threads > 1 needs the kernel to steer by QP)");
  }
}

}  // namespace

// The largest RoCE MTU whose packets fit the interface that holds `address`: IPv4/IPv6 + UDP +
// BTH + RETH + ICRC around the payload (a 1500-byte Ethernet link carries 1024, jumbo frames
// 4096). 4096 when the interface is not found. Packets are sent with DF set, so a larger path MTU
// would never arrive.
uint32_t roce_mtu_for(const std::string& address) {
  const auto gid = Gid::from_ip(address);
  uint32_t if_mtu = 0;
  ifaddrs* list = nullptr;
  if (gid && getifaddrs(&list) == 0) {
    for (ifaddrs* i = list; i != nullptr; i = i->ifa_next) {
      if (i->ifa_addr == nullptr) continue;
      std::optional<Gid> here;
      char buf[INET6_ADDRSTRLEN] = {};
      if (i->ifa_addr->sa_family == AF_INET)
        here = Gid::from_ip(inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(i->ifa_addr)->sin_addr, buf, sizeof buf));
      else if (i->ifa_addr->sa_family == AF_INET6)
        here = Gid::from_ip(inet_ntop(AF_INET6, &reinterpret_cast<sockaddr_in6*>(i->ifa_addr)->sin6_addr, buf, sizeof buf));
      if (!here || here->raw != gid->raw) continue;
      int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
      ifreq req{};
      std::snprintf(req.ifr_name, sizeof req.ifr_name, "%s", i->ifa_name);
      if (s >= 0 && ioctl(s, SIOCGIFMTU, &req) == 0) if_mtu = static_cast<uint32_t>(req.ifr_mtu);
      if (s >= 0) close(s);
      break;
    }
    freeifaddrs(list);
  }
  // Loopback addresses outside lo's own (127.0.0.2, ...) are not listed: they use lo's MTU.
  if (if_mtu == 0) return 4096;
  const uint32_t overhead = (address.find(':') != std::string::npos ? 40 : 20) + 8 + 12 + 16 + 4;
  for (uint32_t mtu = 4096; mtu > 256; mtu /= 2)
    if (mtu + overhead <= if_mtu) return mtu;
  return 256;
}


UdpQueue::UdpQueue(const roce::IpAddr& local_ip, uint16_t local_port, int fd, std::vector<SourceSocket> sources,
                   bool offload)
    : local_ip_(local_ip),
      local_port_(local_port),
      fd_(fd),
      main_source_{fd, local_port},
      sources_(std::move(sources)),
      // Receive as the kernel coalesced (UDP_GRO) only when sending coalesced too: a NIC with the
      // offload off behaves exactly like one on a kernel without it.
      tx_(local_ip.v6, offload && enable_udp_gro(fd)),
      rx_(tx_.offload()) {
  enable_drop_count(fd);
}

UdpQueue::~UdpQueue() {
  close(fd_);
  for (const SourceSocket& s : sources_) close(s.fd);
}

const SourceSocket& UdpQueue::source_for(uint32_t qpn, uint32_t dest_qpn) const {
  if (sources_.empty()) return main_source_;
  // Fixed per QP pair, like the flow label hardware derives the source port from; mixed well enough
  // that the consecutive QP numbers of one application land on different sockets.
  uint64_t v = (static_cast<uint64_t>(qpn) << 32 | dest_qpn) * 0x9E3779B97F4A7C15ull;
  v ^= v >> 29;
  return sources_[(v >> 32) % sources_.size()];
}

Result<uint32_t> UdpQueue::open_path(const engine::PathRequest& r, roce::IpUdpInfo* ip) {
  if (r.dst.v6 != local_ip_.v6) return Status::error("soft nic: peer address family differs from the nic's");
  const uint32_t id = paths_.open();
  Path& p = paths_[id];
  p.len = make_sockaddr(r.dst, r.dst_port, &p.sa);
  const SourceSocket& from = source_for(r.qpn, r.dest_qpn);
  p.fd = from.fd;
  ip->src = local_ip_;
  ip->dst = r.dst;
  ip->src_port = from.port;
  ip->dst_port = r.dst_port;
  return id;
}

void UdpQueue::close_path(uint32_t path) { paths_.close(path); }

void UdpQueue::tx_commit(uint32_t path, size_t head, std::span<const uint8_t> payload, size_t tail, uint8_t tos) {
  const Path& p = paths_[path];
  if (payload.empty() && tail == 0) {
    tx_.commit(p.fd, head, p.sa, p.len, tos);
  } else {
    tx_.commit_gather(p.fd, head, payload, tail, p.sa, p.len, tos);
  }
}

size_t UdpQueue::receive(std::span<engine::RxPacket> out, engine::RxStats* stats) {
  // One recvmmsg may hold more packets (coalesced runs) than `out`: the rest go out on later calls.
  if (rx_next_ == rx_count_) {
    rx_count_ = rx_.receive(fd_);
    rx_next_ = 0;
    stats->truncated += rx_.truncated();
    if (rx_.datagrams() > 0) overflow_.store(rx_.socket_drops(), std::memory_order_relaxed);
  }
  size_t n = 0;
  for (; n < out.size() && rx_next_ < rx_count_; ++n, ++rx_next_) {
    engine::RxPacket& p = out[n];
    p.data = rx_.packet(rx_next_);
    p.ip = roce::IpUdpInfo{};
    from_sockaddr(rx_.source(rx_next_), &p.ip.src, &p.ip.src_port);
    p.ip.dst = local_ip_;
    p.ip.dst_port = local_port_;
    p.ip.tos = rx_.tos(rx_next_);
    // The socket does not show the IPv4 id. Soft senders leave it 0; rxe and hardware NICs send
    // real ids, which their ICRC covers: the check takes the id that makes it match.
    p.ip.ip_id_known = false;
  }
  return n;
}

UdpPort::UdpPort(const UdpPortConfig& config, const engine::PortSteering& steering)
    : config_(config), local_ip_(nic_address(config.address)), link_mtu_(roce_mtu_for(config.address)) {
  const bool group = steering.queues > 1;
  uint16_t port = config.udp_port;
  std::vector<int> fds;
  auto close_all = [&fds] {
    for (int fd : fds) close(fd);
  };
  for (uint32_t q = 0; q < steering.queues; ++q) {
    int fd = open_udp_socket(local_ip_.v6, config.socket_buffer_bytes, config.socket_buffer_bytes);
    int one = 1;
    if (group && setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof one) != 0) {
      const int e = errno;
      close(fd);
      close_all();
      errno = e;
      fail("SO_REUSEPORT");
    }
    sockaddr_storage sa{};
    socklen_t len = make_sockaddr(local_ip_, port, &sa);
    if (bind(fd, reinterpret_cast<sockaddr*>(&sa), len) != 0) {
      const int e = errno;
      close(fd);
      close_all();
      errno = e;
      fail("bind " + config.address + ":" + std::to_string(port));
    }
    if (q == 0) {  // udp_port 0: the others join the port the first one got
      len = sizeof sa;
      getsockname(fd, reinterpret_cast<sockaddr*>(&sa), &len);
      roce::IpAddr bound;
      from_sockaddr(sa, &bound, &port);
    }
    fds.push_back(fd);
  }
  port_ = port;
  if (group) {
    try {
      attach_steering(fds[0], steering);
    } catch (...) {
      close_all();
      throw;
    }
  }
  const auto seed = static_cast<uint32_t>(std::chrono::steady_clock::now().time_since_epoch().count());
  for (uint32_t q = 0; q < steering.queues; ++q) {
    auto sources = open_source_sockets(local_ip_, config.source_ports, config.socket_buffer_bytes,
                                       seed ^ ((q + 1) * 2654435761u));
    queues_.push_back(std::make_unique<UdpQueue>(local_ip_, port_, fds[q], std::move(sources), config.udp_offload));
  }
}

UdpPort::~UdpPort() = default;

uint64_t UdpPort::rx_overflow_drops() const {
  uint64_t n = 0;
  for (const auto& q : queues_) n += q->overflow_drops();
  return n;
}

engine::PortOffloads UdpPort::offloads() const {
  engine::PortOffloads o;
  o.segmentation = !queues_.empty() && queues_[0]->offload();
  o.receive_coalescing = o.segmentation;
  o.ip_id_visible = false;
  o.payload_in_place = true;
  return o;
}

}  // namespace rdmad::verbs::soft
