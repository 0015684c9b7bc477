#pragma once
// One fabric port: a UDP socket bound to the listen address, a byte-limited FIFO, and a thread that
// receives, re-seals RoCEv2 ICRCs for the forwarded headers, drops/duplicates (seeded), drains at
// the port rate with RED/ECN marking at dequeue, reorders (seeded) and forwards with the packet's
// TOS (CE when marked) in a per-packet cmsg.
#include <sys/socket.h>

#include <atomic>
#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>

#include "packet_ring.h"
#include "rdmad/cc/red_marker.h"
#include "rdmad/tools/fabric/config.h"
#include "rdmad/tools/fabric/port_stats.h"
#include "reseal.h"
#include "udp_batch.h"

namespace rdmad::fabric {

class Port {
 public:
  explicit Port(const PortConfig& config);  // opens and binds the socket; throws on failure
  ~Port();
  Port(const Port&) = delete;
  Port& operator=(const Port&) = delete;

  void start();
  void stop();
  const Endpoint& listen_endpoint() const { return bound_; }
  PortStats stats() const;

 private:
  void run();
  void receive(int64_t now_ns);
  void admit(std::span<const uint8_t> data, uint8_t tos, int64_t now_ns);
  void transmit(int64_t now_ns);
  void send_front(uint8_t tos);
  void release_held();
  int64_t next_deadline_ns(int64_t now_ns) const;
  void publish(int64_t now_ns);
  int64_t wire_ns(size_t datagram_bytes) const;

  PortConfig config_;
  Endpoint bound_;
  UdpSocket socket_;
  PacketRing ring_;
  RecvBatch rx_;
  SendBatch tx_;
  Resealer resealer_;
  cc::RedMarker red_;
  cc::SplitMixUniform loss_rng_;
  cc::SplitMixUniform dup_rng_;
  cc::SplitMixUniform reorder_rng_;
  size_t ip_udp_overhead_bytes_;
  int64_t link_free_ns_ = 0;   // when the link finishes sending what it has already scheduled
  std::vector<uint8_t> held_;  // a datagram held back for reordering (kMaxDatagramBytes)
  size_t held_len_ = 0;
  uint8_t held_tos_ = 0;
  bool holding_ = false;
  uint64_t opcode_seen_ = 0;  // datagrams of drop_opcode so far (drop_opcode_after)
  int64_t held_deadline_ns_ = 0;

  PortStats local_;  // written by the port thread only
  int64_t last_publish_ns_ = 0;
  mutable std::mutex published_mu_;  // guards published_; taken once per millisecond, not per packet
  PortStats published_;

  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace rdmad::fabric
