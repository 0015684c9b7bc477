#pragma once
// Configuration of the peer control channel (TCP between daemons). A plain struct: the daemon
// fills it from its [peer] configuration section.
#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace rdmad::peer {

/// A daemon to dial.
struct PeerAddress {
  std::string node_id;  // the id it must present in its hello
  std::string host;     // IP literal
  uint16_t port = 0;
};

struct PeerConfig {
  std::string listen_host = "0.0.0.0";  // IP literal to accept peers on
  uint16_t listen_port = 18515;         // 0: an ephemeral port (tests)
  std::string node_id;                  // this daemon's id (1..64 bytes), unique in the cluster
  // Shared-secret file (at least 16 bytes; trailing newline ignored). Empty: no authentication,
  // and peers that demand it are refused.
  std::string key_file;
  std::chrono::milliseconds keepalive_interval{1000};  // a ping this often
  uint32_t keepalive_misses = 3;                       // no frame for interval × misses: the peer is dead
  std::chrono::milliseconds handshake_timeout{5000};
  std::chrono::milliseconds reconnect_min{100};    // first reconnect delay
  std::chrono::milliseconds reconnect_max{30000};  // the delay doubles up to this
  double reconnect_jitter = 0.5;                   // a delay is drawn from [d·(1−jitter), d]
  uint32_t max_frame_bytes = 64 * 1024;            // larger frames are a protocol error
  std::vector<PeerAddress> peers;                  // daemons this one dials (others may dial it)
};

/// Plain counters for the exporter (rdmad_peers_connected, rdmad_peer_auth_failures_total, ...).
struct PeerCounters {
  uint64_t peers_connected = 0;       // gauge: established connections now
  uint64_t connections_accepted = 0;  // TCP connections accepted
  uint64_t connections_dialed = 0;    // TCP connections opened to peers
  uint64_t handshakes_completed = 0;
  uint64_t auth_failures = 0;       // wrong key, or one side without a key
  uint64_t handshake_failures = 0;  // strangers: bad magic or version, wrong node id, timeouts
  uint64_t frame_errors = 0;        // malformed frames on an established connection
  uint64_t keepalive_timeouts = 0;  // peers declared dead
  uint64_t reconnects = 0;          // dials after a failure or a loss
  uint64_t duplicate_connections = 0;  // both sides dialled each other: one connection closed
};

}  // namespace rdmad::peer
