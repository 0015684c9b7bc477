// The peer channel between two daemons' channel objects over loopback TCP: handshake, TLS with a
// pre-shared key, refusals (strangers, wrong keys, broken frames), keepalive, reconnect. Tests that
// speak the protocol through raw sockets run the channel insecure (plain TCP); the TLS-specific
// ones are in tls_channel_test.cc and tests/security/peer.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <memory>
#include <vector>

#include "peer_test_util.h"
#include "rdmad/daemon/peer/peer_channel.h"
#include "support/temp_dir.h"

namespace rdmad::peer::test {
namespace {

namespace asio = boost::asio;
using std::chrono::milliseconds;

class PeerChannelTest : public ::testing::Test {
 protected:
  std::string key(const std::string& name, const std::string& text) {
    const std::string p = dir_.write(name, text);
    chmod(p.c_str(), 0600);
    return p;
  }
  std::unique_ptr<PeerChannel> start(PeerConfig c, Recorder* r = nullptr) {
    auto ch = std::make_unique<PeerChannel>(io_, std::move(c));
    if (r != nullptr) r->attach(*ch);
    base::Status st = ch->start();
    EXPECT_TRUE(st.ok()) << st.message();
    return ch;
  }
  // node-a, dialling node-b.
  std::unique_ptr<PeerChannel> dial_b(PeerChannel& b) {
    PeerConfig ca = config("node-a");
    ca.peers.push_back(address_of("node-b", b.listen_port()));
    return start(ca);
  }
  // A hand-made peer on a raw socket that completes the unauthenticated handshake and then does
  // only what the test tells it to.
  asio::ip::tcp::socket raw_peer(PeerChannel& to, const std::string& id) {
    asio::ip::tcp::socket s(io_);
    s.connect({asio::ip::make_address("127.0.0.1"), to.listen_port()});
    Hello h;
    h.node_id = id;
    write_frame(s, MessageType::kHello, encode(h));
    write_frame(s, MessageType::kReady, {});
    return s;
  }

  asio::io_context io_;
  rdmad::test::TempDir dir_;
};

TEST_F(PeerChannelTest, DialsHandshakesAndCarriesFrames) {
  Recorder ra, rb;
  auto b = start(config("node-b"), &rb);
  PeerConfig ca = config("node-a");
  ca.peers.push_back(address_of("node-b", b->listen_port()));
  auto a = start(ca, &ra);
  ASSERT_TRUE(run_until(io_, [&] { return a->connected("node-b") && b->connected("node-a"); }));
  EXPECT_EQ(ra.ups, 1);
  EXPECT_EQ(rb.ups, 1);
  EXPECT_EQ(a->counters().peers_connected, 1u);
  EXPECT_EQ(b->counters().connections_accepted, 1u);
  EXPECT_EQ(a->counters().connections_dialed, 1u);
  const std::vector<uint8_t> payload = encode(Endpoints{.kind = EndpointsKind::kAck, .session = 77, .endpoints = {}});
  ASSERT_TRUE(a->send("node-b", MessageType::kEndpoints, payload));
  ASSERT_TRUE(run_until(io_, [&] { return !rb.messages.empty(); }));
  EXPECT_EQ(rb.messages[0], payload);
  EXPECT_FALSE(a->send("node-z", MessageType::kEndpoints, payload));
  // Keepalive keeps an idle connection up well past the dead-peer deadline.
  run_for(io_, milliseconds(1500));
  EXPECT_TRUE(a->connected("node-b"));
  EXPECT_EQ(a->counters().keepalive_timeouts + b->counters().keepalive_timeouts, 0u);
}

TEST_F(PeerChannelTest, AuthenticatesBothWaysWithTheSameKey) {
  const std::string k = key("a.key", "correct horse battery staple\n");
  auto b = start(config("node-b", k));
  PeerConfig ca = config("node-a", k);
  ca.peers.push_back(address_of("node-b", b->listen_port()));
  auto a = start(ca);
  ASSERT_TRUE(run_until(io_, [&] { return a->connected("node-b") && b->connected("node-a"); }));
  EXPECT_EQ(a->counters().auth_failures + b->counters().auth_failures, 0u);
}

TEST_F(PeerChannelTest, WrongKeyIsRefusedCountedAndRetried) {
  Recorder ra, rb;
  auto b = start(config("node-b", key("b.key", "the key of node b, 32 bytes long")), &rb);
  PeerConfig ca = config("node-a", key("a.key", "a different key entirely, really"));
  ca.peers.push_back(address_of("node-b", b->listen_port()));
  auto a = start(ca, &ra);
  ASSERT_TRUE(run_until(io_, [&] { return b->counters().auth_failures >= 2 && a->counters().reconnects >= 1; }));
  EXPECT_FALSE(a->connected("node-b"));
  EXPECT_FALSE(b->connected("node-a"));
  EXPECT_EQ(ra.ups + rb.ups, 0);
  EXPECT_EQ(b->counters().handshakes_completed, 0u);
}

TEST_F(PeerChannelTest, KeyOnOneSideOnlyIsRefused) {
  // b speaks TLS, a (insecure) plaintext: b's TLS refuses a's hello and closes; a keeps redialling.
  auto b = start(config("node-b", key("b.key", "0123456789abcdef0123456789abcdef")));
  PeerConfig ca = config("node-a");
  ca.peers.push_back(address_of("node-b", b->listen_port()));
  auto a = start(ca);
  ASSERT_TRUE(run_until(io_, [&] {
    return b->counters().auth_failures >= 2 && a->counters().reconnects >= 1;
  }));
  EXPECT_FALSE(b->connected("node-a"));
  EXPECT_FALSE(a->connected("node-b"));
}

TEST_F(PeerChannelTest, StrangersAreRefusedAndTheChannelKeepsServing) {
  auto b = start(config("node-b"));
  {
    asio::ip::tcp::socket s(io_);
    s.connect({asio::ip::make_address("127.0.0.1"), b->listen_port()});
    const std::string http = "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n";
    asio::write(s, asio::buffer(http));
    ASSERT_TRUE(run_until(io_, [&] { return b->counters().handshake_failures == 1; }));
  }
  {
    asio::ip::tcp::socket s(io_);
    s.connect({asio::ip::make_address("127.0.0.1"), b->listen_port()});
    Hello h;
    h.node_id = "node-x";
    h.version = kVersion + 1;
    write_frame(s, MessageType::kHello, encode(h));
    ASSERT_TRUE(run_until(io_, [&] { return b->counters().handshake_failures == 2; }));
  }
  {
    asio::ip::tcp::socket s(io_);  // connects and says nothing
    s.connect({asio::ip::make_address("127.0.0.1"), b->listen_port()});
    ASSERT_TRUE(run_until(io_, [&] { return b->counters().handshake_failures == 3; }, milliseconds(5000)));
  }
  PeerConfig ca = config("node-a");
  ca.peers.push_back(address_of("node-b", b->listen_port()));
  auto a = start(ca);
  ASSERT_TRUE(run_until(io_, [&] { return b->connected("node-a"); }));
  EXPECT_EQ(b->counters().peers_connected, 1u);
}

TEST_F(PeerChannelTest, DialledPeerWithAnotherIdIsRefused) {
  auto b = start(config("node-b"));
  PeerConfig ca = config("node-a");
  ca.peers.push_back(address_of("node-c", b->listen_port()));
  auto a = start(ca);
  ASSERT_TRUE(run_until(io_, [&] { return a->counters().handshake_failures >= 1; }));
  EXPECT_FALSE(a->connected("node-b"));
  EXPECT_FALSE(a->connected("node-c"));
}

TEST_F(PeerChannelTest, BrokenFrameClosesOnlyThatConnection) {
  Recorder rb;
  auto b = start(config("node-b"), &rb);
  auto a = dial_b(*b);
  auto s = raw_peer(*b, "node-x");
  ASSERT_TRUE(run_until(io_, [&] { return b->connected("node-a") && b->connected("node-x"); }));
  const std::vector<uint8_t> bad = {0, 0, 0, 4, 0, 77, 0, 0, 1, 2, 3, 4};  // unknown type 77
  asio::write(s, asio::buffer(bad));
  ASSERT_TRUE(run_until(io_, [&] { return !b->connected("node-x"); }));
  EXPECT_EQ(b->counters().frame_errors, 1u);
  EXPECT_TRUE(b->connected("node-a"));
  const std::vector<uint8_t> payload = encode(Endpoints{});
  ASSERT_TRUE(a->send("node-b", MessageType::kEndpoints, payload));
  ASSERT_TRUE(run_until(io_, [&] { return rb.messages.size() == 1; }));
  // An oversized frame is refused the same way.
  auto s2 = raw_peer(*b, "node-y");
  ASSERT_TRUE(run_until(io_, [&] { return b->connected("node-y"); }));
  const std::vector<uint8_t> huge = {0x7F, 0xFF, 0xFF, 0xFF, 0, 6, 0, 0};
  asio::write(s2, asio::buffer(huge));
  ASSERT_TRUE(run_until(io_, [&] { return !b->connected("node-y"); }));
  EXPECT_EQ(b->counters().frame_errors, 2u);
  EXPECT_TRUE(b->connected("node-a"));
}

TEST_F(PeerChannelTest, FlowFramesPassAndAMalformedOneClosesOnlyThatConnection) {
  Recorder rb;
  auto b = start(config("node-b"), &rb);
  auto a = dial_b(*b);
  auto s = raw_peer(*b, "node-x");
  ASSERT_TRUE(run_until(io_, [&] { return b->connected("node-a") && b->connected("node-x"); }));
  const std::vector<std::pair<MessageType, std::vector<uint8_t>>> good = {
      {MessageType::kGrant, encode(Grant{.length = 64, .rights = verbs::kAccessRemoteRead, .keys = {{0, 1}}})},
      {MessageType::kGrantAck, encode(GrantAck{.status = 0})},
      {MessageType::kRevoke, encode(Revoke{})},
      {MessageType::kRecvPost, encode(RecvPost{.length = 64, .keys = {{1, 2}}})},
      {MessageType::kSendDone, encode(SendDone{.bytes = 64})},
  };
  for (const auto& [type, payload] : good) ASSERT_TRUE(a->send("node-b", type, payload));
  ASSERT_TRUE(run_until(io_, [&] { return rb.messages.size() == good.size(); }));
  for (size_t i = 0; i < good.size(); ++i) {
    EXPECT_EQ(rb.types[i], good[i].first);
    EXPECT_EQ(rb.messages[i], good[i].second);
  }
  // A grant with no key from node-x: that connection is closed before the frame is delivered.
  write_frame(s, MessageType::kGrant, encode(Grant{.length = 64, .rights = verbs::kAccessRemoteRead, .keys = {}}));
  ASSERT_TRUE(run_until(io_, [&] { return !b->connected("node-x"); }));
  EXPECT_EQ(b->counters().frame_errors, 1u);
  EXPECT_EQ(rb.messages.size(), good.size());
  EXPECT_TRUE(b->connected("node-a"));
  ASSERT_TRUE(a->send("node-b", MessageType::kRevoke, encode(Revoke{})));
  ASSERT_TRUE(run_until(io_, [&] { return rb.messages.size() == good.size() + 1; }));
}

TEST_F(PeerChannelTest, FlowFrameBeforeTheHandshakeIsRefused) {
  Recorder rb;
  auto b = start(config("node-b"), &rb);
  asio::ip::tcp::socket s(io_);
  s.connect({asio::ip::make_address("127.0.0.1"), b->listen_port()});
  Hello h;
  h.node_id = "node-x";
  write_frame(s, MessageType::kHello, encode(h));
  write_frame(s, MessageType::kSendDone, encode(SendDone{}));  // before ready
  ASSERT_TRUE(run_until(io_, [&] { return b->counters().handshake_failures == 1; }));
  EXPECT_FALSE(b->connected("node-x"));
  EXPECT_TRUE(rb.messages.empty());
}

TEST_F(PeerChannelTest, SilentPeerIsDeclaredDeadByKeepalive) {
  Recorder rb;
  PeerConfig cb = config("node-b");
  cb.keepalive_misses = 3;
  auto b = start(cb, &rb);
  auto s = raw_peer(*b, "node-x");  // never answers a ping
  ASSERT_TRUE(run_until(io_, [&] { return b->connected("node-x"); }));
  const auto t0 = std::chrono::steady_clock::now();
  ASSERT_TRUE(run_until(io_, [&] { return !b->connected("node-x"); }, milliseconds(3000)));
  const auto waited = std::chrono::steady_clock::now() - t0;
  EXPECT_EQ(b->counters().keepalive_timeouts, 1u);
  EXPECT_EQ(rb.downs, 1);
  EXPECT_GE(waited, milliseconds(100)) << "declared dead before the deadline (3 × 50 ms)";
}

TEST_F(PeerChannelTest, ReconnectsWhenThePeerComesBack) {
  Recorder ra;
  auto b = start(config("node-b"));
  const uint16_t port = b->listen_port();
  PeerConfig ca = config("node-a");
  ca.peers.push_back(address_of("node-b", port));
  auto a = start(ca, &ra);
  ASSERT_TRUE(run_until(io_, [&] { return a->connected("node-b"); }));
  b.reset();  // the peer daemon dies
  ASSERT_TRUE(run_until(io_, [&] { return ra.downs == 1; }));
  ASSERT_TRUE(run_until(io_, [&] { return a->counters().reconnects >= 3; })) << "keeps redialling with back-off";
  EXPECT_FALSE(a->connected("node-b"));
  PeerConfig cb = config("node-b");
  cb.listen_port = port;
  b = start(cb);
  ASSERT_TRUE(run_until(io_, [&] { return a->connected("node-b") && b->connected("node-a"); }));
  EXPECT_EQ(ra.ups, 2);
}

// What rdmactl peers shows: each peer's address, state, direction, keepalive round trip, when it
// came up or went down and why its last connection closed.
TEST_F(PeerChannelTest, PeersReportStateAddressRttSinceAndLastError) {
  using State = PeerChannel::PeerStatus::State;
  auto b = start(config("node-b"));
  const uint16_t port = b->listen_port();
  PeerConfig ca = config("node-a");
  ca.peers.push_back(address_of("node-b", port));
  auto a = start(ca);
  // Configured peers are known from the start, before any connection.
  ASSERT_EQ(a->peers().size(), 1u);
  EXPECT_EQ(a->peers()[0].node_id, "node-b");
  EXPECT_EQ(a->peers()[0].address, "127.0.0.1:" + std::to_string(port));
  EXPECT_TRUE(a->peers()[0].dialled);
  EXPECT_NE(a->peers()[0].state, State::kConnected);
  const auto started = a->peers()[0].since;
  ASSERT_TRUE(run_until(io_, [&] { return a->connected("node-b") && b->connected("node-a"); }));
  const auto up = a->peers()[0];
  EXPECT_EQ(up.state, State::kConnected);
  EXPECT_GE(up.since, started);
  EXPECT_TRUE(up.last_error.empty()) << up.last_error;
  // The accepting side knows its peer by the connection's address; it does not dial it.
  ASSERT_EQ(b->peers().size(), 1u);
  EXPECT_EQ(b->peers()[0].node_id, "node-a");
  EXPECT_FALSE(b->peers()[0].dialled);
  EXPECT_EQ(b->peers()[0].address.rfind("127.0.0.1:", 0), 0u) << b->peers()[0].address;
  EXPECT_EQ(b->peers()[0].state, State::kConnected);
  // Keepalive pings (every 50 ms) measure the round trip.
  ASSERT_TRUE(run_until(io_, [&] { return a->peers()[0].rtt.count() > 0 && b->peers()[0].rtt.count() > 0; }));
  EXPECT_LT(a->peers()[0].rtt, std::chrono::seconds(1));

  b.reset();  // the peer daemon dies
  ASSERT_TRUE(run_until(io_, [&] { return a->peers()[0].state != State::kConnected; }));
  const auto down = a->peers()[0];
  EXPECT_FALSE(down.last_error.empty());
  EXPECT_GE(down.since, up.since);
  EXPECT_EQ(down.rtt.count(), 0) << "no connection, no round trip";
  // Redials that fail say why (connection refused: nothing listens on the port now).
  ASSERT_TRUE(run_until(io_, [&] { return a->counters().reconnects >= 1 && a->peers()[0].state == State::kDown; }));
  EXPECT_FALSE(a->peers()[0].last_error.empty());
  EXPECT_EQ(a->peers()[0].since, down.since) << "a failed redial is not a change between up and down";
}

TEST_F(PeerChannelTest, DaemonsDiallingEachOtherKeepOneConnection) {
  Recorder ra, rb;
  std::unique_ptr<PeerChannel> a, b;
  // Each side must know the other's port before it starts, so b's port is chosen first (a free
  // one, found by binding port 0). Another process can take it before b binds it: then try again.
  for (int attempt = 0; attempt < 5 && !b; ++attempt) {
    asio::ip::tcp::acceptor probe(io_, {asio::ip::make_address("127.0.0.1"), 0});
    const uint16_t port = probe.local_endpoint().port();
    probe.close();
    PeerConfig ca = config("node-a");
    ca.peers.push_back(address_of("node-b", port));
    a = start(ca, &ra);
    PeerConfig cb = config("node-b");
    cb.listen_port = port;
    cb.peers.push_back(address_of("node-a", a->listen_port()));
    auto candidate = std::make_unique<PeerChannel>(io_, std::move(cb));
    rb.attach(*candidate);
    if (candidate->start().ok()) b = std::move(candidate);
  }
  ASSERT_TRUE(b) << "no free port could be bound in 5 attempts";
  ASSERT_TRUE(run_until(io_, [&] { return a->connected("node-b") && b->connected("node-a"); }));
  run_for(io_, milliseconds(300));
  EXPECT_TRUE(a->connected("node-b"));
  EXPECT_TRUE(b->connected("node-a"));
  EXPECT_EQ(a->counters().peers_connected, 1u);
  EXPECT_EQ(b->counters().peers_connected, 1u);
}

TEST_F(PeerChannelTest, HandshakeLimitsCloseTheExtraConnectionsAtOnce) {
  PeerConfig cb = config("node-b");
  cb.max_handshakes = 3;
  cb.max_handshakes_per_source = 2;
  cb.handshake_timeout = milliseconds(10000);  // the silent ones stay until the test closes them
  auto b = start(cb);
  // A connection from `from` that never says anything.
  auto silent = [&](const char* from) {
    asio::ip::tcp::socket s(io_);
    s.open(asio::ip::tcp::v4());
    s.bind({asio::ip::make_address(from), 0});
    s.connect({asio::ip::make_address("127.0.0.1"), b->listen_port()});
    return s;
  };
  std::vector<asio::ip::tcp::socket> held;
  held.push_back(silent("127.0.0.1"));
  held.push_back(silent("127.0.0.1"));
  ASSERT_TRUE(run_until(io_, [&] { return b->handshaking() == 2; }));
  auto third = silent("127.0.0.1");  // over the per-source limit
  ASSERT_TRUE(run_until(io_, [&] { return b->counters().connections_refused == 1; }));
  held.push_back(silent("127.0.0.2"));
  ASSERT_TRUE(run_until(io_, [&] { return b->handshaking() == 3; }));
  auto fifth = silent("127.0.0.3");  // over the total
  ASSERT_TRUE(run_until(io_, [&] { return b->counters().connections_refused == 2; }));
  EXPECT_EQ(b->handshaking(), 3u);
  // The refused ones were reset at once, not left to the handshake deadline.
  std::array<uint8_t, 64> buf{};
  boost::system::error_code ec;
  third.read_some(asio::buffer(buf), ec);
  EXPECT_TRUE(ec) << "refused connection still open";
  held.clear();  // the slots come back when the strangers leave
  ASSERT_TRUE(run_until(io_, [&] { return b->handshaking() == 0; }));
  auto a = dial_b(*b);
  ASSERT_TRUE(run_until(io_, [&] { return b->connected("node-a"); }));
}

TEST_F(PeerChannelTest, PeerThatDoesNotReadIsDroppedAtTheSendQueueBound) {
  Recorder rb;
  PeerConfig cb = config("node-b");
  cb.send_queue_bytes = 256 * 1024;
  auto b = start(cb, &rb);
  auto s = raw_peer(*b, "node-x");  // never reads
  s.set_option(asio::socket_base::receive_buffer_size(4096));
  ASSERT_TRUE(run_until(io_, [&] { return b->connected("node-x"); }));
  const std::vector<uint8_t> big(60000, 0xEE);
  size_t sent = 0;
  while (sent < 2000 && b->send("node-x", MessageType::kEndpoints, big)) {
    ++sent;
    EXPECT_LE(b->queued_bytes("node-x"), cb.send_queue_bytes);
    io_.poll();  // let the kernel take what it will
  }
  EXPECT_LT(sent, 2000u) << "120 MB queued to a peer that reads nothing";
  EXPECT_EQ(b->counters().send_queue_overflows, 1u);
  EXPECT_FALSE(b->send("node-x", MessageType::kEndpoints, big)) << "sends after the overflow are refused";
  EXPECT_EQ(rb.downs, 0) << "the loss is reported from the io_context, not inside send()";
  ASSERT_TRUE(run_until(io_, [&] { return !b->connected("node-x"); }));
  EXPECT_EQ(rb.downs, 1);
  EXPECT_EQ(b->counters().send_queue_overflows, 1u);
}

}  // namespace
}  // namespace rdmad::peer::test
