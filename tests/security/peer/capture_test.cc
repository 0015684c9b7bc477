// An on-path observer of the peer channel between two real daemons: a TCP relay in the test
// carries node-a's connection to node-b and records every byte while node-b grants node-a memory
// and node-a writes into it. With TLS (certificates, or the pre-shared key) the capture holds
// neither the grant's token nor its length nor even the protocol's magic; the same run with
// insecure = true shows all three, so the search itself is known to work.
//
// Against the code before TLS this fails: key_file authenticated only the handshake, and grants
// (token, address, length, rkeys) crossed the wire in plaintext.
#include <gtest/gtest.h>

#include <algorithm>

#include "integration/flow/flow_cluster.h"
#include "tcp_relay.h"
#include "test_pki.h"

namespace rdmad::test {
namespace {

using peer::test::CertFiles;
using peer::test::contains_bytes;
using peer::test::TcpRelay;
using peer::test::TestPki;

constexpr size_t kExportBytes = 1234567;  // an odd length, to find in a capture

std::string cert_keys(const CertFiles& f) {
  return fmt::format("tls_ca_file = \"{}\"\ntls_cert_file = \"{}\"\ntls_key_file = \"{}\"\n", f.ca, f.cert, f.key);
}

struct Capture {
  std::string bytes;
  rdmad_token token{};
  std::string status_a;  // rdmactl --json status of node-a
};

// node-b grants node-a kExportBytes and node-a writes 64 KiB into it, node-a's peer connection
// running through the relay. `keys_a`/`keys_b`: their [peer] credentials ("" = the test PSK).
Capture run(const std::string& keys_a, const std::string& keys_b) {
  Capture out;
  NodeSpec sa = two_nic_node("node-a", 11);
  NodeSpec sb = two_nic_node("node-b", 21);
  sa.peer_keys = keys_a;
  sb.peer_keys = keys_b;
  Node b(std::move(sb), free_port(SOCK_STREAM));
  if (!b.start({})) return out;
  TcpRelay relay(static_cast<uint16_t>(b.peer_port()));
  Node a(std::move(sa), free_port(SOCK_STREAM));
  if (!a.start({{"node-b", relay.port()}})) return out;
  rdmad_flow* fa = nullptr;
  EXPECT_EQ(rdmad_flow_open(a.client(), "node-b", nullptr, &fa), RDMAD_OK);
  EXPECT_EQ(rdmad_flow_wait_connected(fa, 15000), RDMAD_OK) << a.output() << b.output();
  Buffer dst(b.client(), kExportBytes, kAllAccess);
  Buffer src(a.client(), 1 << 16, kAllAccess);
  fill(src.data(), 1 << 16, 7);
  EXPECT_EQ(rdmad_export(b.client(), dst.mr, 0, kExportBytes, "node-a", RDMAD_ACCESS_REMOTE_WRITE, &out.token),
            RDMAD_OK)
      << rdmad_last_error(b.client());
  rdmad_remote remote{};
  EXPECT_EQ(rdmad_flow_import(fa, &out.token, &remote), RDMAD_OK) << rdmad_last_error(a.client());
  EXPECT_EQ(rdmad_flow_write(fa, 1, src.mr, 0, &remote, 0, 1 << 16), RDMAD_OK);
  const auto c = wait_completion(fa, 30s);
  EXPECT_TRUE(c && c->status == RDMAD_OK) << "the write through the relayed session failed";
  EXPECT_EQ(first_difference(src.data(), dst.data(), 1 << 16), -1);
  rdmad_flow_close(fa);
  Subprocess ctl({binary("tools/rdmactl/rdmactl"), "--socket", a.socket_path(), "--json", "status"});
  ctl.wait_exit(10s);
  out.status_a = ctl.output();
  out.bytes = relay.everything();
  return out;
}

// What an observer would look for: the grant's token, its length as the wire encodes it
// (u64 big-endian), and the frame magic of a hello.
struct Found {
  bool token, length, magic;
};
Found search(const Capture& c) {
  uint8_t len[8];
  for (int i = 0; i < 8; ++i) len[i] = static_cast<uint8_t>(uint64_t{kExportBytes} >> (56 - 8 * i));
  return {contains_bytes(c.bytes, c.token.bytes, sizeof(c.token.bytes)), contains_bytes(c.bytes, len, sizeof(len)),
          c.bytes.find("RDMP") != std::string::npos};
}

TEST(PeerCapture, WithCertificatesNoGrantCrossesInClear) {
  TempDir creds;
  TestPki pki;
  const Capture c = run(cert_keys(pki.write(creds, "a", {"node-a"})), cert_keys(pki.write(creds, "b", {"node-b"})));
  ASSERT_GT(c.bytes.size(), 2000u) << "the relay saw no session";
  const Found f = search(c);
  EXPECT_FALSE(f.token) << "the grant's token is in the capture";
  EXPECT_FALSE(f.length) << "the grant's length is in the capture";
  EXPECT_FALSE(f.magic) << "a plaintext hello is in the capture";
  EXPECT_EQ(c.bytes.find("node-a"), std::string::npos) << "a node id (TLS 1.3 encrypts certificates)";
  EXPECT_NE(c.status_a.find("\"peer_channel\":\"certificates\",\"peer_channel_insecure\":false"), std::string::npos)
      << c.status_a;
}

TEST(PeerCapture, WithThePreSharedKeyNoGrantCrossesInClear) {
  const Capture c = run("", "");
  ASSERT_GT(c.bytes.size(), 1000u) << "the relay saw no session";
  const Found f = search(c);
  EXPECT_FALSE(f.token || f.length || f.magic) << "token " << f.token << " length " << f.length << " magic " << f.magic;
  EXPECT_NE(c.status_a.find("\"peer_channel\":\"psk\""), std::string::npos) << c.status_a;
}

TEST(PeerCapture, InsecureChannelShowsTheGrantSoTheSearchWorks) {
  const Capture c = run("insecure = true\n", "insecure = true\n");
  const Found f = search(c);
  EXPECT_TRUE(f.token && f.length && f.magic) << "token " << f.token << " length " << f.length << " magic " << f.magic;
  EXPECT_NE(c.status_a.find("\"peer_channel\":\"insecure\",\"peer_channel_insecure\":true"), std::string::npos)
      << c.status_a;
}

}  // namespace
}  // namespace rdmad::test
