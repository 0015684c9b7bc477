#include "peer_rules.h"

#include <span>

#include <fmt/format.h>

#include "rdmad/config/credential_file.h"

namespace rdmad::config {
namespace {

bool is_wildcard(const std::string& host) { return host == "0.0.0.0" || host == "::"; }

void check_credentials(PeerSection& p, bool check_files, bool credentials_elsewhere, const PeerRuleReport& report) {
  const bool psk = !p.key_file.empty();
  const bool any_tls = !p.tls_ca_file.empty() || !p.tls_cert_file.empty() || !p.tls_key_file.empty();
  if (p.insecure) {
    if (psk || any_tls) {
      report("peer.insecure",
             "insecure = true runs the peer channel without TLS, yet credentials are set: remove insecure or the "
             "credentials",
             Finding::kError);
      return;
    }
    report("peer.insecure",
           "the peer channel is insecure: plaintext and unauthenticated, so anyone who reaches its port can claim a "
           "node id and receive the grants meant for it; use it only on a trusted test network",
           Finding::kWarning);
    return;
  }
  if (!psk && !any_tls) {
    report("peer.enabled",
           "the peer channel needs credentials: set tls_ca_file, tls_cert_file and tls_key_file (mutual TLS with "
           "certificates) or key_file (a pre-shared key); insecure = true runs it without authentication or "
           "encryption (trusted test networks only)",
           Finding::kError);
    return;
  }
  if (psk && any_tls) {
    report("peer.key_file", "set key_file (a pre-shared key) or the tls_* files (certificates), not both",
           Finding::kError);
    return;
  }
  struct File {
    const char* key;
    std::string& path;
    CredentialKind kind;
    const char* what;
  };
  File tls[] = {
      {"peer.tls_ca_file", p.tls_ca_file, CredentialKind::kPublic, "CA file"},
      {"peer.tls_cert_file", p.tls_cert_file, CredentialKind::kPublic, "certificate file"},
      {"peer.tls_key_file", p.tls_key_file, CredentialKind::kSecret, "private key file"},
  };
  File key[] = {{"peer.key_file", p.key_file, CredentialKind::kSecret, "key file"}};
  for (File& f : psk ? std::span<File>(key) : std::span<File>(tls)) {
    if (f.path.empty()) {
      report(f.key, "missing: mutual TLS needs tls_ca_file, tls_cert_file and tls_key_file", Finding::kError);
      continue;
    }
    std::string error;
    const auto path = credential_path(f.path, &error);
    if (!path) {
      report(f.key, error, credentials_elsewhere ? Finding::kNotChecked : Finding::kError);
      continue;
    }
    f.path = *path;
    if (check_files && !read_credential_file(f.path, f.kind, f.what, &error)) report(f.key, error, Finding::kError);
  }
}

}  // namespace

void check_peer_security(Config& c, bool check_files, bool credentials_elsewhere, const PeerRuleReport& report) {
  PeerSection& p = c.peer;
  if (!p.enabled) return;
  check_credentials(p, check_files, credentials_elsewhere, report);
  if (p.max_handshakes_per_source > p.max_handshakes) {
    report("peer.max_handshakes_per_source",
           fmt::format("max_handshakes_per_source ({}) must be at most max_handshakes ({})", p.max_handshakes_per_source,
                       p.max_handshakes),
           Finding::kError);
  }
  if (p.listen.empty()) {
    for (const NicSection& n : c.nics) {
      if (n.address.empty()) continue;
      p.listen_host = n.address;
      break;
    }
    if (p.listen_host.empty()) {
      report("peer.listen",
             "no [[nic]] has an address to listen on: set listen to this node's peer address (e.g. "
             "\"10.0.0.1:18515\"; a wildcard such as \"0.0.0.0:18515\" must be written out)",
             Finding::kError);
    }
  } else if (is_wildcard(p.listen_host)) {
    report("peer.listen",
           fmt::format("the peer channel accepts connections on every address ({}): prefer this node's management "
                       "or NIC address",
                       p.listen),
           Finding::kWarning);
  }
}

}  // namespace rdmad::config
