#pragma once
// Configuration of the fabric emulator: a set of ports, each listening on one UDP address and
// forwarding everything it receives to one destination through a rate-limited, RED/ECN-marking
// queue with optional seeded loss, reordering and duplication. Parsing throws (startup only).
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "rdmad/cc/red_marker.h"
#include "rdmad/tools/fabric/endpoint.h"

namespace rdmad::fabric {

struct PortConfig {
  std::string name;       // for stats; defaults to "port<N>"
  Endpoint listen;        // port 0 picks an ephemeral port (see Fabric::listen_endpoint)
  Endpoint forward;       // every datagram goes here, same address family as listen
  uint64_t rate_bps = 0;  // drain rate in bits/s of IP packets (datagram + IP/UDP headers); 0 = no limit
  uint64_t buffer_bytes = 1 << 20;    // tail drop above this many queued datagram bytes
  bool ecn = true;                    // RED/ECN marking on; non-ECT packets are never marked
  cc::RedParams red = cc::kRedPaper;  // Kmin/Kmax/Pmax, decided at dequeue
  double loss = 0;                    // probability a datagram is dropped at ingress
  double duplicate = 0;               // probability a datagram is enqueued twice
  double reorder = 0;                 // probability a datagram is held back and sent after the next one
  uint32_t reorder_hold_us = 1000;    // a held datagram leaves anyway after this long
  uint64_t seed = 1;                  // seeds the loss/duplicate/reorder/RED random streams
  // Every datagram whose BTH opcode (its first byte) is this one is dropped at ingress, counted as
  // loss: a path that carries all but one kind of packet (4: RC SEND Only). -1: none.
  int drop_opcode = -1;
  // The first this many datagrams of drop_opcode pass: a fault that starts after them (a lane's
  // path check is one zero-length WRITE and its ACK per queue pair).
  uint64_t drop_opcode_after = 0;
};

struct FabricConfig {
  std::vector<PortConfig> ports;
  uint32_t stats_interval_ms = 1000;  // 0 = no periodic stats line
  std::string stats_json;             // file rewritten with the stats each interval (empty = none)
};

// "1gbit", "250mbit", "10kbit", "1000bit", "1000000" (bits/s), "2.5gbit". Throws on bad input.
uint64_t parse_rate_bps(std::string_view text);
// "200KB" (1000), "64KiB" (1024), "1MB", "1MiB", "1500" (bytes). Throws on bad input.
uint64_t parse_bytes(std::string_view text);
// Parses a TOML document (see docs/fabric.md for the keys). Port i gets seed base + i unless it
// sets `seed`; `base_seed`, when given, replaces the document's top-level `seed`. Throws
// std::runtime_error with the offending key on any error.
FabricConfig parse_toml_config(std::string_view toml, std::optional<uint64_t> base_seed = std::nullopt);
// One port from "key=value,key=value" (the same keys as a TOML [[port]] table).
PortConfig parse_port_spec(std::string_view spec);
// Checks ranges and address families; throws std::invalid_argument naming the port and field.
void validate(const FabricConfig& config);

}  // namespace rdmad::fabric
