#pragma once
// A hand-made peer for attacks on a peer channel: plain TCP or TLS 1.3 with any certificate (or
// none), then a hello claiming any node id, then whatever frames the test wants. Asynchronous on
// the test's io_context, so the channel under attack runs in the same thread (run_until).
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "rdmad/daemon/peer/wire.h"

namespace rdmad::peer::test {

class Attacker : public std::enable_shared_from_this<Attacker> {
 public:
  struct Identity {
    std::string cert_file;  // empty: present no certificate
    std::string key_file;
  };
  /// tls: speak TLS 1.3 (with `identity`'s certificate, if any); otherwise plain TCP.
  Attacker(boost::asio::io_context& io, bool tls, Identity identity = {});

  /// Connects to 127.0.0.1:port from `from`, handshakes and sends a hello claiming `claim`.
  void run(uint16_t port, const std::string& claim, const std::string& from = "127.0.0.1");
  /// Sends a frame (after run() got that far).
  void send(MessageType type, const std::vector<uint8_t>& payload);

  bool done() const { return done_; }        // refused, closed, or accepted (ready received)
  bool tls_ok() const { return tls_ok_; }    // the TLS handshake completed
  bool accepted() const { return ready_; }   // the channel answered our hello with ready
  const std::string& error() const { return error_; }

 private:
  void after_connect();
  void say_hello();
  void read_frame();
  template <typename Buffer, typename Handler>
  void read(const Buffer& b, Handler&& h);
  void finish(const std::string& why);

  boost::asio::ssl::context ctx_;
  boost::asio::ip::tcp::socket socket_;
  std::optional<boost::asio::ssl::stream<boost::asio::ip::tcp::socket&>> tls_;
  bool use_tls_;
  std::string claim_;
  std::array<uint8_t, kHeaderBytes> header_{};
  std::vector<uint8_t> body_;
  bool done_ = false;
  bool tls_ok_ = false;
  bool ready_ = false;
  std::string error_;
};

}  // namespace rdmad::peer::test
