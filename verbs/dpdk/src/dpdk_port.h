#pragma once
// The dpdk backend's packet path: one rte_ethdev port (a hot-plugged vdev such as net_memif or
// net_af_packet, or a PCI NIC) with one rx/tx queue pair per datapath thread. The port writes
// the Ethernet/IP/UDP headers around the engine's datagrams itself, answers ARP and neighbour
// solicitations for the NIC's address and resolves its peers (neighbors.h). RSS cannot steer by
// the BTH's destination QP, so a queue that receives a packet for another queue's QP hands it over
// through that queue's ring (several producers, one consumer).
#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "frame.h"
#include "neighbors.h"
#include "rdmad/verbs/dpdk/dpdk_backend.h"
#include "rdmad/verbs/engine/packet_port.h"

struct rte_mbuf;
struct rte_mempool;
struct rte_ring;

namespace rdmad::verbs::dpdk {

/// What a dpdk port is opened with (the backend's own options, dpdk_options.h).
struct DpdkPortConfig {
  std::string address;  // DeviceConfig::address: the NIC's IPv4 or IPv6 address
  std::string devargs;  // rte_dev_probe's argument
  std::string eal_args;
  uint16_t udp_port = 4791;
  uint32_t mbufs = 8191;
  uint32_t descriptors = 1024;
  std::string mac;        // empty: the port's own
  std::string neighbors;  // "ip=mac,..."
  std::string gateway;    // empty: peers are on the link
  uint32_t mtu = 0;       // 0: the port's
  uint32_t idle_poll_us = 50;
  uint32_t idle_poll_max_us = 1000;
  bool rx_interrupts = true;
  bool zero_copy_tx = true;
};

/// Data room of the port's mbufs after the headroom: the largest RoCEv2 frame (IPv6, 4096-byte
/// payload with RETH and ImmDt) fits one mbuf. net_af_packet needs framesz <= this + 32.
inline constexpr uint32_t kFrameRoom = 4352;

class DpdkQueue;

/// What a port's queues share.
struct PortShared {
  uint16_t port_id = 0;
  rte_mempool* pool = nullptr;
  LinkAddress local;
  engine::PortSteering steering;
  NeighborTable neighbors;
  std::unique_ptr<NeighborResolver> resolver;
  std::optional<roce::IpAddr> gateway;
  bool zero_copy_tx = false;
  bool rx_interrupts = false;
  // Set while another port of the process closes the other end of this port's memif link: the
  // queues leave the PMD alone (memif_quiesce in dpdk_port.cc).
  std::atomic<bool> paused{false};
  int64_t idle_poll_ns = 50'000;
  int64_t idle_poll_max_ns = 1'000'000;
  std::vector<DpdkQueue*> queues;
};

class DpdkQueue final : public engine::PortQueue {
 public:
  /// Queue `index` of the port; `intr_fd` is its rx interrupt's descriptor (-1: polled).
  DpdkQueue(PortShared& port, uint16_t index, rte_ring* ring, int intr_fd);
  ~DpdkQueue() override;

  Result<uint32_t> open_path(const engine::PathRequest& request, roce::IpUdpInfo* ip) override;
  void close_path(uint32_t path) override;
  std::span<uint8_t> tx_slot() override { return {slot_.get(), engine::kTxSlotBytes}; }
  void tx_commit(uint32_t path, size_t head, std::span<const uint8_t> payload, size_t tail, uint8_t tos) override;
  bool tx_full() const override { return tx_count_ == kTxBatch; }
  size_t tx_pending() const override { return tx_count_; }
  size_t tx_flush() override;
  size_t receive(std::span<engine::RxPacket> out, engine::RxStats* stats) override;
  int wait_fd() const override { return epoll_fd_; }
  int64_t poll_interval_ns() const override;
  void before_sleep() override;
  void after_sleep() override;

  /// Whether the owner thread is inside an rx/tx call of the PMD now.
  bool in_pmd() const { return in_pmd_.load(std::memory_order_seq_cst); }

  /// Another queue's receive hands over a packet for one of this queue's QPs (any thread).
  void hand_over(rte_mbuf* m);
  void add_counters(PortCounters& c) const;

  static constexpr size_t kTxBatch = 64;
  static constexpr size_t kRxMax = 64;  // the most packets one receive() hands out

 private:
  struct Path {
    NeighborTable::Entry* neighbor = nullptr;  // the peer's, or the gateway's
    uint64_t mac_bits = 0;                     // the MAC `header` holds
    PathHeader header;
  };
  // Plain counters of the owner thread that other threads read: relaxed atomics, no RMW.
  struct Counter {
    std::atomic<uint64_t> v{0};
    void add(uint64_t n = 1) { v.store(v.load(std::memory_order_relaxed) + n, std::memory_order_relaxed); }
    uint64_t get() const { return v.load(std::memory_order_relaxed); }
  };

  size_t accept(rte_mbuf* m, std::span<engine::RxPacket> out, size_t n, engine::RxStats* stats, bool handed);
  void on_control(std::span<const uint8_t> frame);
  void request_neighbor(NeighborTable::Entry& e);
  bool send_control(std::span<const uint8_t> frame);  // true when the PMD took it
  void resend_replies();
  rte_mbuf* build(Path& p, size_t head, std::span<const uint8_t> payload, size_t tail, uint8_t tos);
  void wake();
  // Brackets every call into the PMD's rx/tx path; false (and nothing to call) while paused.
  bool enter_pmd();
  void leave_pmd() { in_pmd_.store(false, std::memory_order_release); }

  PortShared& port_;
  const uint16_t index_;
  rte_ring* ring_;  // packets other queues hand over; null with one queue
  const int intr_fd_;
  int event_fd_ = -1;  // with interrupts: rung by hand_over while this queue sleeps
  int epoll_fd_ = -1;  // with interrupts: intr_fd_ and event_fd_
  std::atomic<bool> sleeping_{false};
  std::atomic<bool> in_pmd_{false};
  uint32_t idle_naps_ = 0;  // naps since a packet arrived (polled queues nap longer and longer)

  std::unique_ptr<uint8_t[]> slot_;
  rte_mbuf* tx_[kTxBatch] = {};
  size_t tx_count_ = 0;
  rte_mbuf* held_[kRxMax] = {};  // what the last receive() handed out, freed by the next
  size_t held_count_ = 0;
  rte_mbuf* stash_[kRxMax / 2] = {};  // taken off the NIC by before_sleep's last look
  size_t stash_count_ = 0;
  std::unique_ptr<uint8_t[]> linear_;  // kRxMax frames of kFrameRoom: multi-segment frames, copied
  engine::PathTable<Path> paths_;
  // ARP/ND replies the PMD refused (memif's first bursts after the link comes up), sent again on
  // the next passes: a peer whose request went unanswered would hold its packets back for its
  // whole back-off.
  struct PendingReply {
    std::array<uint8_t, kMaxControlFrameBytes> frame;
    size_t size = 0;
    uint32_t tries = 0;
  };
  static constexpr uint32_t kReplyTries = 1000;
  std::array<PendingReply, 8> replies_{};
  size_t reply_count_ = 0;

  Counter unresolved_drops_, tx_refused_, no_mbufs_, handoff_drops_, bad_ip_checksum_, neighbor_requests_,
      neighbor_replies_;
};

class DpdkPort final : public engine::PacketPort {
 public:
  /// Initialises the EAL (once per process), probes config.devargs and starts the port with
  /// steering.queues queue pairs. Errors name the option and the DPDK call.
  static Result<std::unique_ptr<DpdkPort>> open(const DpdkPortConfig& config, const engine::PortSteering& steering);
  ~DpdkPort() override;

  std::string describe() const override { return "dpdk " + name_; }
  const roce::IpAddr& local_ip() const override { return shared_->local.ip; }
  uint16_t udp_port() const override { return shared_->local.udp_port; }
  uint32_t link_mtu() const override { return link_mtu_; }
  engine::PortOffloads offloads() const override;
  bool link_up() const override;
  uint64_t rx_overflow_drops() const override;
  uint32_t queue_count() const override { return static_cast<uint32_t>(queues_.size()); }
  engine::PortQueue& queue(uint32_t i) override { return *queues_[i]; }

  PortCounters counters() const;
  const std::string& driver() const { return driver_; }

 private:
  DpdkPort() = default;
  void pause_for_close(bool pause);
  Status start(const DpdkPortConfig& config, const engine::PortSteering& steering);

  std::unique_ptr<PortShared> shared_ = std::make_unique<PortShared>();
  std::string name_;
  std::string driver_;
  std::string memif_socket_;  // net_memif: the socket= of its devargs, which both ends name
  bool registered_ = false;  // the port is in the process's set of used ports
  bool probed_ = false;      // we probed the device: we close and remove it
  bool started_ = false;
  uint32_t link_mtu_ = 1024;
  std::vector<rte_ring*> rings_;
  std::vector<std::unique_ptr<DpdkQueue>> queues_;
};

/// port_counters(dev) reads `port` from now until the port closes.
void remember_device(const Device& dev, const DpdkPort& port);

/// The largest RoCE path MTU (256..4096) whose packets fit an IP MTU of `ip_mtu` bytes.
uint32_t roce_mtu_for_ip_mtu(uint32_t ip_mtu, bool v6);

}  // namespace rdmad::verbs::dpdk
