#pragma once
// The pre-shared key of the peer channel. The key file's bytes are never used as they are: the
// TLS 1.3 external PSK is HMAC-SHA256(file bytes, "rdmad peer channel tls13 psk v1"), so a key of
// any length (≥ 16 bytes) becomes one 32-byte PSK for the SHA-256 cipher suites, and a key file
// shared with another tool does not give that tool's key away as ours.
#include <array>
#include <cstdint>
#include <optional>
#include <string>

namespace rdmad::peer {

inline constexpr size_t kMinKeyBytes = 16;
using Psk = std::array<uint8_t, 32>;

/// Reads a key file (credential_file.h rules: regular, private, ≤ 1 MiB; trailing whitespace
/// ignored) and derives the PSK. nullopt with `error` naming the file and the cause.
std::optional<Psk> load_psk_file(const std::string& path, std::string* error);

/// The PSK for a key (exposed for tests).
Psk derive_psk(const std::string& key);

}  // namespace rdmad::peer
