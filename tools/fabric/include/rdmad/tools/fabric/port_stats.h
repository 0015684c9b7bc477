#pragma once
// Counters of one fabric port. A snapshot is a plain struct; the port thread is the only writer.
#include <cstdint>
#include <string>
#include <vector>

namespace rdmad::fabric {

struct PortStats {
  uint64_t rx_packets = 0;  // datagrams received on the listen socket
  uint64_t rx_bytes = 0;
  uint64_t tx_packets = 0;  // datagrams forwarded (duplicates included)
  uint64_t tx_bytes = 0;
  uint64_t drops_buffer = 0;      // tail drops: the queue was full
  uint64_t drops_loss = 0;        // injected loss
  uint64_t drops_oversize = 0;    // larger than the largest datagram a port carries
  uint64_t tx_errors = 0;         // sendmmsg failures
  uint64_t marked = 0;            // CE set by RED at dequeue
  uint64_t ce_received = 0;       // arrived already carrying CE
  uint64_t duplicated = 0;        // extra copies enqueued
  uint64_t reordered = 0;         // datagrams held back and sent after their successor
  uint64_t resealed = 0;          // RoCEv2 datagrams whose ICRC held and was recomputed for the
                                  // forwarded IP/UDP headers
  uint64_t not_resealed = 0;      // forwarded unchanged: not RoCEv2, or its ICRC did not hold
  uint64_t late_departures = 0;   // sent over 1 ms after their scheduled time: the port thread
                                  // lacked CPU, so the drain rate fell below the configured one
  uint64_t queue_bytes = 0;       // now
  uint64_t queue_packets = 0;     // now
  uint64_t queue_peak_bytes = 0;  // since start
  // Queue length seen by each departing datagram (including itself), against Kmin/Kmax.
  uint64_t departures_below_kmin = 0;
  uint64_t departures_between = 0;  // Kmin < q <= Kmax
  uint64_t departures_above_kmax = 0;
};

struct NamedPortStats {
  std::string name;
  PortStats stats;
};

// One line per port: "name q=12345B/9p peak=... rx=... tx=... drop=... mark=..."
std::string format_stats_line(const NamedPortStats& s);
// {"ports":[{"name":...,"rx_packets":...,...}, ...]}
std::string format_stats_json(const std::vector<NamedPortStats>& ports);

}  // namespace rdmad::fabric
