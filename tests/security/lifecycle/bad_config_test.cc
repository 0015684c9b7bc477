// Bad configuration files against a real rdmad: a directory, a FIFO, /dev/zero, a symlink to a
// FIFO, a file over the 4 MiB bound and one every user may write. --check-config and start-up
// must refuse each with an error that names the file, exit 1 within seconds (a FIFO once hung
// both, /dev/zero grew memory until the process died, the rest passed); a config replaced by a
// FIFO and reloaded must not stall clients (it once blocked the control thread for good).
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <functional>
#include <ostream>
#include <string>

#include "lifecycle_util.h"
#include "rdmad/rdmad.h"
#include "unit/client/watchdog.h"

namespace rdmad::test {
namespace {

struct BadFile {
  const char* name;
  // Makes the bad file in `dir`; returns its path.
  std::function<std::string(const TempDir&)> make;
  const char* reason;  // in the error after "<path>: "
};

const BadFile kBadFiles[] = {
    {"directory",
     [](const TempDir& d) {
       const std::string p = d.path() + "/rdmad.toml";
       ::mkdir(p.c_str(), 0755);
       return p;
     },
     "it is a directory"},
    {"fifo",
     [](const TempDir& d) {
       const std::string p = d.path() + "/rdmad.toml";
       ::mkfifo(p.c_str(), 0600);
       return p;
     },
     "it is a FIFO"},
    {"dev_zero", [](const TempDir&) { return std::string("/dev/zero"); }, "it is a character device"},
    {"symlink_to_fifo",
     [](const TempDir& d) {
       const std::string fifo = d.path() + "/fifo";
       const std::string p = d.path() + "/rdmad.toml";
       ::mkfifo(fifo.c_str(), 0600);
       (void)!::symlink(fifo.c_str(), p.c_str());
       return p;
     },
     "it is a FIFO (behind a symlink)"},
    {"oversized",
     [](const TempDir& d) {
       std::string text = daemon_config(d) + "# " + std::string(5u << 20, 'x') + "\n";  // valid TOML
       return d.write("rdmad.toml", text);
     },
     "more than the 4194304 bytes a configuration file may have"},
    {"world_writable",
     [](const TempDir& d) {
       const std::string p = d.write("rdmad.toml", daemon_config(d));
       ::chmod(p.c_str(), 0666);
       return p;
     },
     "every user may write it (mode 0666)"},
};

// rdmad with `args`, its address space capped at 1 GiB for /dev/zero: the old loader read it
// until memory ran out, and on a shared machine that must end in this process, not the OOM killer.
std::vector<std::string> rdmad_argv(const std::string& file, std::vector<std::string> args) {
  std::vector<std::string> argv;
  if (file == "/dev/zero") argv = {"/bin/sh", "-c", "ulimit -v 1048576; exec \"$0\" \"$@\""};
  argv.push_back(binary("daemon/rdmad"));
  for (auto& a : args) argv.push_back(std::move(a));
  return argv;
}

void PrintTo(const BadFile& f, std::ostream* os) { *os << f.name; }

class BadConfigFile : public ::testing::TestWithParam<BadFile> {};

TEST_P(BadConfigFile, CheckConfigRefusesItNamingTheFile) {
  TempDir dir;
  const std::string path = GetParam().make(dir);
  Subprocess p(rdmad_argv(path, {"--check-config", path}));
  const auto code = p.wait_exit(5s);
  ASSERT_TRUE(code.has_value()) << "--check-config " << GetParam().name << " hung:\n" << p.output();
  EXPECT_EQ(*code, 1) << p.output();  // 1: refused; not 0 (passed) and not 134 (crashed)
  // "<path>: cannot read file: it is a FIFO, ..." (or "refused: ..."), one line naming the file.
  const std::string out = p.output();
  const size_t at = out.find(path + ": ");
  ASSERT_NE(at, std::string::npos) << out;
  EXPECT_NE(out.substr(at, out.find('\n', at) - at).find(GetParam().reason), std::string::npos) << out;
}

TEST_P(BadConfigFile, StartRefusesItNamingTheFile) {
  TempDir dir;
  const std::string path = GetParam().make(dir);
  Subprocess p(rdmad_argv(path, {"--config", path}));
  const auto code = p.wait_exit(5s);
  ASSERT_TRUE(code.has_value()) << "rdmad --config " << GetParam().name << " hung:\n" << p.output();
  EXPECT_EQ(*code, 1) << p.output();
  EXPECT_NE(p.output().find(path + ": "), std::string::npos) << p.output();
  EXPECT_NE(p.output().find(GetParam().reason), std::string::npos) << p.output();
  EXPECT_NE(p.output().find("not starting: 1 configuration error(s)"), std::string::npos) << p.output();
}

INSTANTIATE_TEST_SUITE_P(Lifecycle, BadConfigFile, ::testing::ValuesIn(kBadFiles),
                         [](const auto& p) { return std::string(p.param.name); });

// The world-writable case says "refused", not "cannot read file": check its own wording.
TEST(BadConfigFileWording, WorldWritableSaysWhy) {
  TempDir dir;
  const std::string path = kBadFiles[5].make(dir);
  Subprocess p({binary("daemon/rdmad"), "--check-config", path});
  ASSERT_EQ(p.wait_exit(5s), 1) << p.output();
  EXPECT_NE(p.output().find(path + ": refused: every user may write it"), std::string::npos) << p.output();
}

// The running daemon's file is replaced by a FIFO and reloaded (SIGHUP, then rdmactl reload):
// clients keep connecting and registering meanwhile, and each reload counts as failed.
TEST(ReloadBadFile, FifoOnReloadDoesNotBlockClients) {
  TempDir dir;
  const std::string cfg = dir.write("rdmad.toml", daemon_config(dir, true));
  Daemon d(cfg);
  ASSERT_GT(d.metrics_port(), 0);
  const std::string sock = dir.path() + "/run/rdmad.sock";
  ASSERT_EQ(::unlink(cfg.c_str()), 0);
  ASSERT_EQ(::mkfifo(cfg.c_str(), 0600), 0);
  d.process().signal(SIGHUP);
  ASSERT_TRUE(d.process().wait_for_output("reloading config=" + cfg, 5s)) << d.process().output();
  {
    // A stalled control thread never accepts: the old daemon left every client waiting forever.
    Watchdog w(10s, "a client of a daemon reloading a FIFO", [&] { d.process().signal(SIGKILL); });
    const auto t = std::chrono::steady_clock::now();
    rdmad_client* c = nullptr;
    ASSERT_EQ(rdmad_connect(sock.c_str(), &c), RDMAD_OK) << rdmad_last_error(nullptr);
    rdmad_host_buffer buf;
    ASSERT_EQ(rdmad_alloc_host(1 << 20, &buf), RDMAD_OK);
    rdmad_mr* mr = nullptr;
    EXPECT_EQ(rdmad_register_host(c, buf.fd, 0, 1 << 20, RDMAD_ACCESS_LOCAL_WRITE, 0, &mr), RDMAD_OK)
        << rdmad_last_error(c);
    EXPECT_LT(std::chrono::steady_clock::now() - t, 1s);
    EXPECT_EQ(rdmad_deregister(c, mr), RDMAD_OK);
    rdmad_disconnect(c);
    rdmad_free_host(&buf);
  }
  EXPECT_TRUE(d.metric_reaches("rdmad_config_reloads_total{result=\"error\"}", 1, 5s));
  EXPECT_TRUE(d.process().wait_for_output(cfg + ": cannot read file: it is a FIFO", 5s)) << d.process().output();
  // rdmactl reload reads in place, and is refused at once too, with the reason.
  {
    Watchdog w(10s, "rdmactl reload of a FIFO", [&] { d.process().signal(SIGKILL); });
    Subprocess ctl({binary("tools/rdmactl/rdmactl"), "--socket", sock, "reload"});
    EXPECT_EQ(ctl.wait_exit(5s), 1) << ctl.output();
    EXPECT_NE(ctl.output().find("it is a FIFO"), std::string::npos) << ctl.output();
  }
  EXPECT_TRUE(d.metric_reaches("rdmad_config_reloads_total{result=\"error\"}", 2, 5s));
  // Put a good file back: the next reload works, and a burst of SIGHUPs is coalesced, not queued.
  ASSERT_EQ(::unlink(cfg.c_str()), 0);
  dir.write("rdmad.toml", daemon_config(dir, true));
  for (int i = 0; i < 20; ++i) d.process().signal(SIGHUP);
  const auto ok = [&] { return d.metric("rdmad_config_reloads_total{result=\"ok\"}").value_or(0); };
  const auto end = std::chrono::steady_clock::now() + 5s;
  while (ok() < 1 && std::chrono::steady_clock::now() < end) usleep(10'000);
  EXPECT_GE(ok(), 1) << d.process().output();
  EXPECT_LE(ok(), 20);
  d.process().signal(SIGTERM);
  EXPECT_EQ(d.process().wait_exit(5s), 0) << d.process().output();
}

}  // namespace
}  // namespace rdmad::test
