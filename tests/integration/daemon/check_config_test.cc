// rdmad --check-config runs the start-up checks that need no start: the credential files as the
// service's user reads them (User=rdmad cannot read a root-only 0600 key), systemd credentials
// (credential:NAME in $CREDENTIALS_DIRECTORY, LoadCredential=), NIC devices and addresses, and the
// peer channel's coherence; it names what it could not check. Start-up agrees with it.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <string>
#include <vector>

#include "support/subprocess.h"
#include "support/temp_dir.h"

namespace rdmad::test {
namespace {

using namespace std::chrono_literals;

constexpr const char* kKey = "a pre-shared key of the check-config test\n";

struct Outcome {
  int exit = -1;
  std::string output;
};

Outcome rdmad(std::vector<std::string> args, std::vector<std::string> env = {}) {
  args.insert(args.begin(), binary("daemon/rdmad"));
  Subprocess p(args, std::move(env));
  Outcome r;
  r.exit = p.wait_exit(20s).value_or(-1);
  r.output = p.output();
  return r;
}

class CheckConfig : public ::testing::Test {
 protected:
  void SetUp() override { ::chmod(dir_.path().c_str(), 0711); }  // other users may traverse it

  // A daemon with one soft NIC on loopback and the peer channel on with `key_file`.
  std::string config(const std::string& key_file, const std::string& nic = "") const {
    return dir_.write(
        "rdmad.toml",
        fmt::format("[daemon]\nruntime_dir = \"{0}/run\"\nsocket_path = \"{0}/run/rdmad.sock\"\n"
                    "[metrics]\nlisten = \"127.0.0.1:0\"\n"
                    "[peer]\nenabled = true\nnode_id = \"node-a\"\nlisten = \"127.0.0.1:0\"\nkey_file = \"{1}\"\n{2}",
                    dir_.path(), key_file,
                    nic.empty() ? "[[nic]]\nname = \"rail0\"\nbackend = \"soft\"\naddress = \"127.0.0.1\"\nudp_port = 0\n"
                                : nic));
  }
  std::string key(const std::string& name) const {
    const std::string p = dir_.write(name, kKey);
    ::chmod(p.c_str(), 0600);
    return p;
  }

  TempDir dir_;
};

TEST_F(CheckConfig, GoodFileIsOk) {
  const std::string cfg = config(key("peer.key"));
  Outcome r = rdmad({"--check-config", cfg});
  EXPECT_EQ(r.exit, 0) << r.output;
  EXPECT_NE(r.output.find(cfg + ": ok"), std::string::npos) << r.output;
}

// The documented 0600 root-owned key: root reads it, the service's user does not. --check-config
// as root checks it as that user, in a child that took the user's ids.
TEST_F(CheckConfig, RootOnlyKeyIsUnreadableForTheServiceUser) {
  if (getuid() != 0) GTEST_SKIP() << "needs root to check files as another user";
  const std::string k = key("peer.key");
  const std::string cfg = config(k);
  Outcome as_nobody = rdmad({"--check-config", cfg, "--user", "nobody"});
  EXPECT_EQ(as_nobody.exit, 1) << as_nobody.output;
  EXPECT_NE(as_nobody.output.find("note: files checked as user nobody (uid 65534, gid 65534)\n"), std::string::npos)
      << as_nobody.output;
  EXPECT_NE(as_nobody.output.find("peer.key_file: key file " + k + ": Permission denied"), std::string::npos)
      << as_nobody.output;
  EXPECT_NE(as_nobody.output.find(cfg + ": 1 error(s)"), std::string::npos) << as_nobody.output;
  // Readable by that user (its own 0600 file): fine.
  ASSERT_EQ(::chown(k.c_str(), 65534, 65534), 0);
  Outcome owned = rdmad({"--check-config", cfg, "--user", "nobody"});
  EXPECT_EQ(owned.exit, 0) << owned.output;
  EXPECT_NE(owned.output.find(cfg + ": ok"), std::string::npos) << owned.output;
  EXPECT_EQ(rdmad({"--check-config", cfg, "--user", "no-such-user-here"}).exit, 1);
  // --user belongs to --check-config.
  Outcome alone = rdmad({"--user", "nobody"});
  EXPECT_NE(alone.exit, 0) << alone.output;
  EXPECT_NE(alone.output.find("--user requires --check-config"), std::string::npos) << alone.output;
}

// key_file = "credential:NAME" is $CREDENTIALS_DIRECTORY/NAME (systemd's LoadCredential=NAME:PATH).
TEST_F(CheckConfig, SystemdCredentialResolvesInCredentialsDirectory) {
  std::filesystem::create_directory(dir_.path() + "/creds");
  const std::string k = dir_.write("creds/peer-psk", kKey);
  ::chmod(k.c_str(), 0600);
  const std::string cfg = config("credential:peer-psk");
  const std::string env = "CREDENTIALS_DIRECTORY=" + dir_.path() + "/creds";
  Outcome in_service = rdmad({"--check-config", cfg}, {env});
  EXPECT_EQ(in_service.exit, 0) << in_service.output;
  EXPECT_NE(in_service.output.find(cfg + ": ok"), std::string::npos) << in_service.output;
  EXPECT_EQ(in_service.output.find("not checked"), std::string::npos) << in_service.output;

  // Outside the service the credential cannot be checked: it says so, and does not pass it over.
  Outcome outside = rdmad({"--check-config", cfg}, {"CREDENTIALS_DIRECTORY="});
  EXPECT_EQ(outside.exit, 0) << outside.output;
  EXPECT_NE(outside.output.find("not checked: " + cfg +
                                ":10:12: peer.key_file: names the systemd credential 'peer-psk', but "
                                "$CREDENTIALS_DIRECTORY is not set"),
            std::string::npos)
      << outside.output;
  EXPECT_NE(outside.output.find(cfg + ": ok (1 check not run)"), std::string::npos) << outside.output;

  // A credential that is not there is an error like a missing file.
  std::filesystem::remove(k);
  Outcome missing = rdmad({"--check-config", cfg}, {env});
  EXPECT_EQ(missing.exit, 1) << missing.output;
  EXPECT_NE(missing.output.find("key file " + dir_.path() + "/creds/peer-psk: No such file or directory"),
            std::string::npos)
      << missing.output;
  // Start-up needs the directory.
  Outcome start = rdmad({"--config", cfg}, {"CREDENTIALS_DIRECTORY="});
  EXPECT_EQ(start.exit, 1) << start.output;
  EXPECT_NE(start.output.find("peer.key_file: names the systemd credential 'peer-psk'"), std::string::npos)
      << start.output;
}

TEST_F(CheckConfig, CredentialSettingsMustBePathsOrCredentialNames) {
  Outcome r = rdmad({"--check-config", config("credential:../etc/shadow")});
  EXPECT_EQ(r.exit, 1) << r.output;
  EXPECT_NE(r.output.find("peer.key_file: invalid value"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("credential:NAME (a systemd credential)"), std::string::npos) << r.output;
}

// A hardware NIC whose device does not exist: the daemon would keep it out of service and retry
// it; with the peer channel on, no NIC would carry flows until then.
TEST_F(CheckConfig, PeerEnabledWithNoNicInServiceIsNamed) {
  const std::string cfg = config(key("peer.key"), "[[nic]]\nname = \"rail0\"\nbackend = \"rdma_core\"\n"
                                                  "device = \"mlx5_check_config_absent\"\n");
  Outcome r = rdmad({"--check-config", cfg});
  EXPECT_EQ(r.exit, 0) << r.output;
  EXPECT_NE(r.output.find("warning: nic[0] rail0: device mlx5_check_config_absent not found"), std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("warning: peer: the peer channel is on but no NIC would be in service at start"),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find(cfg + ": ok (2 warnings)"), std::string::npos) << r.output;
  // With a soft NIC that cannot open beside it, nothing could ever carry a flow: an error.
  const std::string both = config(key("peer2.key"), "[[nic]]\nname = \"rail0\"\nbackend = \"soft\"\n"
                                                     "address = \"192.0.2.77\"\nudp_port = 0\n");
  Outcome bad = rdmad({"--check-config", both});
  EXPECT_EQ(bad.exit, 1) << bad.output;
  EXPECT_NE(bad.output.find("\npeer: the peer channel is on but no NIC would be in service at start: flows would "
                            "have no rail (fix the [[nic]] findings"),
            std::string::npos)
      << bad.output;
}

// Addresses start-up binds: a soft NIC's and the peer channel's must be this host's.
TEST_F(CheckConfig, AddressesThatAreNotLocalFail) {
  const std::string cfg = config(key("peer.key"), "[[nic]]\nname = \"rail0\"\nbackend = \"soft\"\n"
                                                  "address = \"192.0.2.77\"\nudp_port = 0\n");
  Outcome r = rdmad({"--check-config", cfg});
  EXPECT_EQ(r.exit, 1) << r.output;
  EXPECT_NE(r.output.find("nic[0] rail0: address 192.0.2.77: not an address of this host (a soft NIC binds to it: "
                          "start-up would fail)"),
            std::string::npos)
      << r.output;
  // As it does.
  Outcome start = rdmad({"--config", cfg});
  EXPECT_EQ(start.exit, 1) << start.output;

  std::string text = fmt::format(
      "[daemon]\nruntime_dir = \"{0}/run\"\nsocket_path = \"{0}/run/rdmad.sock\"\n[metrics]\nlisten = \"127.0.0.1:0\"\n"
      "[peer]\nenabled = true\nnode_id = \"node-a\"\nlisten = \"192.0.2.77:18515\"\nkey_file = \"{1}\"\n"
      "[[nic]]\nname = \"rail0\"\nbackend = \"soft\"\naddress = \"127.0.0.1\"\nudp_port = 0\n",
      dir_.path(), key("peer2.key"));
  Outcome listen = rdmad({"--check-config", dir_.write("listen.toml", text)});
  EXPECT_EQ(listen.exit, 1) << listen.output;
  EXPECT_NE(listen.output.find("peer.listen: 192.0.2.77: not an address of this host"), std::string::npos)
      << listen.output;
}

// What start-up makes and takes on the host: a runtime directory that is a file, a sysfs root that
// is not there, a metrics port someone else listens on.
TEST_F(CheckConfig, HostDirectoriesAndPortsAreChecked) {
  const int taken = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ASSERT_GE(taken, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(taken, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  ASSERT_EQ(::listen(taken, 1), 0);
  socklen_t len = sizeof a;
  ASSERT_EQ(::getsockname(taken, reinterpret_cast<sockaddr*>(&a), &len), 0);
  const int port = ntohs(a.sin_port);
  const std::string file = dir_.write("not-a-dir", "x");
  const std::string nic = "[[nic]]\nname = \"rail0\"\nbackend = \"soft\"\naddress = \"127.0.0.1\"\nudp_port = 0\n";
  const auto cfg = [&](const std::string& runtime, const std::string& sysfs, int metrics_port) {
    return dir_.write("host.toml", fmt::format("[daemon]\nruntime_dir = \"{0}\"\nsocket_path = \"{1}/run/rdmad.sock\"\n"
                                               "sysfs_root = \"{2}\"\n[metrics]\nlisten = \"127.0.0.1:{3}\"\n{4}",
                                               runtime, dir_.path(), sysfs, metrics_port, nic));
  };
  Outcome bad = rdmad({"--check-config", cfg(file, dir_.path() + "/no-such-root", port)});
  EXPECT_EQ(bad.exit, 1) << bad.output;
  EXPECT_NE(bad.output.find("daemon.runtime_dir: " + file + " exists and is not a directory"), std::string::npos)
      << bad.output;
  EXPECT_NE(bad.output.find("daemon.sysfs_root: " + dir_.path() + "/no-such-root: no such directory"), std::string::npos)
      << bad.output;
  EXPECT_NE(bad.output.find(fmt::format("metrics.listen: 127.0.0.1:{}: Address already in use", port)), std::string::npos)
      << bad.output;
  // As start-up does.
  EXPECT_EQ(rdmad({"--config", cfg(file, "/", 0)}).exit, 1);
  // A port in use alone is a warning (a running daemon holds its own), and a root without sys/ too.
  std::filesystem::create_directories(dir_.path() + "/empty-root");
  Outcome warned = rdmad({"--check-config", cfg(dir_.path() + "/run", dir_.path() + "/empty-root", port)});
  EXPECT_EQ(warned.exit, 0) << warned.output;
  EXPECT_NE(warned.output.find("has no sys/"), std::string::npos) << warned.output;
  EXPECT_NE(warned.output.find("a running rdmad holds it until it restarts"), std::string::npos) << warned.output;
  ::close(taken);
  Outcome good = rdmad({"--check-config", cfg(dir_.path() + "/run", "/", port)});
  EXPECT_EQ(good.exit, 0) << good.output;
  EXPECT_EQ(good.output.find("metrics.listen"), std::string::npos) << good.output;
}

// Without root, another user's view cannot be checked: it says so.
TEST_F(CheckConfig, WithoutRootTheServiceUsersViewIsNotChecked) {
  if (getuid() != 0) GTEST_SKIP() << "needs root to run rdmad as another user (setpriv)";
  if (access("/usr/bin/setpriv", X_OK) != 0) GTEST_SKIP() << "setpriv (util-linux) is not installed";
  // Checking as root needs root: nobody cannot.
  const std::string text = fmt::format(
      "[daemon]\nruntime_dir = \"{0}/run\"\nsocket_path = \"{0}/run/rdmad.sock\"\n[metrics]\nlisten = \"127.0.0.1:0\"\n",
      dir_.path());
  const std::string plain = dir_.write("plain.toml", text);
  Subprocess p({"/usr/bin/setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", binary("daemon/rdmad"),
                "--check-config", plain, "--user", "root"});
  const int exit = p.wait_exit(20s).value_or(-1);
  if (exit == 126 || exit == 127) GTEST_SKIP() << "nobody cannot execute the build tree's rdmad: " << p.output();
  EXPECT_EQ(exit, 0) << p.output();
  EXPECT_NE(p.output().find("not checked: files as user root: only root can take another user's identity"),
            std::string::npos)
      << p.output();
  EXPECT_NE(p.output().find(plain + ": ok (1 check not run)"), std::string::npos) << p.output();
}

}  // namespace
}  // namespace rdmad::test
