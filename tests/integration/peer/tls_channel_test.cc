// The peer channel over TLS 1.3 between two channel objects on loopback: mutual certificates
// (DNS and URI SANs), the pre-shared key, credentials a channel refuses to start with, and
// certificate rotation. The attacks (strangers, other nodes' certificates, replays, impostors)
// are in tests/security/peer.
#include <gtest/gtest.h>

#include <memory>

#include "peer_test_util.h"
#include "rdmad/daemon/peer/peer_channel.h"
#include "support/temp_dir.h"
#include "test_pki.h"

namespace rdmad::peer::test {
namespace {

namespace asio = boost::asio;
using std::chrono::milliseconds;

PeerConfig with_certs(const std::string& id, const CertFiles& f) { return config_with_certs(id, f.ca, f.cert, f.key); }

class TlsChannelTest : public ::testing::Test {
 protected:
  std::unique_ptr<PeerChannel> start(PeerConfig c) {
    auto ch = std::make_unique<PeerChannel>(io_, std::move(c));
    base::Status st = ch->start();
    EXPECT_TRUE(st.ok()) << st.message();
    return ch;
  }
  std::string start_error(PeerConfig c) {
    PeerChannel ch(io_, std::move(c));
    const base::Status st = ch.start();
    EXPECT_FALSE(st.ok());
    return st.message();
  }
  // a dials b; true when both see each other.
  bool pair_up(PeerConfig ca, PeerChannel& b) {
    ca.peers.push_back(address_of("node-b", b.listen_port()));
    a_ = start(std::move(ca));
    return run_until(io_, [&] { return a_->connected("node-b") && b.connected("node-a"); });
  }

  asio::io_context io_;
  rdmad::test::TempDir dir_;
  TestPki pki_;
  std::unique_ptr<PeerChannel> a_;
};

TEST_F(TlsChannelTest, MutualCertificatesConnectAndCarryFrames) {
  auto b = start(with_certs("node-b", pki_.write(dir_, "b", {"node-b"})));
  ASSERT_TRUE(pair_up(with_certs("node-a", pki_.write(dir_, "a", {"node-a", "a.example"})), *b));
  EXPECT_STREQ(b->security(), "certificates");
  std::vector<uint8_t> got;
  b->set_handlers({.on_up = {}, .on_down = {}, .on_message = [&](const std::string&, MessageType, std::span<const uint8_t> p) {
    got.assign(p.begin(), p.end());
  }});
  const std::vector<uint8_t> payload = encode(Revoke{.token = {1, 2, 3}});
  ASSERT_TRUE(a_->send("node-b", MessageType::kRevoke, payload));
  ASSERT_TRUE(run_until(io_, [&] { return !got.empty(); }));
  EXPECT_EQ(got, payload);
  EXPECT_EQ(a_->counters().auth_failures + b->counters().auth_failures, 0u);
}

TEST_F(TlsChannelTest, UriSanUnderThePrefixProvesTheNodeId) {
  const std::string prefix = "spiffe://cluster.test/rdmad/";
  PeerConfig cb = with_certs("node-b", pki_.write(dir_, "b", {prefix + "node-b"}));
  cb.tls_san_uri_prefix = prefix;
  auto b = start(cb);
  PeerConfig ca = with_certs("node-a", pki_.write(dir_, "a", {prefix + "node-a"}));
  ca.tls_san_uri_prefix = prefix;
  ASSERT_TRUE(pair_up(ca, *b));
  // Without the prefix a URI SAN proves nothing, so the channel will not present it.
  ca.tls_san_uri_prefix.clear();
  EXPECT_NE(start_error(ca).find("does not name this node's id node-a"), std::string::npos);
}

TEST_F(TlsChannelTest, PreSharedKeyConnects) {
  const std::string key = write_file(dir_, "peer.key", "a cluster key of thirty-two bytes\n", 0600);
  auto b = start(config("node-b", key));
  ASSERT_TRUE(pair_up(config("node-a", key), *b));
  EXPECT_STREQ(a_->security(), "psk");
}

TEST_F(TlsChannelTest, ChannelRefusesToStartWithoutUsableCredentials) {
  PeerConfig none = config("node-a");
  none.insecure = false;
  EXPECT_NE(start_error(none).find("no credentials"), std::string::npos);
  const CertFiles f = pki_.write(dir_, "a", {"node-a"});
  PeerConfig both = with_certs("node-a", f);
  both.key_file = write_file(dir_, "k", "0123456789abcdef0123", 0600);
  EXPECT_NE(start_error(both).find("choose one"), std::string::npos);
  PeerConfig partial = with_certs("node-a", f);
  partial.tls_key_file.clear();
  EXPECT_NE(start_error(partial).find("needs a CA file, a certificate file and a key file"), std::string::npos);
  EXPECT_NE(start_error(with_certs("node-z", f)).find("does not name this node's id node-z"), std::string::npos);
  EXPECT_NE(start_error(with_certs("node-a", pki_.write(dir_, "old", {"node-a"}, true))).find("has expired"),
            std::string::npos);
  TestPki other("another CA");
  PeerConfig mismatched = with_certs("node-a", f);
  mismatched.tls_key_file = other.write(dir_, "x", {"node-a"}).key;
  const std::string mismatch = start_error(mismatched);
  EXPECT_NE(mismatch.find("does not belong to certificate file"), std::string::npos) << mismatch;
  PeerConfig garbage = with_certs("node-a", f);
  garbage.tls_cert_file = write_file(dir_, "garbage.crt", "not a certificate\n", 0644);
  EXPECT_NE(start_error(garbage).find("not a PEM certificate chain"), std::string::npos);
  PeerConfig world = with_certs("node-a", f);
  world.tls_key_file = write_file(dir_, "world.key", "x", 0644);
  EXPECT_NE(start_error(world).find("chmod 600"), std::string::npos);
}

TEST_F(TlsChannelTest, RotatedCertificateIsReloadedForNewConnections) {
  PeerConfig cb = with_certs("node-b", pki_.write(dir_, "b", {"node-b"}));
  cb.credentials_check_interval = milliseconds(20);
  auto b = start(cb);
  ASSERT_TRUE(pair_up(with_certs("node-a", pki_.write(dir_, "a", {"node-a"})), *b));
  // A half-written rotation does not load: the old credentials stay.
  write_file(dir_, "b.crt", "-----BEGIN CERTIFICATE-----\ntruncated", 0644);
  run_for(io_, milliseconds(100));
  EXPECT_EQ(b->counters().credential_reloads, 0u);
  EXPECT_TRUE(b->connected("node-a")) << "a live session keeps its TLS state";
  // The complete rotation (same CA, new key) is taken, and the next connection uses it.
  pki_.write(dir_, "b", {"node-b"});
  ASSERT_TRUE(run_until(io_, [&] { return b->counters().credential_reloads == 1; }));
  b->disconnect("node-a", "test: reconnect with the new certificate");
  ASSERT_TRUE(run_until(io_, [&] { return a_->connected("node-b") && b->connected("node-a"); }));
  EXPECT_EQ(b->counters().handshakes_completed, 2u);
}

}  // namespace
}  // namespace rdmad::peer::test
