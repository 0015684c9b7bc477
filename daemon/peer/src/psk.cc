#include "rdmad/daemon/peer/psk.h"

#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include <cctype>
#include <cstring>
#include <stdexcept>

#include "rdmad/config/credential_file.h"
#include "rdmad/daemon/peer/auth.h"

namespace rdmad::peer {

namespace {
constexpr char kPskLabel[] = "rdmad peer channel tls13 psk v1";
}

std::optional<Psk> load_psk_file(const std::string& path, std::string* error) {
  auto key = config::read_credential_file(path, config::CredentialKind::kSecret, "key file", error);
  if (!key) return std::nullopt;
  while (!key->empty() && std::isspace(static_cast<unsigned char>(key->back()))) key->pop_back();
  if (key->size() < kMinKeyBytes) {
    *error = "key file " + path + ": holds " + std::to_string(key->size()) + " bytes, need at least " +
             std::to_string(kMinKeyBytes);
    return std::nullopt;
  }
  return derive_psk(*key);
}

Psk derive_psk(const std::string& key) {
  Psk out{};
  unsigned int len = 0;
  const auto* label = reinterpret_cast<const unsigned char*>(kPskLabel);
  // HMAC only fails when libcrypto itself is broken: a broken invariant.
  if (HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()), label, std::strlen(kPskLabel), out.data(), &len) ==
          nullptr ||
      len != out.size()) {
    throw std::runtime_error("HMAC-SHA256 failed");
  }
  return out;
}

Nonce random_nonce() {
  Nonce n{};
  // RAND_bytes only fails when the OS entropy source is broken: a broken invariant.
  if (RAND_bytes(n.data(), static_cast<int>(n.size())) != 1) throw std::runtime_error("RAND_bytes failed");
  return n;
}

}  // namespace rdmad::peer
