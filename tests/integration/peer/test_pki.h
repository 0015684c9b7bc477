#pragma once
// A throw-away certificate authority for peer-channel tests, made with OpenSSL in memory (EC
// P-256, SHA-256): a CA and leaf certificates for any SANs, written into a test's temp dir with
// the modes the daemon demands (private keys 0600). Nothing is read from outside the test.
#include <memory>
#include <string>
#include <vector>

#include "support/temp_dir.h"

namespace rdmad::peer::test {

struct CertFiles {
  std::string ca;    // the CA bundle (PEM)
  std::string cert;  // the leaf certificate
  std::string key;   // its private key, mode 0600
};

class TestPki {
 public:
  /// A fresh CA named `name`, valid from an hour ago for a day.
  explicit TestPki(const std::string& name = "rdmad test CA");
  ~TestPki();
  TestPki(const TestPki&) = delete;
  TestPki& operator=(const TestPki&) = delete;

  const std::string& ca_pem() const { return ca_pem_; }
  /// A leaf certificate (server and client auth) for `sans`: DNS names, or URIs when one
  /// contains "://". `expired`: valid only until an hour ago.
  void issue(const std::vector<std::string>& sans, std::string* cert_pem, std::string* key_pem,
             bool expired = false) const;
  /// issue() into dir: <name>-ca.pem (0644), <name>.crt (0644), <name>.key (0600).
  CertFiles write(const rdmad::test::TempDir& dir, const std::string& name, const std::vector<std::string>& sans,
                  bool expired = false) const;

 private:
  struct State;
  std::unique_ptr<State> s_;
  std::string ca_pem_;
};

/// Writes `text` as dir/name with `mode` and returns the path.
std::string write_file(const rdmad::test::TempDir& dir, const std::string& name, const std::string& text,
                       unsigned mode);

}  // namespace rdmad::peer::test
