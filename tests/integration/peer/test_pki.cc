#include "test_pki.h"

#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/x509v3.h>
#include <sys/stat.h>

#include <stdexcept>

namespace rdmad::peer::test {
namespace {

void check(bool ok, const char* what) {
  if (!ok) throw std::runtime_error(std::string("test PKI: ") + what + " failed");
}

EVP_PKEY* new_key() {
  EVP_PKEY* k = EVP_EC_gen("P-256");
  check(k != nullptr, "EC key generation");
  return k;
}

void add_ext(X509* cert, X509* issuer, int nid, const std::string& value) {
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, issuer, cert, nullptr, nullptr, 0);
  X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, &ctx, nid, value.c_str());
  check(ext != nullptr, "extension");
  X509_add_ext(cert, ext, -1);
  X509_EXTENSION_free(ext);
}

X509* new_cert(const std::string& cn, EVP_PKEY* key, long from_s, long until_s) {
  X509* c = X509_new();
  X509_set_version(c, 2);
  unsigned char serial[8];
  RAND_bytes(serial, sizeof(serial));
  serial[0] &= 0x7F;
  BIGNUM* bn = BN_bin2bn(serial, sizeof(serial), nullptr);
  BN_to_ASN1_INTEGER(bn, X509_get_serialNumber(c));
  BN_free(bn);
  X509_gmtime_adj(X509_getm_notBefore(c), from_s);
  X509_gmtime_adj(X509_getm_notAfter(c), until_s);
  X509_NAME* name = X509_get_subject_name(c);
  X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, reinterpret_cast<const unsigned char*>(cn.c_str()), -1, -1, 0);
  X509_set_pubkey(c, key);
  return c;
}

std::string pem_of(X509* c) {
  BIO* b = BIO_new(BIO_s_mem());
  PEM_write_bio_X509(b, c);
  char* data = nullptr;
  const long n = BIO_get_mem_data(b, &data);
  std::string out(data, static_cast<size_t>(n));
  BIO_free(b);
  return out;
}

std::string pem_of(EVP_PKEY* k) {
  BIO* b = BIO_new(BIO_s_mem());
  PEM_write_bio_PrivateKey(b, k, nullptr, nullptr, 0, nullptr, nullptr);
  char* data = nullptr;
  const long n = BIO_get_mem_data(b, &data);
  std::string out(data, static_cast<size_t>(n));
  BIO_free(b);
  return out;
}

}  // namespace

struct TestPki::State {
  EVP_PKEY* key = nullptr;
  X509* cert = nullptr;
  ~State() {
    X509_free(cert);
    EVP_PKEY_free(key);
  }
};

TestPki::TestPki(const std::string& name) : s_(std::make_unique<State>()) {
  s_->key = new_key();
  s_->cert = new_cert(name, s_->key, -3600, 86400);
  X509_set_issuer_name(s_->cert, X509_get_subject_name(s_->cert));
  add_ext(s_->cert, s_->cert, NID_basic_constraints, "critical,CA:TRUE");
  add_ext(s_->cert, s_->cert, NID_key_usage, "critical,keyCertSign,cRLSign");
  add_ext(s_->cert, s_->cert, NID_subject_key_identifier, "hash");
  check(X509_sign(s_->cert, s_->key, EVP_sha256()) > 0, "CA signature");
  ca_pem_ = pem_of(s_->cert);
}

TestPki::~TestPki() = default;

void TestPki::issue(const std::vector<std::string>& sans, std::string* cert_pem, std::string* key_pem,
                    bool expired) const {
  EVP_PKEY* key = new_key();
  X509* c = new_cert(sans.empty() ? "no-san" : sans.front(), key, expired ? -7200 : -3600, expired ? -3600 : 86400);
  X509_set_issuer_name(c, X509_get_subject_name(s_->cert));
  add_ext(c, s_->cert, NID_basic_constraints, "critical,CA:FALSE");
  add_ext(c, s_->cert, NID_key_usage, "critical,digitalSignature,keyEncipherment");
  add_ext(c, s_->cert, NID_ext_key_usage, "serverAuth,clientAuth");
  add_ext(c, s_->cert, NID_authority_key_identifier, "keyid");
  std::string alt;
  for (const std::string& s : sans) {
    alt += (alt.empty() ? "" : ",") + std::string(s.find("://") != std::string::npos ? "URI:" : "DNS:") + s;
  }
  if (!alt.empty()) add_ext(c, s_->cert, NID_subject_alt_name, alt);
  check(X509_sign(c, s_->key, EVP_sha256()) > 0, "leaf signature");
  *cert_pem = pem_of(c);
  *key_pem = pem_of(key);
  X509_free(c);
  EVP_PKEY_free(key);
}

CertFiles TestPki::write(const rdmad::test::TempDir& dir, const std::string& name, const std::vector<std::string>& sans,
                         bool expired) const {
  std::string cert, key;
  issue(sans, &cert, &key, expired);
  return {write_file(dir, name + "-ca.pem", ca_pem_, 0644), write_file(dir, name + ".crt", cert, 0644),
          write_file(dir, name + ".key", key, 0600)};
}

std::string write_file(const rdmad::test::TempDir& dir, const std::string& name, const std::string& text,
                       unsigned mode) {
  const std::string p = dir.write(name, text);
  ::chmod(p.c_str(), mode);
  return p;
}

}  // namespace rdmad::peer::test
