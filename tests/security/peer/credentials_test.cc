// Attacks on the peer channel's authentication, in one process over loopback: a stranger without
// credentials, a node presenting another node's certificate, a certificate from another CA or an
// expired one, a captured handshake replayed, and an impostor claiming the id of a connected peer
// whose id sorts higher. Each is refused and counted, and the real peer stays connected.
//
// Against the code before TLS (protocol version 2) these fail: with no key_file (the old default)
// the stranger, the other node's id and the replay were all accepted as peers, and an impostor
// holding the cluster key (or any stranger without a key) replaced the real peer's session.
#include <gtest/gtest.h>

#include <memory>

#include "attacker.h"
#include "peer_test_util.h"
#include "rdmad/daemon/peer/peer_channel.h"
#include "support/temp_dir.h"
#include "tcp_relay.h"
#include "test_pki.h"

namespace rdmad::peer::test {
namespace {

namespace asio = boost::asio;
using std::chrono::milliseconds;

using Watch = Recorder;

class PeerCredentialAttacks : public ::testing::Test {
 protected:
  PeerConfig certs(const std::string& id, const CertFiles& f) { return config_with_certs(id, f.ca, f.cert, f.key); }
  std::unique_ptr<PeerChannel> start(PeerConfig c, Watch* w = nullptr) {
    auto ch = std::make_unique<PeerChannel>(io_, std::move(c));
    if (w != nullptr) w->attach(*ch);
    base::Status st = ch->start();
    EXPECT_TRUE(st.ok()) << st.message();
    return ch;
  }
  // node-a accepts; the real node-b (a certificate for node-b) dials it.
  void real_pair() {
    a_ = start(certs("node-a", pki_.write(dir_, "a", {"node-a"})), &wa_);
    PeerConfig cb = certs("node-b", pki_.write(dir_, "b", {"node-b"}));
    cb.peers.push_back(address_of("node-a", a_->listen_port()));
    b_ = start(cb, &wb_);
    ASSERT_TRUE(run_until(io_, [&] { return a_->connected("node-b") && b_->connected("node-a"); }));
  }
  std::shared_ptr<Attacker> attack(bool tls, Attacker::Identity id, const std::string& claim) {
    auto x = std::make_shared<Attacker>(io_, tls, std::move(id));
    x->run(a_->listen_port(), claim);
    EXPECT_TRUE(run_until(io_, [&] { return x->done(); }));
    return x;
  }
  // The real session is untouched: up once, never lost, on either side.
  void expect_real_pair_intact() {
    run_for(io_, milliseconds(100));
    EXPECT_TRUE(a_->connected("node-b"));
    EXPECT_TRUE(b_->connected("node-a"));
    EXPECT_EQ(wa_.downs + wb_.downs, 0);
    EXPECT_EQ(wa_.ups, 1);
    EXPECT_EQ(wb_.ups, 1);
  }

  asio::io_context io_;
  rdmad::test::TempDir dir_;
  TestPki pki_;
  std::unique_ptr<PeerChannel> a_, b_;
  Watch wa_, wb_;
};

TEST_F(PeerCredentialAttacks, StrangerWithoutCredentialsIsRefused) {
  real_pair();
  // TLS without a certificate, claiming the connected node-b (whose id sorts above node-a).
  auto x = attack(true, {}, "node-b");
  // (In TLS 1.3 the client's side of the handshake completes before the server checks its
  // certificate; the refusal comes right after, as an alert and a close.)
  EXPECT_FALSE(x->accepted()) << x->error();
  // Plain TCP speaking the protocol, as a version-3 peer would without TLS.
  auto y = attack(false, {}, "node-b");
  EXPECT_FALSE(y->accepted());
  EXPECT_EQ(a_->counters().auth_failures, 2u);
  expect_real_pair_intact();
}

TEST_F(PeerCredentialAttacks, CertificateOfAnotherNodeCannotClaimTheIdItDoesNotName) {
  real_pair();
  const CertFiles c = pki_.write(dir_, "c", {"node-c"});  // a real, valid certificate of node-c
  auto x = attack(true, {c.cert, c.key}, "node-b");
  EXPECT_TRUE(x->tls_ok()) << x->error();
  EXPECT_FALSE(x->accepted()) << "node-c's certificate was taken as node-b";
  EXPECT_EQ(a_->counters().auth_failures, 1u);
  expect_real_pair_intact();
  // Control: the same certificate claiming its own id is a peer (the refusal above is the binding).
  auto honest = attack(true, {c.cert, c.key}, "node-c");
  EXPECT_TRUE(honest->accepted()) << honest->error();
  // The attacker is done when its hello is answered; node-a counts the session as connected once
  // its own side of the handshake has run, which takes more turns of the loop.
  EXPECT_TRUE(run_until(io_, [&] { return a_->connected("node-c"); }));
}

TEST_F(PeerCredentialAttacks, CertificateFromAnotherCaOrExpiredIsRefused) {
  real_pair();
  TestPki rogue("rogue CA");
  const CertFiles r = rogue.write(dir_, "rogue", {"node-b"});
  EXPECT_FALSE(attack(true, {r.cert, r.key}, "node-b")->accepted());
  const CertFiles old = pki_.write(dir_, "old", {"node-x"}, /*expired=*/true);
  EXPECT_FALSE(attack(true, {old.cert, old.key}, "node-x")->accepted());
  EXPECT_EQ(a_->counters().auth_failures, 2u);
  EXPECT_FALSE(a_->connected("node-x"));
  expect_real_pair_intact();
}

TEST_F(PeerCredentialAttacks, DiallerRefusesANodeWhoseCertificateIsAnothers) {
  // node-c's daemon answers at the address configured for node-b (a stolen address, a bad DNS
  // entry): the dialler refuses it before it says anything, and never talks to it as node-b.
  auto c = start(certs("node-c", pki_.write(dir_, "c", {"node-c"})));
  PeerConfig ca = certs("node-a", pki_.write(dir_, "a", {"node-a"}));
  ca.peers.push_back(address_of("node-b", c->listen_port()));
  Watch wa;
  a_ = start(ca, &wa);
  ASSERT_TRUE(run_until(io_, [&] { return a_->counters().auth_failures >= 2; }));
  EXPECT_EQ(wa.ups, 0);
  EXPECT_EQ(c->counters().handshakes_completed, 0u);
}

TEST_F(PeerCredentialAttacks, ReplayedHandshakeIsRefused) {
  // node-b dials node-a through an on-path relay that records every byte node-b sends.
  a_ = start(certs("node-a", pki_.write(dir_, "a", {"node-a"})), &wa_);
  TcpRelay relay(a_->listen_port());
  PeerConfig cb = certs("node-b", pki_.write(dir_, "b", {"node-b"}));
  cb.peers.push_back(address_of("node-a", relay.port()));
  b_ = start(cb, &wb_);
  ASSERT_TRUE(run_until(io_, [&] { return a_->connected("node-b") && b_->connected("node-a"); }));
  run_for(io_, milliseconds(200));  // a few keepalives into the capture too
  const std::string captured = relay.connections().at(0).to_server;
  ASSERT_GT(captured.size(), 500u);
  // Replay it all on a fresh connection, straight to node-a.
  asio::ip::tcp::socket s(io_);
  s.connect({asio::ip::make_address("127.0.0.1"), a_->listen_port()});
  asio::write(s, asio::buffer(captured));
  ASSERT_TRUE(run_until(io_, [&] { return a_->counters().auth_failures == 1; }));
  std::array<uint8_t, 4096> buf{};
  boost::system::error_code ec;
  while (!ec) {
    run_for(io_, milliseconds(5));
    s.non_blocking(true);
    s.read_some(asio::buffer(buf), ec);
    if (ec == asio::error::would_block) ec = {};
  }
  EXPECT_EQ(a_->counters().handshakes_completed, 1u) << "the replay became a second session";
  expect_real_pair_intact();
}

TEST_F(PeerCredentialAttacks, ImpostorWithTheClusterKeyDoesNotDisplaceTheConnectedPeer) {
  // With a pre-shared key every holder can claim any id (docs/security.md): what the channel
  // still guarantees is that a second "node-b" does not replace the node-b that is connected.
  const std::string key = write_file(dir_, "peer.key", "the cluster key, thirty-two bytes", 0600);
  a_ = start(config("node-a", key), &wa_);
  PeerConfig cb = config("node-b", key);
  cb.peers.push_back(address_of("node-a", a_->listen_port()));
  b_ = start(cb, &wb_);
  ASSERT_TRUE(run_until(io_, [&] { return a_->connected("node-b") && b_->connected("node-a"); }));
  run_for(io_, milliseconds(100));  // past a cross-dial race: the session is settled
  PeerConfig ci = config("node-b", key);  // the impostor: node-b's id sorts above node-a's
  ci.handshake_timeout = milliseconds(200);
  ci.peers.push_back(address_of("node-a", a_->listen_port()));
  Watch wi;
  auto impostor = start(ci, &wi);
  ASSERT_TRUE(run_until(io_, [&] { return a_->counters().duplicate_connections >= 2; }));
  expect_real_pair_intact();
  // The impostor redials: each of its connections closes, though the last one's close may still
  // be on its way when a's refusal is counted.
  EXPECT_TRUE(run_until(io_, [&] { return wi.downs == wi.ups; })) << wi.ups << " up, " << wi.downs << " down";
}

}  // namespace
}  // namespace rdmad::peer::test
