// Credential paths that name the wrong kind of thing, against the real binary: `rdmad
// --check-config` and `rdmad --config` both exit 1 within a deadline with an error naming the key,
// the path and what is wrong, and neither crashes (a signal) nor hangs. Also credentials whose
// files are fine but whose contents are not (a garbage certificate, another node's certificate):
// start-up refuses them with a clear error.
//
// Against the code before this change: a key_file that is a directory aborted the daemon (an
// uncaught exception, SIGABRT), /dev/zero grew its memory without end, a FIFO hung start-up, a
// world-readable key was only warned about, and --check-config passed every one of them.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>

#include <functional>

#include "support/subprocess.h"
#include "support/temp_dir.h"
#include "test_pki.h"

namespace rdmad::test {
namespace {

using namespace std::chrono_literals;
using peer::test::CertFiles;
using peer::test::TestPki;
using peer::test::write_file;

struct Outcome {
  std::optional<int> exit;
  std::string output;
};

Outcome run(std::vector<std::string> argv) {
  Subprocess p(std::move(argv));
  Outcome o;
  o.exit = p.wait_exit(10s);  // a hang shows as nullopt (and the child is killed)
  o.output = p.output();
  return o;
}

class BadCredentialFiles : public ::testing::Test {
 protected:
  std::string config(const std::string& peer_keys) {
    return dir_.write("rdmad.toml", fmt::format("[daemon]\nruntime_dir = \"{0}/run\"\nsocket_path = \"{0}/run/s.sock\"\n"
                                                "[metrics]\nlisten = \"127.0.0.1:0\"\n"
                                                "[peer]\nenabled = true\nnode_id = \"node-a\"\nlisten = \"127.0.0.1:0\"\n{1}"
                                                "[[nic]]\nname = \"soft0\"\nbackend = \"soft\"\naddress = \"127.0.0.1\"\n"
                                                "udp_port = 0\n",
                                                dir_.path(), peer_keys));
  }
  // Both entry points refuse the file, naming `key` and saying `why`.
  void expect_refused(const std::string& peer_keys, const std::string& key, const std::string& why) {
    const std::string cfg = config(peer_keys);
    const Outcome check = run({binary("daemon/rdmad"), "--check-config", cfg});
    ASSERT_TRUE(check.exit.has_value()) << "--check-config did not exit within 10 s: " << peer_keys;
    EXPECT_EQ(*check.exit, 1) << check.output;
    EXPECT_NE(check.output.find(key + ": "), std::string::npos) << check.output;
    EXPECT_NE(check.output.find(why), std::string::npos) << check.output;
    const Outcome start = run({binary("daemon/rdmad"), "--config", cfg});
    ASSERT_TRUE(start.exit.has_value()) << "rdmad --config did not exit within 10 s (hung, or started despite the bad file): " << peer_keys;
    EXPECT_EQ(*start.exit, 1) << "not a clean refusal (128 + signal is a crash): " << start.output;
    EXPECT_NE(start.output.find(why), std::string::npos) << start.output;
    EXPECT_NE(start.output.find("not starting"), std::string::npos) << start.output;
  }
  std::string key_file(const std::string& path) { return fmt::format("key_file = \"{}\"\n", path); }

  TempDir dir_;
};

TEST_F(BadCredentialFiles, DirectoryFifoDeviceAndSymlinksToThemAreRefused) {
  const std::string fifo = dir_.path() + "/fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const std::string to_dir = dir_.path() + "/to-dir";
  ASSERT_EQ(::symlink("/", to_dir.c_str()), 0);
  const std::string to_fifo = dir_.path() + "/to-fifo";
  ASSERT_EQ(::symlink(fifo.c_str(), to_fifo.c_str()), 0);
  expect_refused(key_file(dir_.path()), "peer.key_file", "is a directory, not a regular file");
  expect_refused(key_file(fifo), "peer.key_file", "is a FIFO, not a regular file");
  expect_refused(key_file("/dev/zero"), "peer.key_file", "is a character device, not a regular file");
  expect_refused(key_file(to_dir), "peer.key_file", "is a symlink to a directory, not a regular file");
  expect_refused(key_file(to_fifo), "peer.key_file", "is a symlink to a FIFO, not a regular file");
}

TEST_F(BadCredentialFiles, KeysOthersCanReadAndCertificatesOthersCanWriteAreRefused) {
  expect_refused(key_file(write_file(dir_, "world.key", "0123456789abcdef0123456789abcdef\n", 0644)), "peer.key_file",
                 "(mode 0644); a secret must be private: chmod 600 it");
  TestPki pki;
  const CertFiles f = pki.write(dir_, "a", {"node-a"});
  const auto tls = [](const std::string& ca, const std::string& cert, const std::string& key) {
    return fmt::format("tls_ca_file = \"{}\"\ntls_cert_file = \"{}\"\ntls_key_file = \"{}\"\n", ca, cert, key);
  };
  ::chmod(f.key.c_str(), 0604);
  expect_refused(tls(f.ca, f.cert, f.key), "peer.tls_key_file", "(mode 0604); a secret must be private");
  ::chmod(f.key.c_str(), 0600);
  ::chmod(f.ca.c_str(), 0666);
  expect_refused(tls(f.ca, f.cert, f.key), "peer.tls_ca_file", "is writable by group or others (mode 0666)");
  ::chmod(f.ca.c_str(), 0644);
  expect_refused(tls(f.ca, dir_.path(), f.key), "peer.tls_cert_file", "is a directory");
  expect_refused(key_file(write_file(dir_, "big.key", std::string((1 << 20) + 1, 'k'), 0600)), "peer.key_file",
                 "more than the 1048576 a credential file may have");
}

TEST_F(BadCredentialFiles, FilesWhoseContentsAreNotCredentialsStopStartUpClearly) {
  TestPki pki;
  const CertFiles f = pki.write(dir_, "a", {"node-a"});
  const CertFiles other = pki.write(dir_, "c", {"node-c"});
  struct Case {
    std::string keys, why;
  };
  const std::string garbage = write_file(dir_, "garbage.crt", "this is no certificate\n", 0644);
  for (const Case& c : {
           Case{fmt::format("tls_ca_file = \"{}\"\ntls_cert_file = \"{}\"\ntls_key_file = \"{}\"\n", f.ca, garbage, f.key),
                "not a PEM certificate chain"},
           Case{fmt::format("tls_ca_file = \"{}\"\ntls_cert_file = \"{}\"\ntls_key_file = \"{}\"\n", f.ca, other.cert,
                            other.key),
                "does not name this node's id node-a"},
           Case{fmt::format("tls_ca_file = \"{}\"\ntls_cert_file = \"{}\"\ntls_key_file = \"{}\"\n", f.ca, f.cert,
                            other.key),
                "does not belong to certificate file"},
           Case{key_file(write_file(dir_, "short.key", "short\n", 0600)), "need at least 16"},
       }) {
    const Outcome start = run({binary("daemon/rdmad"), "--config", config(c.keys)});
    ASSERT_TRUE(start.exit.has_value()) << "start-up hung";
    EXPECT_EQ(*start.exit, 1) << start.output;
    EXPECT_NE(start.output.find(c.why), std::string::npos) << start.output;
  }
}

}  // namespace
}  // namespace rdmad::test
