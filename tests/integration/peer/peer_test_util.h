#pragma once
// Runs the control plane's io_context in the test thread until a condition holds or a deadline
// passes (no sleeps), and builds peer configurations with short timers for loopback tests.
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/write.hpp>

#include <chrono>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "rdmad/daemon/peer/peer_channel.h"
#include "rdmad/daemon/peer/peer_config.h"
#include "rdmad/daemon/peer/wire.h"

namespace rdmad::peer::test {

inline bool run_until(boost::asio::io_context& io, const std::function<bool()>& done,
                      std::chrono::milliseconds timeout = std::chrono::milliseconds(10000)) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!done()) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    io.restart();
    io.run_for(std::chrono::milliseconds(2));
  }
  return true;
}

/// Runs the io_context for a while (to show something does NOT happen).
inline void run_for(boost::asio::io_context& io, std::chrono::milliseconds d) {
  run_until(io, [] { return false; }, d);
}

/// Without a key file: insecure (plain TCP), for tests of the framing and state machine that talk
/// to the channel through raw sockets; with one: TLS 1.3 with that pre-shared key.
inline PeerConfig config(const std::string& node_id, const std::string& key_file = "") {
  PeerConfig c;
  c.listen_host = "127.0.0.1";
  c.listen_port = 0;
  c.node_id = node_id;
  c.key_file = key_file;
  c.insecure = key_file.empty();
  // Dead after 1 s of silence: loopback tests share busy CPUs with the soft NICs' threads.
  c.keepalive_interval = std::chrono::milliseconds(50);
  c.keepalive_misses = 20;
  c.handshake_timeout = std::chrono::milliseconds(1000);
  c.reconnect_min = std::chrono::milliseconds(20);
  c.reconnect_max = std::chrono::milliseconds(200);
  return c;
}

/// TLS 1.3 with mutual certificates (PEM files: the CA bundle, this node's chain, its key).
inline PeerConfig config_with_certs(const std::string& node_id, const std::string& ca, const std::string& cert,
                                    const std::string& key) {
  PeerConfig c = config(node_id);
  c.insecure = false;
  c.tls_ca_file = ca;
  c.tls_cert_file = cert;
  c.tls_key_file = key;
  return c;
}

/// Counts a channel's ups and downs and keeps the frames it delivers.
struct Recorder {
  int ups = 0;
  int downs = 0;
  std::vector<std::vector<uint8_t>> messages;
  std::vector<MessageType> types;
  void attach(PeerChannel& c) {
    c.set_handlers({.on_up = [this](const std::string&, bool) { ups++; },
                    .on_down = [this](const std::string&, const std::string&) { downs++; },
                    .on_message = [this](const std::string&, MessageType t, std::span<const uint8_t> p) {
                      messages.emplace_back(p.begin(), p.end());
                      types.push_back(t);
                    }});
  }
};

inline PeerAddress address_of(const std::string& node_id, uint16_t port) { return {node_id, "127.0.0.1", port}; }

/// Writes one frame on a raw socket (a hand-made peer).
inline void write_frame(boost::asio::ip::tcp::socket& s, MessageType type, std::span<const uint8_t> payload) {
  boost::asio::write(s, boost::asio::buffer(encode_frame(type, payload)));
}

}  // namespace rdmad::peer::test
