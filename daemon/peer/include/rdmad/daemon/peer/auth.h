#pragma once
// Random bytes from the OS's CSPRNG (OpenSSL RAND_bytes), for initial PSNs and seeds. The HMAC
// challenge-response this header used to declare is gone: TLS 1.3 authenticates peers since
// protocol version 3 (tls_context.h, psk.h).
#include <array>
#include <cstdint>

namespace rdmad::peer {

using Nonce = std::array<uint8_t, 32>;

/// 32 random bytes (RAND_bytes; a failure means a broken OS entropy source and throws).
Nonce random_nonce();

}  // namespace rdmad::peer
