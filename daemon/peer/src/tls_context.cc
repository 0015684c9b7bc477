#include "tls_context.h"

#include <openssl/err.h>
#include <openssl/x509v3.h>

#include <algorithm>
#include <cctype>

#include <boost/asio/buffer.hpp>

#include "rdmad/daemon/peer/wire.h"

namespace rdmad::peer {

namespace asio = boost::asio;

namespace {

// Our slot in an SSL object's ex_data for its TlsPeer. Not the app data: Asio keeps its verify
// callback there and deletes whatever it finds when the stream goes.
int peer_slot() {
  static const int slot = SSL_get_ex_new_index(0, nullptr, nullptr, nullptr, nullptr);
  return slot;
}

TlsPeer* peer_of(SSL* ssl) { return static_cast<TlsPeer*>(SSL_get_ex_data(ssl, peer_slot())); }

// The one cipher suite a PSK session is made for; the context offers only SHA-256 suites, so
// whichever the acceptor picks has the PSK's hash.
const SSL_CIPHER* psk_cipher(SSL* ssl) {
  static const unsigned char kAes128GcmSha256[] = {0x13, 0x01};
  return SSL_CIPHER_find(ssl, kAes128GcmSha256);
}

SSL_SESSION* psk_session(SSL* ssl, const Psk& psk) {
  const SSL_CIPHER* cipher = psk_cipher(ssl);
  if (cipher == nullptr) return nullptr;
  SSL_SESSION* s = SSL_SESSION_new();
  if (s == nullptr) return nullptr;
  if (SSL_SESSION_set1_master_key(s, psk.data(), psk.size()) != 1 || SSL_SESSION_set_cipher(s, cipher) != 1 ||
      SSL_SESSION_set_protocol_version(s, TLS1_3_VERSION) != 1) {
    SSL_SESSION_free(s);
    return nullptr;
  }
  return s;
}

bool is_node_id(const std::string& s) {
  return !s.empty() && s.size() <= kMaxNodeIdBytes && std::all_of(s.begin(), s.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '-';
  });
}

// Dialler: offer the cluster key under this node's id.
int use_psk_session(SSL* ssl, const EVP_MD* md, const unsigned char** id, size_t* idlen, SSL_SESSION** sess) {
  *sess = nullptr;
  *id = nullptr;
  *idlen = 0;
  const TlsPeer* peer = peer_of(ssl);
  if (peer == nullptr || peer->context == nullptr) return 0;
  const SSL_CIPHER* cipher = psk_cipher(ssl);
  // Called again after a HelloRetryRequest with the hash chosen: no PSK for another hash.
  if (md != nullptr && cipher != nullptr && md != SSL_CIPHER_get_handshake_digest(cipher)) return 1;
  *sess = psk_session(ssl, peer->context->psk());
  if (*sess == nullptr) return 0;
  const std::string& me = peer->context->node_id();
  *id = reinterpret_cast<const unsigned char*>(me.data());
  *idlen = me.size();
  return 1;
}

// Acceptor: the one cluster key for any well-formed identity; the identity is the id the dialler
// claims, checked against its hello later. A malformed one gets no PSK, so the handshake fails
// (the acceptor has no certificate to fall back on).
int find_psk_session(SSL* ssl, const unsigned char* identity, size_t len, SSL_SESSION** sess) {
  *sess = nullptr;
  TlsPeer* peer = peer_of(ssl);
  if (peer == nullptr || peer->context == nullptr) return 0;
  std::string id(reinterpret_cast<const char*>(identity), len);
  if (!is_node_id(id)) return 1;
  *sess = psk_session(ssl, peer->context->psk());
  if (*sess == nullptr) return 0;
  peer->psk_identity = std::move(id);
  return 1;
}

// A passphrase callback that has none: an encrypted key fails to load instead of OpenSSL asking
// for a passphrase on the terminal (which would block start-up).
int no_passphrase(char*, int, int, void*) { return 0; }

// The node ids a certificate proves: DNS SANs that are node ids, and URI SANs prefix + node id.
std::vector<std::string> certificate_ids(X509* cert, const std::string& uri_prefix) {
  std::vector<std::string> out;
  auto* names = static_cast<GENERAL_NAMES*>(X509_get_ext_d2i(cert, NID_subject_alt_name, nullptr, nullptr));
  if (names == nullptr) return out;
  for (int i = 0; i < sk_GENERAL_NAME_num(names); ++i) {
    const GENERAL_NAME* n = sk_GENERAL_NAME_value(names, i);
    if (n->type != GEN_DNS && n->type != GEN_URI) continue;
    const ASN1_STRING* s = n->type == GEN_DNS ? n->d.dNSName : n->d.uniformResourceIdentifier;
    std::string v(reinterpret_cast<const char*>(ASN1_STRING_get0_data(s)), static_cast<size_t>(ASN1_STRING_length(s)));
    if (n->type == GEN_URI) {
      if (uri_prefix.empty() || v.size() <= uri_prefix.size() || v.compare(0, uri_prefix.size(), uri_prefix) != 0) continue;
      v.erase(0, uri_prefix.size());
    }
    // is_node_id also rejects embedded NULs and wildcards ("*.example"): a SAN proves one id.
    if (is_node_id(v)) out.push_back(std::move(v));
  }
  GENERAL_NAMES_free(names);
  return out;
}

std::string openssl_error() {
  const unsigned long e = ERR_get_error();
  ERR_clear_error();
  if (e == 0) return "unknown OpenSSL error";
  char buf[256];
  ERR_error_string_n(e, buf, sizeof(buf));
  return buf;
}

}  // namespace

const char* to_string(Security s) {
  switch (s) {
    case Security::kInsecure: return "insecure";
    case Security::kPsk: return "psk";
    case Security::kCertificates: return "certificates";
  }
  return "unknown";
}

std::optional<Security> security_of(const PeerConfig& c, std::string* error) {
  const bool psk = !c.key_file.empty();
  const int tls = !c.tls_ca_file.empty() + !c.tls_cert_file.empty() + !c.tls_key_file.empty();
  if (c.insecure) {
    if (psk || tls > 0) {
      *error = "peer: insecure is set together with credentials: choose one";
      return std::nullopt;
    }
    return Security::kInsecure;
  }
  if (psk && tls > 0) {
    *error = "peer: both a pre-shared key and certificates are configured: choose one";
  } else if (tls > 0 && tls < 3) {
    *error = "peer: mutual TLS needs a CA file, a certificate file and a key file";
  } else if (tls == 3) {
    return Security::kCertificates;
  } else if (psk) {
    return Security::kPsk;
  } else {
    *error = "peer: no credentials (certificates or a pre-shared key) and insecure is not set";
  }
  return std::nullopt;
}

TlsContext::TlsContext() : ctx_(asio::ssl::context::tls) {}

std::shared_ptr<TlsContext> TlsContext::load(const PeerConfig& config, std::string* error) {
  const auto security = security_of(config, error);
  if (!security) return nullptr;
  if (*security == Security::kInsecure) {
    *error = "peer: no TLS context without credentials";
    return nullptr;
  }
  std::shared_ptr<TlsContext> t(new TlsContext());
  t->security_ = *security;
  t->node_id_ = config.node_id;
  t->uri_prefix_ = config.tls_san_uri_prefix;
  SSL_CTX* ctx = t->ctx_.native_handle();
  SSL_CTX_set_min_proto_version(ctx, TLS1_3_VERSION);
  SSL_CTX_set_max_proto_version(ctx, TLS1_3_VERSION);
  SSL_CTX_set_options(ctx, SSL_OP_NO_TICKET | SSL_OP_NO_COMPRESSION);
  SSL_CTX_set_num_tickets(ctx, 0);
  SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF);
  SSL_CTX_set_max_early_data(ctx, 0);
  SSL_CTX_set_default_passwd_cb(ctx, no_passphrase);
  const bool ok = *security == Security::kPsk ? t->load_psk(config, error) : t->load_certificates(config, error);
  ERR_clear_error();
  return ok ? t : nullptr;
}

bool TlsContext::load_psk(const PeerConfig& c, std::string* error) {
  // Stamps before reading: a file replaced in between is read new and reloaded once more, never missed.
  files_ = {{c.key_file, config::stamp_of(c.key_file)}};
  auto psk = load_psk_file(c.key_file, error);
  if (!psk) return false;
  psk_ = *psk;
  SSL_CTX* ctx = ctx_.native_handle();
  if (SSL_CTX_set_ciphersuites(ctx, "TLS_AES_128_GCM_SHA256:TLS_CHACHA20_POLY1305_SHA256") != 1) {
    *error = "peer: cannot set the TLS 1.3 cipher suites: " + openssl_error();
    return false;
  }
  SSL_CTX_set_psk_use_session_callback(ctx, use_psk_session);
  SSL_CTX_set_psk_find_session_callback(ctx, find_psk_session);
  return true;
}

bool TlsContext::load_certificates(const PeerConfig& c, std::string* error) {
  using config::CredentialKind;
  files_ = {{c.tls_ca_file, config::stamp_of(c.tls_ca_file)},
            {c.tls_cert_file, config::stamp_of(c.tls_cert_file)},
            {c.tls_key_file, config::stamp_of(c.tls_key_file)}};
  const auto ca = config::read_credential_file(c.tls_ca_file, CredentialKind::kPublic, "CA file", error);
  if (!ca) return false;
  const auto cert = config::read_credential_file(c.tls_cert_file, CredentialKind::kPublic, "certificate file", error);
  if (!cert) return false;
  const auto key = config::read_credential_file(c.tls_key_file, CredentialKind::kSecret, "private key file", error);
  if (!key) return false;
  boost::system::error_code ec;
  ctx_.add_certificate_authority(asio::buffer(*ca), ec);
  if (ec) {
    *error = "CA file " + c.tls_ca_file + ": not a PEM certificate bundle (" + ec.message() + ")";
    return false;
  }
  ctx_.use_certificate_chain(asio::buffer(*cert), ec);
  if (ec) {
    *error = "certificate file " + c.tls_cert_file + ": not a PEM certificate chain (" + ec.message() + ")";
    return false;
  }
  ctx_.use_private_key(asio::buffer(*key), asio::ssl::context::pem, ec);
  if (ec && ERR_GET_REASON(static_cast<unsigned long>(ec.value())) == X509_R_KEY_VALUES_MISMATCH) {
    *error = "private key file " + c.tls_key_file + " does not belong to certificate file " + c.tls_cert_file;
    return false;
  }
  if (ec) {
    *error = "private key file " + c.tls_key_file + ": not an unencrypted PEM private key (" + ec.message() + ")";
    return false;
  }
  SSL_CTX* ctx = ctx_.native_handle();
  if (SSL_CTX_check_private_key(ctx) != 1) {
    *error = "private key file " + c.tls_key_file + " does not belong to certificate file " + c.tls_cert_file;
    return false;
  }
  X509* own = SSL_CTX_get0_certificate(ctx);
  const auto ids = certificate_ids(own, uri_prefix_);
  if (std::find(ids.begin(), ids.end(), node_id_) == ids.end()) {
    *error = "certificate file " + c.tls_cert_file + " does not name this node's id " + node_id_ +
             " as a DNS SAN" + (uri_prefix_.empty() ? "" : " (or URI SAN " + uri_prefix_ + node_id_ + ")") +
             ": peers would refuse it";
    return false;
  }
  if (X509_cmp_current_time(X509_get0_notAfter(own)) < 0) {
    *error = "certificate file " + c.tls_cert_file + " has expired";
    return false;
  }
  ctx_.set_verify_mode(asio::ssl::verify_peer | asio::ssl::verify_fail_if_no_peer_cert);
  return true;
}

void TlsContext::attach(SSL* ssl, TlsPeer* peer) const {
  peer->context = this;
  SSL_set_ex_data(ssl, peer_slot(), peer);
}

std::optional<std::vector<std::string>> TlsContext::proven_ids(SSL* ssl, const TlsPeer& peer, bool initiator,
                                                               std::string* error) const {
  if (security_ == Security::kPsk) {
    // A full handshake without the PSK would have needed a certificate, which no side has; check anyway.
    if (SSL_session_reused(ssl) != 1) {
      *error = "the TLS handshake did not use the pre-shared key";
      return std::vector<std::string>{};
    }
    if (initiator) return std::nullopt;
    return std::vector<std::string>{peer.psk_identity};
  }
  X509* cert = SSL_get0_peer_certificate(ssl);
  if (cert == nullptr || SSL_get_verify_result(ssl) != X509_V_OK) {
    *error = "the peer presented no verified certificate";
    return std::vector<std::string>{};
  }
  auto ids = certificate_ids(cert, uri_prefix_);
  if (ids.empty()) *error = "the peer's certificate names no node id (no DNS SAN that is one)";
  return ids;
}

bool TlsContext::files_changed() const {
  return std::any_of(files_.begin(), files_.end(),
                     [](const auto& f) { return config::stamp_of(f.first) != f.second; });
}

}  // namespace rdmad::peer
