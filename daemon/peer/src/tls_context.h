#pragma once
// The peer channel's TLS 1.3 credentials in one OpenSSL context (through Boost.Asio's
// ssl::context), of one of two kinds:
//   - certificates: both sides present a chain from the configured CA and verify the other's
//     (SSL_VERIFY_PEER | FAIL_IF_NO_PEER_CERT); the node ids a certificate proves are its DNS SANs
//     (and, with a URI prefix, the URI SANs prefix + id);
//   - a pre-shared key (psk.h) as TLS 1.3 external PSK through OpenSSL's session callbacks: the
//     dialler offers identity = its node id, the acceptor takes any well-formed identity with the
//     one cluster key and learns the id the dialler claims. Key exchange stays (EC)DHE (psk_dhe_ke;
//     OpenSSL never allows psk_ke unless asked), so a stolen key later does not decrypt captured
//     sessions.
// No session tickets, no resumption, no 0-RTT: every connection is a full handshake, so a
// captured handshake replays to nothing. A context is shared (shared_ptr) by the connections
// made with it, so a credential reload can replace it while they live on.
#include <openssl/ssl.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <boost/asio/ssl/context.hpp>

#include "rdmad/config/credential_file.h"
#include "rdmad/daemon/peer/peer_config.h"
#include "rdmad/daemon/peer/psk.h"

namespace rdmad::peer {

enum class Security : uint8_t { kInsecure, kPsk, kCertificates };
const char* to_string(Security s);
/// The kind of credentials a configuration names (kInsecure only when insecure is set); nullopt
/// with `error` when it names none, or more than one kind.
std::optional<Security> security_of(const PeerConfig& c, std::string* error);

/// One connection's view of its peer, filled by the PSK callback during the handshake (the SSL
/// object's ex_data points at it; the connection owns both).
struct TlsPeer {
  const class TlsContext* context = nullptr;
  std::string psk_identity;  // acceptor with a PSK: the identity the dialler offered
};

class TlsContext {
 public:
  /// Loads the credentials `config` names (never kInsecure); nullptr with `error` naming the
  /// file and the cause (a bad file, a key that does not match the certificate, ...).
  static std::shared_ptr<TlsContext> load(const PeerConfig& config, std::string* error);

  Security security() const { return security_; }
  boost::asio::ssl::context& native() { return ctx_; }
  /// Before the handshake of a fresh SSL object: the PSK callbacks find `peer` through it.
  void attach(SSL* ssl, TlsPeer* peer) const;
  /// After a successful handshake: the node ids the peer's credential proves (certificate SANs;
  /// a PSK acceptor: the offered identity), or nullopt when it proves none in particular (a PSK
  /// dialler: whoever holds the cluster key may answer). Sets `error` and returns an empty list
  /// when the credential is unusable (no certificate, no PSK used).
  std::optional<std::vector<std::string>> proven_ids(SSL* ssl, const TlsPeer& peer, bool initiator,
                                                     std::string* error) const;
  /// Whether a credential file now differs from what was loaded (rotation).
  bool files_changed() const;

  // For the PSK callbacks.
  const Psk& psk() const { return psk_; }
  const std::string& node_id() const { return node_id_; }

 private:
  TlsContext();
  bool load_certificates(const PeerConfig& c, std::string* error);
  bool load_psk(const PeerConfig& c, std::string* error);

  boost::asio::ssl::context ctx_;
  Security security_ = Security::kCertificates;
  std::string node_id_;
  std::string uri_prefix_;
  Psk psk_{};
  std::vector<std::pair<std::string, config::FileStamp>> files_;
};

}  // namespace rdmad::peer
