#pragma once
// Configuration of the peer control channel (TCP between daemons, TLS 1.3 unless insecure). A
// plain struct: the daemon fills it from its [peer] configuration section.
#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace rdmad::peer {

/// A daemon to dial.
struct PeerAddress {
  std::string node_id;  // the id it must present in its hello (and, with certificates, as a SAN)
  std::string host;     // IP literal
  uint16_t port = 0;
};

struct PeerConfig {
  std::string listen_host;      // IP literal to accept peers on (no default: a wildcard must be chosen)
  uint16_t listen_port = 18515;  // 0: an ephemeral port (tests)
  std::string node_id;          // this daemon's id (1..64 bytes), unique in the cluster
  // Credentials, exactly one kind (start() refuses none, and two):
  //  - mutual TLS: a CA bundle, this node's certificate chain and its private key (PEM). A peer's
  //    hello id must be a DNS SAN of its certificate (or tls_san_uri_prefix + id as a URI SAN);
  //  - a pre-shared key (key_file, at least 16 bytes, trailing whitespace ignored) as a TLS 1.3
  //    external PSK whose identity is the dialler's node id;
  //  - insecure = true: plaintext and unauthenticated (trusted test networks only).
  std::string tls_ca_file;
  std::string tls_cert_file;
  std::string tls_key_file;
  std::string tls_san_uri_prefix;
  std::string key_file;
  bool insecure = false;
  // Credential files are checked for changes this often and reloaded (certificate rotation);
  // connections already up keep their session. 0: never.
  std::chrono::milliseconds credentials_check_interval{30000};
  std::chrono::milliseconds keepalive_interval{1000};  // a ping this often
  uint32_t keepalive_misses = 3;                       // no frame for interval × misses: the peer is dead
  std::chrono::milliseconds handshake_timeout{5000};   // TCP connect + TLS + hello
  // Accepted connections still in their handshake, in all and per source address: beyond either,
  // a new connection is closed at once (counted in connections_refused).
  uint32_t max_handshakes = 64;
  uint32_t max_handshakes_per_source = 8;
  // Bytes queued to one peer: above half, reading from it pauses until the queue is below a
  // quarter (back-pressure); a frame that would exceed it drops the connection.
  uint64_t send_queue_bytes = 4 << 20;
  std::chrono::milliseconds reconnect_min{100};    // first reconnect delay
  std::chrono::milliseconds reconnect_max{30000};  // the delay doubles up to this
  double reconnect_jitter = 0.5;                   // a delay is drawn from [d·(1−jitter), d]
  uint32_t max_frame_bytes = 64 * 1024;            // larger frames are a protocol error
  std::vector<PeerAddress> peers;                  // daemons this one dials (others may dial it)
  // Discovery through DNS (discovery.h): "dns:NAME" (A/AAAA records, port discover_port),
  // "dns-srv:NAME" (SRV records: host and port), "" none. Re-resolved every discover_interval,
  // and sooner (1 s doubling up to the interval) after a failure. A discovered address has no node
  // id until a connection to it authenticated one; sessions to discovered nodes are opened when a
  // flow needs them (PeerChannel::want) and closed after idle_session without a flow.
  std::string discover;
  uint16_t discover_port = 18515;
  std::chrono::milliseconds discover_interval{30000};
  std::chrono::milliseconds idle_session{300000};  // 0: never closed
};

/// Plain counters for the exporter (rdmad_peers_connected, rdmad_peer_auth_failures_total, ...).
struct PeerCounters {
  uint64_t peers_connected = 0;       // gauge: established connections now
  uint64_t connections_accepted = 0;  // TCP connections accepted
  uint64_t connections_dialed = 0;    // TCP connections opened to peers
  uint64_t handshakes_completed = 0;
  // TLS refused the peer (no or another credential, not TLS, a replay) or its credential does
  // not bind the node id it claims.
  uint64_t auth_failures = 0;
  uint64_t handshake_failures = 0;  // strangers: bad magic or version, wrong node id, timeouts
  uint64_t frame_errors = 0;        // malformed frames on an established connection
  uint64_t keepalive_timeouts = 0;  // peers declared dead
  uint64_t reconnects = 0;          // dials after a failure or a loss
  // A second connection for an established peer: both sides dialled each other (one is closed),
  // or one more claims an id that is already connected (the newcomer is refused).
  uint64_t duplicate_connections = 0;
  uint64_t connections_refused = 0;   // closed at accept: over max_handshakes(_per_source)
  uint64_t accept_errors = 0;         // accept failed (EMFILE, ENFILE, ...); accepting paused
  uint64_t send_queue_overflows = 0;  // connections dropped because the peer did not read
  uint64_t credential_reloads = 0;    // credential files changed and were loaded again
  // Discovery (gauges, then counters).
  uint64_t peers_discovered = 0;        // discovered addresses (this node's own left out)
  uint64_t peers_failed = 0;            // of those, whose last dial failed
  uint64_t discovery_resolutions = 0;   // resolutions that succeeded
  uint64_t discovery_errors = 0;        // resolutions that failed (the previous addresses are kept)
  double discovery_seconds = 0;         // how long the last resolution took
  uint64_t idle_closes = 0;             // sessions closed because neither side used them
};

}  // namespace rdmad::peer
