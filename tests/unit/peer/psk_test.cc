// The pre-shared key file and the PSK derived from it.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include "rdmad/daemon/peer/auth.h"
#include "rdmad/daemon/peer/psk.h"
#include "support/temp_dir.h"

namespace rdmad::peer {
namespace {

std::string hex(const Psk& p) {
  std::string out;
  for (uint8_t b : p) {
    static const char* d = "0123456789abcdef";
    out += d[b >> 4];
    out += d[b & 15];
  }
  return out;
}

TEST(PeerPsk, KnownAnswer) {
  // Computed independently with:
  // python3 -c "import hmac,hashlib;print(hmac.new(b'k'*16,b'rdmad peer channel tls13 psk v1',hashlib.sha256).hexdigest())"
  EXPECT_EQ(hex(derive_psk(std::string(16, 'k'))), "386080a44e19c1c0b4a5b981d13809705e149294cd99b4f651f9e451ec7fb41a");
  EXPECT_NE(derive_psk(std::string(16, 'k')), derive_psk(std::string(17, 'k')));
}

TEST(PeerPsk, KeyFileTrailingWhitespaceIgnoredAndShortKeysRefused) {
  rdmad::test::TempDir dir;
  const std::string p = dir.write("k", "0123456789abcdef \n");
  chmod(p.c_str(), 0600);
  std::string error;
  auto psk = load_psk_file(p, &error);
  ASSERT_TRUE(psk.has_value()) << error;
  EXPECT_EQ(*psk, derive_psk("0123456789abcdef"));
  const std::string s = dir.write("short", "too short\n");
  chmod(s.c_str(), 0600);
  EXPECT_FALSE(load_psk_file(s, &error).has_value());
  EXPECT_NE(error.find("need at least 16"), std::string::npos) << error;
}

TEST(PeerPsk, KeyFileReadableByOthersIsRefused) {
  rdmad::test::TempDir dir;
  const std::string p = dir.write("k", "0123456789abcdef0123456789abcdef");
  chmod(p.c_str(), 0644);
  std::string error;
  EXPECT_FALSE(load_psk_file(p, &error).has_value());
  EXPECT_NE(error.find("chmod 600"), std::string::npos) << error;
  EXPECT_FALSE(load_psk_file(dir.path(), &error).has_value());
  EXPECT_NE(error.find("is a directory"), std::string::npos) << error;
}

TEST(PeerPsk, RandomNoncesDiffer) { EXPECT_NE(random_nonce(), random_nonce()); }

}  // namespace
}  // namespace rdmad::peer
