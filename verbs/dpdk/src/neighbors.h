#pragma once
// Where the dpdk backend's peers' MAC addresses come from: the `neighbors` option (fixed entries),
// ARP (IPv4) and neighbour discovery (IPv6, RFC 4861: solicitations and advertisements only, no
// router discovery or unreachability detection). One table per NIC, shared by its queues: entries
// are added on the setup path (a path opens towards a peer) under a lock and never removed, so a
// queue keeps its path's entry and reads the MAC with one atomic load per packet. Whichever queue
// receives an ARP or ND frame answers it and updates the table. No DPDK here: unit-tested alone.
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "frame.h"
#include "rdmad/verbs/status.h"

namespace rdmad::verbs::dpdk {

/// A request for an unresolved peer leaves at once; while it stays unanswered the next ones wait
/// kFirstRetryNs each for kQuickRetries requests, then twice as long each time up to kMaxRetryNs.
/// Packets towards the peer are dropped meanwhile and the engine resends them, so the quick ones
/// fit in a QP's first retries even with short timeouts.
inline constexpr int64_t kFirstRetryNs = 5'000'000;
inline constexpr uint32_t kQuickRetries = 4;
inline constexpr int64_t kMaxRetryNs = 1'000'000'000;
/// The largest ARP or ND frame this side sends (an IPv6 neighbour solicitation: 86 bytes).
inline constexpr size_t kMaxControlFrameBytes = 96;

class NeighborTable {
 public:
  static constexpr size_t kCapacity = 4096;

  struct Entry {
    roce::IpAddr ip;
    bool fixed = false;                      // from the neighbors option: ARP and ND never change it
    std::atomic<uint64_t> mac{0};            // kResolved | the MAC's 48 bits; 0 while unresolved
    std::atomic<int64_t> next_request_ns{0};  // when the next request may leave
    std::atomic<uint32_t> requests{0};       // requests sent while unresolved
  };
  static constexpr uint64_t kResolved = uint64_t{1} << 63;

  NeighborTable();

  /// The entry of `ip`, added unresolved when absent; nullptr when the table is full.
  Entry* add(const roce::IpAddr& ip);
  /// A fixed entry; an error when the table is full or `ip` is there already.
  Status add_static(const roce::IpAddr& ip, const MacAddr& mac);
  /// The entry of `ip` or nullptr; any thread, no lock.
  Entry* find(const roce::IpAddr& ip) const;
  /// Sets a learned MAC on the entry of `ip` where there is one and it is not fixed (the RFC 826
  /// merge: a stranger's ARP adds nothing to the table). True when the entry changed.
  bool learn(const roce::IpAddr& ip, const MacAddr& mac);
  size_t size() const { return count_.load(std::memory_order_acquire); }

  static uint64_t pack(const MacAddr& mac);
  static MacAddr unpack(uint64_t bits);
  /// The entry's MAC, nullopt while unresolved.
  static std::optional<MacAddr> mac_of(const Entry& e);

 private:
  std::unique_ptr<Entry[]> entries_;
  std::atomic<size_t> count_{0};  // entries [0, count_) are filled; published with release
  std::mutex add_mu_;
};

/// Parses the neighbors option: "ip=mac,ip=mac" (IPv4 or IPv6 addresses), empty for none. The
/// error names the entry that is not one.
Result<std::vector<std::pair<roce::IpAddr, MacAddr>>> parse_neighbors(const std::string& text);
/// "" when `text` is a valid neighbors option, else what was expected (the option table's check).
std::string check_neighbors(const std::string& text);

/// ARP and neighbour discovery for one NIC: answers requests for its address, learns peers' MACs
/// from what arrives, and writes requests for unresolved peers with back-off.
class NeighborResolver {
 public:
  NeighborResolver(const LinkAddress& local, NeighborTable& table) : local_(local), table_(table) {}

  /// Takes an ARP or ND frame (classify_frame said kArp or kNeighborDiscovery): learns the
  /// sender's or target's MAC where the table has an entry for it, and writes the reply to a
  /// request for our address into `reply` (at least kMaxControlFrameBytes). Returns the reply's
  /// size, 0 when there is none.
  size_t on_frame(std::span<const uint8_t> frame, std::span<uint8_t> reply);

  /// Writes an ARP request (IPv4) or neighbour solicitation (IPv6) for `e` into `out` when its
  /// back-off allows one at `now_ns` (one queue wins when several ask at once). Returns the
  /// frame's size, 0 when none is due.
  size_t request(NeighborTable::Entry& e, int64_t now_ns, std::span<uint8_t> out);
  /// The request request() wrote never left (the port refused it: a link still coming up): the
  /// next one may leave at once and does not count towards the back-off.
  static void request_lost(NeighborTable::Entry& e);

 private:
  size_t on_arp(std::span<const uint8_t> frame, std::span<uint8_t> reply);
  size_t on_nd(std::span<const uint8_t> frame, std::span<uint8_t> reply);

  LinkAddress local_;
  NeighborTable& table_;
};

/// The Ethernet multicast MAC of IPv6 group `group` (33:33 and its low 32 bits).
MacAddr ipv6_multicast_mac(const roce::IpAddr& group);
/// The solicited-node multicast address of `ip` (ff02::1:ffXX:XXXX).
roce::IpAddr solicited_node(const roce::IpAddr& ip);

}  // namespace rdmad::verbs::dpdk
