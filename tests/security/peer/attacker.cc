#include "attacker.h"

#include <openssl/ssl.h>

#include <boost/asio/connect.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/write.hpp>

namespace rdmad::peer::test {

namespace asio = boost::asio;

Attacker::Attacker(asio::io_context& io, bool tls, Identity identity)
    : ctx_(asio::ssl::context::tls_client), socket_(io), use_tls_(tls) {
  SSL_CTX_set_min_proto_version(ctx_.native_handle(), TLS1_3_VERSION);
  ctx_.set_verify_mode(asio::ssl::verify_none);  // an attacker does not care who answers
  if (!identity.cert_file.empty()) {
    ctx_.use_certificate_chain_file(identity.cert_file);
    ctx_.use_private_key_file(identity.key_file, asio::ssl::context::pem);
  }
}

void Attacker::run(uint16_t port, const std::string& claim, const std::string& from) {
  claim_ = claim;
  socket_.open(asio::ip::tcp::v4());
  socket_.bind({asio::ip::make_address(from), 0});
  socket_.async_connect({asio::ip::make_address("127.0.0.1"), port},
                        [self = shared_from_this()](const boost::system::error_code& ec) {
                          if (ec) return self->finish("connect: " + ec.message());
                          self->after_connect();
                        });
}

void Attacker::after_connect() {
  if (!use_tls_) return say_hello();
  tls_.emplace(socket_, ctx_);
  tls_->async_handshake(asio::ssl::stream_base::client, [self = shared_from_this()](const boost::system::error_code& ec) {
    if (ec) return self->finish("TLS: " + ec.message());
    self->tls_ok_ = true;
    self->say_hello();
  });
}

void Attacker::send(MessageType type, const std::vector<uint8_t>& payload) {
  auto frame = std::make_shared<std::vector<uint8_t>>(encode_frame(type, payload));
  auto done = [frame](const boost::system::error_code&, size_t) {};
  if (tls_) {
    asio::async_write(*tls_, asio::buffer(*frame), done);
  } else {
    asio::async_write(socket_, asio::buffer(*frame), done);
  }
}

void Attacker::say_hello() {
  Hello h;
  h.node_id = claim_;
  send(MessageType::kHello, encode(h));
  read_frame();
}

template <typename Buffer, typename Handler>
void Attacker::read(const Buffer& b, Handler&& h) {
  if (tls_) {
    asio::async_read(*tls_, b, std::forward<Handler>(h));
  } else {
    asio::async_read(socket_, b, std::forward<Handler>(h));
  }
}

void Attacker::read_frame() {
  read(asio::buffer(header_), [self = shared_from_this()](const boost::system::error_code& ec, size_t) {
    if (ec) return self->finish("closed: " + ec.message());
    const uint32_t len = uint32_t{self->header_[0]} << 24 | uint32_t{self->header_[1]} << 16 |
                         uint32_t{self->header_[2]} << 8 | self->header_[3];
    const uint16_t type = static_cast<uint16_t>(self->header_[4] << 8 | self->header_[5]);
    self->body_.resize(std::min<uint32_t>(len, 1 << 16));
    self->read(asio::buffer(self->body_), [self, type](const boost::system::error_code& e, size_t) {
      if (e) return self->finish("closed: " + e.message());
      if (type == static_cast<uint16_t>(MessageType::kReady)) {
        self->ready_ = true;
        self->send(MessageType::kReady, {});
        self->done_ = true;  // accepted; keep the connection open
        return;
      }
      self->read_frame();
    });
  });
}

void Attacker::finish(const std::string& why) {
  if (done_) return;
  done_ = true;
  error_ = why;
  boost::system::error_code ignored;
  socket_.close(ignored);
}

}  // namespace rdmad::peer::test
