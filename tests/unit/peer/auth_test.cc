// Challenge-response proofs and key files.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include "rdmad/peer/auth.h"
#include "support/temp_dir.h"

namespace rdmad::peer {
namespace {

const std::vector<uint8_t> kKey(32, 0x5A);

TEST(PeerAuth, ProofVerifiesOnlyForTheSameKeyNonceIdsAndDirection) {
  const Nonce n = random_nonce();
  const Proof p = compute_proof(kKey, n, "node-a", "node-b", Direction::kInitiator);
  EXPECT_TRUE(verify_proof(kKey, n, "node-a", "node-b", Direction::kInitiator, p));
  std::vector<uint8_t> other = kKey;
  other[31] ^= 1;
  EXPECT_FALSE(verify_proof(other, n, "node-a", "node-b", Direction::kInitiator, p)) << "wrong key";
  EXPECT_FALSE(verify_proof(kKey, random_nonce(), "node-a", "node-b", Direction::kInitiator, p)) << "replayed";
  EXPECT_FALSE(verify_proof(kKey, n, "node-a", "node-b", Direction::kAcceptor, p)) << "reflected";
  EXPECT_FALSE(verify_proof(kKey, n, "node-b", "node-a", Direction::kInitiator, p)) << "ids swapped";
  EXPECT_FALSE(verify_proof(kKey, n, "node-a", "node-bx", Direction::kInitiator, p));
  // Length prefixes keep ("ab","c") and ("a","bc") apart.
  EXPECT_NE(compute_proof(kKey, n, "ab", "c", Direction::kInitiator),
            compute_proof(kKey, n, "a", "bc", Direction::kInitiator));
  Proof bad = p;
  bad[0] ^= 0x80;
  EXPECT_FALSE(verify_proof(kKey, n, "node-a", "node-b", Direction::kInitiator, bad));
  EXPECT_FALSE(verify_proof(kKey, n, "node-a", "node-b", Direction::kInitiator, std::span(p).first(31)));
}

TEST(PeerAuth, KnownAnswer) {
  // HMAC-SHA256 with key "k"*16 over 32 zero bytes ‖ 1 'a' ‖ 1 'b' ‖ 'I', computed independently
  // with: python3 -c "import hmac,hashlib;print(hmac.new(b'k'*16,bytes(32)+b'\x01a\x01bI',hashlib.sha256).hexdigest())"
  const std::vector<uint8_t> key(16, 'k');
  const Proof p = compute_proof(key, Nonce{}, "a", "b", Direction::kInitiator);
  std::string hex;
  for (uint8_t b : p) {
    static const char* d = "0123456789abcdef";
    hex += d[b >> 4];
    hex += d[b & 15];
  }
  EXPECT_EQ(hex, "e64d56afb63bbe3dae7f6bacb94b4d0bc558629d470da260ee276ce3d1c49486");
}

TEST(PeerAuth, NoncesDiffer) { EXPECT_NE(random_nonce(), random_nonce()); }

TEST(PeerAuth, KeyFiles) {
  test::TempDir dir;
  std::string err, warn;
  const std::string good = dir.write("good.key", "0123456789abcdef0123\n");
  chmod(good.c_str(), 0600);
  auto k = load_key_file(good, &err, &warn);
  ASSERT_TRUE(k.has_value()) << err;
  EXPECT_EQ(k->size(), 20u) << "trailing newline dropped";
  EXPECT_TRUE(warn.empty());
  chmod(good.c_str(), 0644);
  ASSERT_TRUE(load_key_file(good, &err, &warn).has_value());
  EXPECT_NE(warn.find("chmod 600"), std::string::npos);
  const std::string shorty = dir.write("short.key", "tooshort\n");
  EXPECT_FALSE(load_key_file(shorty, &err, &warn).has_value());
  EXPECT_NE(err.find("need at least 16"), std::string::npos) << err;
  EXPECT_FALSE(load_key_file(dir.path() + "/missing.key", &err, &warn).has_value());
  EXPECT_NE(err.find("missing.key"), std::string::npos) << err;
}

}  // namespace
}  // namespace rdmad::peer
