#pragma once
// The soft backend's packet path: RoCEv2 datagrams over the kernel's UDP sockets. One queue per
// datapath thread, each with a socket bound to the NIC's address and UDP port (4791) — with several
// queues the sockets form a SO_REUSEPORT group whose classic BPF program picks the socket by the
// BTH's destination QP, the engine's PortSteering rule, so every packet reaches the thread that owns
// its QP — and its own send-only sockets on RoCEv2 source ports (ECMP entropy).
#include <netinet/in.h>
#include <sys/socket.h>

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "rdmad/verbs/engine/packet_port.h"
#include "udp_batch.h"

namespace rdmad::verbs::soft {

/// What the UDP port is opened with (the soft backend's own options).
struct UdpPortConfig {
  std::string address = "127.0.0.1";
  uint16_t udp_port = 4791;
  uint32_t socket_buffer_bytes = 8u << 20;
  uint32_t source_ports = 8;
  bool udp_offload = true;
};

/// A send-only socket bound to one UDP source port.
struct SourceSocket {
  int fd = -1;
  uint16_t port = 0;
};

class UdpQueue final : public engine::PortQueue {
 public:
  UdpQueue(const roce::IpAddr& local_ip, uint16_t local_port, int fd, std::vector<SourceSocket> sources,
           bool offload);
  ~UdpQueue() override;

  Result<uint32_t> open_path(const engine::PathRequest& request, roce::IpUdpInfo* ip) override;
  void close_path(uint32_t path) override;
  std::span<uint8_t> tx_slot() override { return tx_.next_buffer(); }
  void tx_commit(uint32_t path, size_t head, std::span<const uint8_t> payload, size_t tail, uint8_t tos) override;
  bool tx_full() const override { return tx_.full(); }
  size_t tx_pending() const override { return tx_.count(); }
  size_t tx_flush() override { return tx_.send(); }
  size_t receive(std::span<engine::RxPacket> out, engine::RxStats* stats) override;
  int wait_fd() const override { return fd_; }

  /// The socket a QP pair sends from: one of the sources by a hash of both QP numbers, else the
  /// main socket.
  const SourceSocket& source_for(uint32_t qpn, uint32_t dest_qpn) const;
  bool offload() const { return tx_.offload(); }
  /// Datagrams the socket dropped for a full receive buffer (any thread), as of the last receive.
  uint64_t overflow_drops() const { return overflow_.load(std::memory_order_relaxed); }

 private:
  struct Path {
    sockaddr_storage sa{};
    socklen_t len = 0;
    int fd = -1;
  };
  roce::IpAddr local_ip_;
  uint16_t local_port_;
  int fd_;
  SourceSocket main_source_;
  std::vector<SourceSocket> sources_;
  UdpTxBatch tx_;
  UdpRxBatch rx_;
  std::atomic<uint64_t> overflow_{0};
  size_t rx_next_ = 0;  // packets of the last recvmmsg not yet handed out
  size_t rx_count_ = 0;
  engine::PathTable<Path> paths_;
};

class UdpPort final : public engine::PacketPort {
 public:
  /// Binds one socket per queue (a SO_REUSEPORT group steered by `steering` when there are several)
  /// and the source sockets; throws std::runtime_error naming what failed.
  UdpPort(const UdpPortConfig& config, const engine::PortSteering& steering);
  ~UdpPort() override;

  std::string describe() const override { return "udp " + config_.address + ":" + std::to_string(port_); }
  const roce::IpAddr& local_ip() const override { return local_ip_; }
  uint16_t udp_port() const override { return port_; }
  uint32_t link_mtu() const override { return link_mtu_; }
  engine::PortOffloads offloads() const override;
  uint64_t rx_overflow_drops() const override;
  uint32_t queue_count() const override { return static_cast<uint32_t>(queues_.size()); }
  engine::PortQueue& queue(uint32_t i) override { return *queues_[i]; }

 private:
  UdpPortConfig config_;
  roce::IpAddr local_ip_;
  uint16_t port_ = 0;
  uint32_t link_mtu_ = 4096;
  std::vector<std::unique_ptr<UdpQueue>> queues_;
};

/// The largest RoCE path MTU whose packets fit the interface that holds `address` (4096 when the
/// interface is not found).
uint32_t roce_mtu_for(const std::string& address);

}  // namespace rdmad::verbs::soft
