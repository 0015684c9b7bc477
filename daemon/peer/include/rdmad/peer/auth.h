#pragma once
// Shared-secret challenge-response (HMAC-SHA256, OpenSSL libcrypto). Each side sends a random
// nonce in its hello; the other proves it holds the key by answering
//   HMAC(key, nonce ‖ len ‖ initiator id ‖ len ‖ acceptor id ‖ direction)
// where direction is 'I' for the initiator's proof and 'A' for the acceptor's. Binding both ids
// and the direction keeps a proof from being replayed on another connection or reflected back.
#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "rdmad/peer/wire.h"

namespace rdmad::peer {

inline constexpr size_t kMinKeyBytes = 16;

enum class Direction : uint8_t { kInitiator = 'I', kAcceptor = 'A' };

using Nonce = std::array<uint8_t, kNonceBytes>;
using Proof = std::array<uint8_t, kProofBytes>;

/// Reads a key file (trailing whitespace ignored). nullopt with `error` naming the file and the
/// cause when it cannot be read or holds fewer than kMinKeyBytes. `warning` is set when others
/// than the owner may read it.
std::optional<std::vector<uint8_t>> load_key_file(const std::string& path, std::string* error,
                                                  std::string* warning);

/// A nonce from the OS's CSPRNG (RAND_bytes).
Nonce random_nonce();

/// The proof `prover` sends for the nonce the other side chose.
Proof compute_proof(std::span<const uint8_t> key, const Nonce& nonce, const std::string& initiator_id,
                    const std::string& acceptor_id, Direction prover);

/// Constant-time check of a received proof (CRYPTO_memcmp).
bool verify_proof(std::span<const uint8_t> key, const Nonce& nonce, const std::string& initiator_id,
                  const std::string& acceptor_id, Direction prover, std::span<const uint8_t> proof);

}  // namespace rdmad::peer
