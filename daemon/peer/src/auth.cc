#include "rdmad/peer/auth.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>
#include <sys/stat.h>

#include <cctype>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <iterator>
#include <stdexcept>

namespace rdmad::peer {

std::optional<std::vector<uint8_t>> load_key_file(const std::string& path, std::string* error,
                                                  std::string* warning) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    *error = "key file " + path + ": " + std::strerror(errno);
    return std::nullopt;
  }
  std::vector<uint8_t> key((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  while (!key.empty() && std::isspace(key.back())) key.pop_back();
  if (key.size() < kMinKeyBytes) {
    *error = "key file " + path + ": holds " + std::to_string(key.size()) + " bytes, need at least " +
             std::to_string(kMinKeyBytes);
    return std::nullopt;
  }
  struct stat st {};
  if (stat(path.c_str(), &st) == 0 && (st.st_mode & 077) != 0) {
    *warning = "key file " + path + " is readable by group or others (chmod 600 it)";
  }
  return key;
}

Nonce random_nonce() {
  Nonce n{};
  // RAND_bytes only fails when the OS entropy source is broken: a broken invariant.
  if (RAND_bytes(n.data(), static_cast<int>(n.size())) != 1) throw std::runtime_error("RAND_bytes failed");
  return n;
}

Proof compute_proof(std::span<const uint8_t> key, const Nonce& nonce, const std::string& initiator_id,
                    const std::string& acceptor_id, Direction prover) {
  std::vector<uint8_t> msg(nonce.begin(), nonce.end());
  for (const std::string* id : {&initiator_id, &acceptor_id}) {
    msg.push_back(static_cast<uint8_t>(id->size()));
    msg.insert(msg.end(), id->begin(), id->end());
  }
  msg.push_back(static_cast<uint8_t>(prover));
  Proof out{};
  unsigned int len = 0;
  if (HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()), msg.data(), msg.size(), out.data(), &len) ==
          nullptr ||
      len != out.size()) {
    throw std::runtime_error("HMAC-SHA256 failed");
  }
  return out;
}

bool verify_proof(std::span<const uint8_t> key, const Nonce& nonce, const std::string& initiator_id,
                  const std::string& acceptor_id, Direction prover, std::span<const uint8_t> proof) {
  if (proof.size() != kProofBytes) return false;
  const Proof expected = compute_proof(key, nonce, initiator_id, acceptor_id, prover);
  return CRYPTO_memcmp(expected.data(), proof.data(), expected.size()) == 0;
}

}  // namespace rdmad::peer
