// The [peer] security rules: credentials are required unless insecure is written, one kind of
// them at a time, the listen address defaults to a NIC's, and credential files are fit to read
// (credential_file.h) — checked on the open descriptor, never hanging on a FIFO.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "rdmad/config/credential_file.h"
#include "rdmad/config/loader.h"
#include "support/temp_dir.h"

namespace rdmad::config {
namespace {

std::string lines_of(const std::vector<Error>& v) {
  std::string s;
  for (const auto& e : v) s += fmt::format("{} {}: {}\n", e.line, e.key, e.message);
  return s;
}

std::string write(const rdmad::test::TempDir& d, const std::string& name, const std::string& text, mode_t mode) {
  const std::string p = d.write(name, text);
  ::chmod(p.c_str(), mode);
  return p;
}

TEST(PeerSecurity, EnabledWithoutCredentialsIsAnErrorUnlessInsecureIsWritten) {
  const LoadResult none = load_string("[peer]\nenabled = true\nlisten = \"10.0.0.1:1\"\n", "t.toml");
  EXPECT_EQ(lines_of(none.errors).rfind("2 peer.enabled: the peer channel needs credentials", 0), 0u)
      << lines_of(none.errors);
  const LoadResult insecure =
      load_string("[peer]\nenabled = true\ninsecure = true\nlisten = \"10.0.0.1:1\"\n", "t.toml");
  EXPECT_TRUE(insecure.ok()) << lines_of(insecure.errors);
  ASSERT_EQ(insecure.warnings.size(), 1u);
  EXPECT_EQ(insecure.warnings[0].key, "peer.insecure");
  EXPECT_EQ(insecure.warnings[0].line, 3u);
  EXPECT_NE(insecure.warnings[0].message.find("plaintext and unauthenticated"), std::string::npos);
  EXPECT_EQ(insecure.config.peer.security(), "insecure");
  // Off, nothing is required (and nothing warned).
  const LoadResult off = load_string("[peer]\ninsecure = true\n", "t.toml");
  EXPECT_TRUE(off.ok());
  EXPECT_TRUE(off.warnings.empty());
}

TEST(PeerSecurity, OneKindOfCredentialsAndAllOfIt) {
  const std::string head = "[peer]\nenabled = true\nlisten = \"10.0.0.1:1\"\n";
  auto errors = [&](const std::string& keys) {
    return lines_of(load_string(head + keys, "t.toml", {.check_files = false}).errors);
  };
  EXPECT_EQ(errors("key_file = \"/k\"\n"), "");
  EXPECT_EQ(errors("tls_ca_file = \"/ca\"\ntls_cert_file = \"/c\"\ntls_key_file = \"/k\"\n"), "");
  EXPECT_EQ(errors("tls_cert_file = \"/c\"\n"),
            "1 peer.tls_ca_file: missing: mutual TLS needs tls_ca_file, tls_cert_file and tls_key_file\n"
            "1 peer.tls_key_file: missing: mutual TLS needs tls_ca_file, tls_cert_file and tls_key_file\n");
  EXPECT_EQ(errors("key_file = \"/k\"\ntls_ca_file = \"/ca\"\n"),
            "4 peer.key_file: set key_file (a pre-shared key) or the tls_* files (certificates), not both\n");
  EXPECT_NE(errors("insecure = true\nkey_file = \"/k\"\n").find("4 peer.insecure: insecure = true runs the peer channel "
                                                                 "without TLS, yet credentials are set"),
            std::string::npos);
  EXPECT_EQ(load_string(head + "key_file = \"/k\"\n", "t.toml", {.check_files = false}).config.peer.security(), "psk");
}

TEST(PeerSecurity, ListenDefaultsToTheFirstNicAddressAndAWildcardIsWarned) {
  const std::string nics =
      "[[nic]]\nname = \"hw\"\nbackend = \"rdma_core\"\ndevice = \"mlx5_0\"\n"
      "[[nic]]\nname = \"s\"\nbackend = \"soft\"\naddress = \"10.9.0.7\"\n";
  const LoadResult r = load_string("[peer]\nenabled = true\ninsecure = true\n" + nics, "t.toml");
  ASSERT_TRUE(r.ok()) << lines_of(r.errors);
  EXPECT_EQ(r.config.peer.listen_host, "10.9.0.7");
  EXPECT_EQ(r.config.peer.listen_port, 18515);
  const LoadResult none = load_string("[peer]\nenabled = true\ninsecure = true\n", "t.toml");
  EXPECT_NE(lines_of(none.errors).find("peer.listen: no [[nic]] has an address to listen on: set listen"),
            std::string::npos)
      << lines_of(none.errors);
  for (const char* wildcard : {"0.0.0.0:18515", "[::]:18515"}) {
    const LoadResult w =
        load_string(fmt::format("[peer]\nenabled = true\ninsecure = true\nlisten = \"{}\"\n", wildcard), "t.toml");
    EXPECT_TRUE(w.ok()) << lines_of(w.errors);
    EXPECT_NE(lines_of(w.warnings).find("4 peer.listen: the peer channel accepts connections on every address"),
              std::string::npos)
        << wildcard << lines_of(w.warnings);
  }
}

class CredentialFiles : public ::testing::Test {
 protected:
  // The error --check-config gives for key_file = path, or "".
  std::string key_file_error(const std::string& path) {
    const auto t0 = std::chrono::steady_clock::now();
    const LoadResult r = load_string(
        fmt::format("[peer]\nenabled = true\nlisten = \"10.0.0.1:1\"\nkey_file = \"{}\"\n", path), "t.toml");
    EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(2)) << path << " took long to check";
    return lines_of(r.errors);
  }
  rdmad::test::TempDir dir_;
};

TEST_F(CredentialFiles, GoodKeyFilePasses) {
  EXPECT_EQ(key_file_error(write(dir_, "k", "0123456789abcdef0123456789abcdef\n", 0600)), "");
  EXPECT_EQ(key_file_error(write(dir_, "k4", "0123456789abcdef0123456789abcdef\n", 0400)), "");
  // A symlink to a regular file is fine: Kubernetes mounts Secrets that way.
  const std::string link = dir_.path() + "/link";
  ASSERT_EQ(::symlink((dir_.path() + "/k").c_str(), link.c_str()), 0);
  EXPECT_EQ(key_file_error(link), "");
}

TEST_F(CredentialFiles, NotRegularFilesAreRefusedWithoutOpeningThemForLong) {
  EXPECT_NE(key_file_error(dir_.path()).find("is a directory, not a regular file"), std::string::npos);
  EXPECT_NE(key_file_error("/dev/zero").find("is a character device, not a regular file"), std::string::npos);
  const std::string fifo = dir_.path() + "/fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  EXPECT_NE(key_file_error(fifo).find("is a FIFO, not a regular file"), std::string::npos);
  const std::string to_dir = dir_.path() + "/to-dir";
  ASSERT_EQ(::symlink(dir_.path().c_str(), to_dir.c_str()), 0);
  EXPECT_NE(key_file_error(to_dir).find("is a symlink to a directory"), std::string::npos);
  const std::string to_fifo = dir_.path() + "/to-fifo";
  ASSERT_EQ(::symlink(fifo.c_str(), to_fifo.c_str()), 0);
  EXPECT_NE(key_file_error(to_fifo).find("is a symlink to a FIFO"), std::string::npos);
  EXPECT_NE(key_file_error(dir_.path() + "/missing").find("No such file or directory"), std::string::npos);
}

TEST_F(CredentialFiles, ModeOwnerAndSizeAreChecked) {
  EXPECT_NE(key_file_error(write(dir_, "world", "0123456789abcdef0123", 0644))
                .find("is accessible by group or others (mode 0644); a secret must be private: chmod 600 it"),
            std::string::npos);
  EXPECT_NE(key_file_error(write(dir_, "group", "0123456789abcdef0123", 0640)).find("mode 0640"), std::string::npos);
  EXPECT_NE(key_file_error(write(dir_, "empty", "", 0600)).find("is empty"), std::string::npos);
  const std::string big = write(dir_, "big", std::string(kMaxCredentialFileBytes + 1, 'k'), 0600);
  EXPECT_NE(key_file_error(big).find("more than the 1048576"), std::string::npos);
  if (::geteuid() == 0) {  // only root can give a file away
    const std::string theirs = write(dir_, "theirs", "0123456789abcdef0123", 0600);
    ASSERT_EQ(::chown(theirs.c_str(), 65534, 65534), 0);
    EXPECT_NE(key_file_error(theirs).find("is owned by uid 65534"), std::string::npos);
  }
  // Certificates may be world-readable, never writable by others.
  std::string error;
  EXPECT_TRUE(read_credential_file(write(dir_, "c.pem", "x", 0644), CredentialKind::kPublic, "CA file", &error));
  EXPECT_FALSE(read_credential_file(write(dir_, "w.pem", "x", 0666), CredentialKind::kPublic, "CA file", &error));
  EXPECT_NE(error.find("CA file " + dir_.path() + "/w.pem: is writable by group or others (mode 0666)"),
            std::string::npos)
      << error;
}

TEST_F(CredentialFiles, TlsFilesAreCheckedByKindAndNamedByKey) {
  const std::string ca = write(dir_, "ca.pem", "ca", 0644);
  const std::string crt = write(dir_, "n.crt", "cert", 0644);
  const std::string key = write(dir_, "n.key", "key", 0644);  // readable by others: refused
  const LoadResult r = load_string(
      fmt::format("[peer]\nenabled = true\nlisten = \"10.0.0.1:1\"\ntls_ca_file = \"{}\"\ntls_cert_file = \"{}\"\n"
                  "tls_key_file = \"{}\"\n",
                  ca, crt, key),
      "t.toml");
  EXPECT_EQ(lines_of(r.errors),
            fmt::format("6 peer.tls_key_file: private key file {}: is accessible by group or others (mode 0644); a "
                        "secret must be private: chmod 600 it\n",
                        key));
}

TEST_F(CredentialFiles, StampChangesWhenTheFileIsReplaced) {
  const std::string p = write(dir_, "c", "one", 0644);
  const FileStamp a = stamp_of(p);
  EXPECT_EQ(stamp_of(p), a);
  const std::string next = write(dir_, "c.new", "two!", 0644);
  ASSERT_EQ(::rename(next.c_str(), p.c_str()), 0);  // how cert-manager's volume swaps a file
  EXPECT_NE(stamp_of(p), a);
  EXPECT_EQ(stamp_of(dir_.path() + "/none"), FileStamp{});
}

// "credential:NAME" names the systemd credential NAME: $CREDENTIALS_DIRECTORY/NAME, filled from
// LoadCredential= before the service starts; the loaded configuration holds the path.
TEST_F(CredentialFiles, SystemdCredentialIsReadFromTheCredentialsDirectory) {
  ASSERT_TRUE(std::filesystem::create_directory(dir_.path() + "/creds"));
  const std::string key = write(dir_, "creds/psk", "0123456789abcdef0123456789abcdef\n", 0600);
  const std::string text = "[peer]\nenabled = true\nlisten = \"10.0.0.1:1\"\nkey_file = \"credential:psk\"\n";
  ASSERT_EQ(::setenv("CREDENTIALS_DIRECTORY", (dir_.path() + "/creds").c_str(), 1), 0);
  LoadResult r = load_string(text, "t.toml");
  EXPECT_EQ(lines_of(r.errors), "");
  EXPECT_EQ(r.config.peer.key_file, key);
  std::string error;
  EXPECT_EQ(credential_path("/etc/rdmad/peer.key", &error), "/etc/rdmad/peer.key");
  EXPECT_EQ(credential_path("credential:psk", &error), key);

  // Without the directory (not under systemd, or no LoadCredential=): an error at start, a check
  // not run for --check-config outside the service.
  ASSERT_EQ(::unsetenv("CREDENTIALS_DIRECTORY"), 0);
  r = load_string(text, "t.toml");
  EXPECT_EQ(lines_of(r.errors),
            "4 peer.key_file: names the systemd credential 'psk', but $CREDENTIALS_DIRECTORY is not set: the unit "
            "needs LoadCredential=psk:/path/to/file (docs/operations.md)\n");
  EXPECT_FALSE(credential_path("credential:psk", &error));
  r = load_string(text, "t.toml", {.check_files = true, .credentials_elsewhere = true});
  EXPECT_TRUE(r.ok()) << lines_of(r.errors);
  EXPECT_EQ(lines_of(r.not_checked).rfind("4 peer.key_file: names the systemd credential 'psk'", 0), 0u)
      << lines_of(r.not_checked);

  // Names systemd would not accept are refused as values.
  for (const char* bad : {"credential:", "credential:a/b", "credential:..", "relative/path"}) {
    r = load_string(fmt::format("[peer]\nenabled = true\nlisten = \"10.0.0.1:1\"\nkey_file = \"{}\"\n", bad),
                    "t.toml");
    EXPECT_NE(lines_of(r.errors).find("peer.key_file: invalid value"), std::string::npos) << bad << lines_of(r.errors);
  }
  for (const char* tls : {"tls_ca_file", "tls_cert_file", "tls_key_file"}) {
    r = load_string(fmt::format("[peer]\nenabled = true\nlisten = \"10.0.0.1:1\"\n{} = \"credential:x\"\n", tls),
                    "t.toml", {.check_files = false});
    EXPECT_EQ(lines_of(r.errors).find("invalid value"), std::string::npos) << tls << lines_of(r.errors);
  }
}

}  // namespace
}  // namespace rdmad::config
