#pragma once
// What the RoCEv2 engine (verbs/engine) sends and receives through: a PacketPort is one NIC's
// packet path (UDP sockets for `soft`, an rte_ethdev port for `dpdk`), with one PortQueue per
// datapath thread. The engine owns everything RoCEv2 (QPs, PSNs, ACKs, DCQCN, ICRCs); a port moves
// datagrams — the bytes from the BTH to the ICRC — and says what IP and UDP headers they carried,
// which the ICRC covers.
//
// Threads: a PortQueue is used by exactly one datapath thread (its owner), from open_path to its
// destruction; PacketPort's own calls are const and any thread may make them.
#include <time.h>

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "rdmad/roce/ip_udp.h"
#include "rdmad/verbs/status.h"

namespace rdmad::verbs::engine {

/// What a port does for the engine. It moves no decision about RoCEv2 itself.
struct PortOffloads {
  /// Runs of same-size packets to one destination leave as one unit (UDP_SEGMENT).
  bool segmentation = false;
  /// Runs arrive as one unit and are split back by the queue (UDP_GRO).
  bool receive_coalescing = false;
  /// Received packets carry their IPv4 identification (raw frames); a socket hides it and the ICRC
  /// check then solves for it (roce::icrc_matches).
  bool ip_id_visible = false;
  /// A payload rides as its own piece of the frame, read where it lies when the batch is sent; false:
  /// the queue copies it at tx_commit.
  bool payload_in_place = true;
};

/// Per-queue receive facts a datapath counts (the rest of the drops are the engine's).
struct RxStats {
  uint64_t truncated = 0;  // datagrams cut short by the receive buffer: their packets are lost
  uint64_t not_roce = 0;   // frames the port took off the wire that were not RoCEv2 to us (dpdk)
};

/// One received RoCEv2 packet: its UDP payload (BTH to ICRC) and the IP/UDP fields it arrived with.
struct RxPacket {
  std::span<const uint8_t> data;
  roce::IpUdpInfo ip;
};

/// Where a QP sends: the peer's address and UDP port, and both QP numbers (the port derives the
/// packets' UDP source port from them, the ECMP entropy RoCEv2 puts there).
struct PathRequest {
  roce::IpAddr dst;
  uint16_t dst_port = 0;
  uint32_t qpn = 0;
  uint32_t dest_qpn = 0;
};

/// A room for one frame's headers and, right after them, its pad and ICRC (engine-encoded).
inline constexpr size_t kTxSlotBytes = 4096 + 128;

/// The paths a queue has open, by the handle open_path returns; the handles of closed paths are
/// reused. `P` is what the port sends a path's packets with (a socket address, a frame header).
template <class P>
class PathTable {
 public:
  /// A value-initialised path's handle.
  uint32_t open() {
    uint32_t id;
    if (!free_.empty()) {
      id = free_.back();
      free_.pop_back();
      slots_[id].path = P{};
    } else {
      id = static_cast<uint32_t>(slots_.size());
      slots_.emplace_back();
    }
    slots_[id].open = true;
    return id;
  }
  /// Closing a handle that is not open does nothing.
  void close(uint32_t id) {
    if (id >= slots_.size() || !slots_[id].open) return;
    slots_[id].open = false;
    free_.push_back(id);
  }
  P& operator[](uint32_t id) { return slots_[id].path; }
  const P& operator[](uint32_t id) const { return slots_[id].path; }

 private:
  struct Slot {
    P path{};
    bool open = false;
  };
  std::vector<Slot> slots_;
  std::vector<uint32_t> free_;
};

class PortQueue {
 public:
  virtual ~PortQueue() = default;

  /// Prepares sending towards a peer: fills `ip` with what the packets will carry (addresses,
  /// ports; the ICRC is computed over it) and returns the handle tx_commit takes. Errors: a peer of
  /// the other address family, no route or neighbour where the port resolves them.
  virtual Result<uint32_t> open_path(const PathRequest& request, roce::IpUdpInfo* ip) = 0;
  /// The handle is not used again (the QP left RTR/RTS or was destroyed).
  virtual void close_path(uint32_t path) = 0;

  /// The next frame's slot (kTxSlotBytes); tx_full() is false when it is called.
  virtual std::span<uint8_t> tx_slot() = 0;
  /// The slot becomes a packet on `path`: its first `head` bytes, then `payload`, then the `tail`
  /// bytes that follow `head` in the slot; IPv4 TOS / IPv6 traffic class `tos`. With
  /// payload_in_place the payload is read when the batch leaves (tx_flush), so it must stay valid
  /// and unchanged until then.
  virtual void tx_commit(uint32_t path, size_t head, std::span<const uint8_t> payload, size_t tail, uint8_t tos) = 0;
  /// Whether the batch is full (tx_flush before the next tx_slot).
  virtual bool tx_full() const = 0;
  /// Packets committed and not yet flushed.
  virtual size_t tx_pending() const = 0;
  /// Sends the batch; returns how many packets the port took. The rest are lost as on a wire (the
  /// engine's reliability resends them).
  virtual size_t tx_flush() = 0;

  /// Up to out.size() packets, without blocking; they stay valid until the next receive().
  virtual size_t receive(std::span<RxPacket> out, RxStats* stats) = 0;
  /// A descriptor that turns readable when packets wait (the datapath sleeps in ppoll on it beside
  /// its doorbell), or -1 when the queue can only be polled: the datapath then naps
  /// `poll_interval_ns()` at a time while idle.
  virtual int wait_fd() const = 0;
  virtual int64_t poll_interval_ns() const { return 0; }
  /// Called by the owner thread before it sleeps on wait_fd() (arm an interrupt), and after.
  virtual void before_sleep() {}
  virtual void after_sleep() {}

  /// The clock the owner's datapath runs on (ns, monotonic, any epoch): every QP timer, pacing
  /// departure and DCQCN event of its QPs is due on it, and the datapath reads it once per pass. It
  /// must tick at real-time rate: the datapath's sleeps are measured in it. Default CLOCK_MONOTONIC;
  /// a port whose hardware stamps packets may give that clock, and tests drive a manual one.
  virtual int64_t now_ns() const { return monotonic_ns(); }
  static int64_t monotonic_ns() {
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
  }
};

class PacketPort {
 public:
  virtual ~PacketPort() = default;
  /// "udp", "dpdk": for log lines and errors.
  virtual std::string describe() const = 0;
  /// The address RoCEv2 peers send to (the NIC's GID) and the UDP port they send to.
  virtual const roce::IpAddr& local_ip() const = 0;
  virtual uint16_t udp_port() const = 0;
  /// The largest RoCE path MTU (256..4096) whose frames the link carries.
  virtual uint32_t link_mtu() const = 0;
  virtual PortOffloads offloads() const = 0;
  /// Whether the link is up (a port that cannot tell says true).
  virtual bool link_up() const { return true; }
  /// Packets lost before a datapath read them because a receive queue was full, since the port
  /// opened (any thread; the NIC's RxDropReason::kQueueOverflow).
  virtual uint64_t rx_overflow_drops() const { return 0; }
  /// One queue per datapath thread. A packet for QP number q must be received by queue
  /// steer(q) (PortSteering): the port steers, or hands packets between its queues.
  virtual uint32_t queue_count() const = 0;
  virtual PortQueue& queue(uint32_t i) = 0;
};

/// How QP numbers map to queues: queue = (qpn & index_mask) % queues. The engine allocates QP
/// numbers so (QP table index = qpn & index_mask; the index's remainder picks the datapath) and a
/// port with several queues steers received packets by the same rule.
struct PortSteering {
  uint32_t index_mask = 0;
  uint32_t queues = 1;
  constexpr uint32_t queue_of(uint32_t qpn) const { return (qpn & index_mask) % queues; }
};

}  // namespace rdmad::verbs::engine
