// The daemon as a real process: metrics over HTTP, SIGHUP reloads, SIGTERM, systemd notifications.
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <chrono>
#include <regex>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "rdmad/rdmad.h"
#include "support/http_get.h"
#include "support/subprocess.h"
#include "support/temp_dir.h"

namespace rdmad::test {
namespace {

using namespace std::chrono_literals;

std::string config_text(const TempDir& dir, const std::string& level, const std::string& listen = "127.0.0.1:0") {
  return fmt::format(
      "[daemon]\nruntime_dir = \"{0}/run\"\nsocket_path = \"{0}/run/rdmad.sock\"\nlog_level = \"{1}\"\n"
      "[metrics]\nlisten = \"{2}\"\n",
      dir.path(), level, listen);
}

// Polls /metrics until `needle` appears or the deadline passes.
bool metrics_contain(int port, const std::string& needle, std::chrono::milliseconds deadline) {
  const auto end = std::chrono::steady_clock::now() + deadline;
  do {
    if (auto r = http_get("127.0.0.1", port, "/metrics"); r && r->body.find(needle) != std::string::npos) return true;
    usleep(10'000);
  } while (std::chrono::steady_clock::now() < end);
  return false;
}

// The NICs the daemon lists to a client (at most 8; empty, with a test failure, on an error).
std::vector<rdmad_nic_info> query_nics(rdmad_client* client) {
  std::vector<rdmad_nic_info> nics(8);
  size_t count = 0;
  if (rdmad_query_nics(client, nics.data(), nics.size(), &count) != RDMAD_OK) {
    ADD_FAILURE() << rdmad_last_error(client);
    count = 0;
  }
  nics.resize(count);
  return nics;
}

class DaemonProcess : public ::testing::Test {
 protected:
  // Starts rdmad on `config` (with `extra` appended, and `args` on its command line) and returns
  // the metrics port it printed.
  int start(std::vector<std::string> env = {}, std::vector<std::string> args = {}, const std::string& extra = "") {
    config_ = dir_.write("rdmad.toml", config_text(dir_, "info") + extra);
    std::vector<std::string> argv{binary("daemon/rdmad"), "--config", config_};
    argv.insert(argv.end(), args.begin(), args.end());
    proc_ = std::make_unique<Subprocess>(std::move(argv), std::move(env));
    EXPECT_TRUE(proc_->wait_for_output("] ready", 10s)) << proc_->output();
    std::smatch m;
    const std::string out = proc_->output();
    if (!std::regex_search(out, m, std::regex(R"(serving metrics url=http://127\.0\.0\.1:(\d+)/metrics)"))) {
      ADD_FAILURE() << "no metrics URL in output:\n" << out;
      return 0;
    }
    return std::stoi(m[1]);
  }

  TempDir dir_;
  std::string config_;
  std::unique_ptr<Subprocess> proc_;
};

TEST_F(DaemonProcess, ServesBuildInfoOverHttp) {
  const int port = start();
  ASSERT_GT(port, 0);
  const auto r = http_get("127.0.0.1", port, "/metrics");
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->status, 200);
  EXPECT_TRUE(std::regex_search(r->body, std::regex(R"(rdmad_build_info\{commit="[^"]+",version="0\.1\.0"\} 1)")))
      << r->body;
  EXPECT_NE(r->body.find("rdmad_start_time_seconds "), std::string::npos);
  EXPECT_NE(r->body.find("rdmad_config_reloads_total{result=\"ok\"} 0"), std::string::npos);
}

TEST_F(DaemonProcess, SighupAppliesNewLogLevelAndCountsOk) {
  const int port = start();
  ASSERT_GT(port, 0);
  dir_.write("rdmad.toml", config_text(dir_, "debug") + "labels = { rack = \"r9\" }\n");
  proc_->signal(SIGHUP);
  EXPECT_TRUE(metrics_contain(port, "rdmad_config_reloads_total{result=\"ok\"} 1", 5s));
  EXPECT_TRUE(metrics_contain(port, "rdmad_node_info{rack=\"r9\"} 1", 5s));
  EXPECT_TRUE(proc_->wait_for_output("log level changed from=info to=debug", 5s)) << proc_->output();
}

TEST_F(DaemonProcess, SighupWithBrokenFileKeepsServingAndCountsError) {
  const int port = start();
  ASSERT_GT(port, 0);
  dir_.write("rdmad.toml", "[daemon]\nlog_level = \"loud\"\n");
  proc_->signal(SIGHUP);
  EXPECT_TRUE(metrics_contain(port, "rdmad_config_reloads_total{result=\"error\"} 1", 5s));
  // Every error is logged with file:line:column and key.
  EXPECT_TRUE(proc_->wait_for_output(config_ + ":2:13: daemon.log_level: invalid value", 5s)) << proc_->output();
  // Still serving, on the old configuration.
  EXPECT_TRUE(metrics_contain(port, "rdmad_config_reloads_total{result=\"ok\"} 0", 1s));
  EXPECT_FALSE(proc_->wait_exit(0ms).has_value());
}

TEST_F(DaemonProcess, SigtermExitsZeroWithinOneSecond) {
  ASSERT_GT(start(), 0);
  const auto t0 = std::chrono::steady_clock::now();
  proc_->signal(SIGTERM);
  const auto code = proc_->wait_exit(5s);
  const auto elapsed = std::chrono::steady_clock::now() - t0;
  ASSERT_TRUE(code.has_value()) << proc_->output();
  EXPECT_EQ(*code, 0) << proc_->output();
  EXPECT_LT(elapsed, 1s);
}

TEST_F(DaemonProcess, SigintAlsoStopsGracefully) {
  ASSERT_GT(start(), 0);
  proc_->signal(SIGINT);
  EXPECT_EQ(proc_->wait_exit(5s), 0) << proc_->output();
  EXPECT_NE(proc_->output().find("stopped"), std::string::npos);
}

// A fake systemd: an AF_UNIX datagram socket the daemon notifies through NOTIFY_SOCKET.
class NotifySocket {
 public:
  explicit NotifySocket(const std::string& path) : path_(path) {
    fd_ = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::snprintf(addr.sun_path, sizeof addr.sun_path, "%s", path.c_str());
    EXPECT_EQ(bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
    timeval tv{0, 100'000};
    setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  }
  ~NotifySocket() { close(fd_); }
  // Collects datagrams until one contains `needle` or the deadline passes.
  bool wait_for(const std::string& needle, std::chrono::milliseconds deadline) {
    const auto end = std::chrono::steady_clock::now() + deadline;
    while (std::chrono::steady_clock::now() < end) {
      char buf[4096];
      const ssize_t n = recv(fd_, buf, sizeof buf, 0);
      if (n > 0) messages.emplace_back(buf, static_cast<size_t>(n));
      for (const auto& m : messages)
        if (m.find(needle) != std::string::npos) return true;
    }
    return false;
  }
  size_t count(const std::string& needle) const {
    size_t c = 0;
    for (const auto& m : messages) c += m.find(needle) != std::string::npos;
    return c;
  }
  std::vector<std::string> messages;

 private:
  std::string path_;
  int fd_ = -1;
};

TEST_F(DaemonProcess, NotifiesSystemdReadyReloadingStoppingAndWatchdog) {
  NotifySocket notify(dir_.path() + "/notify.sock");
  ASSERT_GT(start({"NOTIFY_SOCKET=" + dir_.path() + "/notify.sock", "WATCHDOG_USEC=100000"}), 0);
  EXPECT_TRUE(notify.wait_for("READY=1", 5s));
  EXPECT_TRUE(notify.wait_for("STATUS=serving metrics at http://127.0.0.1:", 1s));
  // Half of WATCHDOG_USEC: at least three pings within a second.
  const auto end = std::chrono::steady_clock::now() + 5s;
  while (notify.count("WATCHDOG=1") < 3 && std::chrono::steady_clock::now() < end) notify.wait_for("\x01", 50ms);
  EXPECT_GE(notify.count("WATCHDOG=1"), 3u);
  proc_->signal(SIGHUP);
  EXPECT_TRUE(notify.wait_for("RELOADING=1", 5s));
  proc_->signal(SIGTERM);
  EXPECT_TRUE(notify.wait_for("STOPPING=1", 5s));
  EXPECT_EQ(proc_->wait_exit(5s), 0);
}

TEST_F(DaemonProcess, JournalStreamUsesSyslogPrefixesWithoutTimestamps) {
  ASSERT_GT(start({"JOURNAL_STREAM=@pipe"}), 0);
  EXPECT_NE(proc_->output().find("<6>[daemon] ready"), std::string::npos) << proc_->output();
  EXPECT_EQ(proc_->output().find("2026-"), std::string::npos);
}

// A configuration that stops the start-up is reported at error priority under journald too (it is
// written before the loggers exist), so `journalctl -p err` shows why the service is down.
TEST(DaemonStartup, ConfigErrorsCarryTheErrorPriorityUnderJournald) {
  TempDir dir;
  const std::string cfg = dir.write("rdmad.toml", "[daemon]\nlog_level = \"loud\"\n");
  Subprocess journal({binary("daemon/rdmad"), "--config", cfg}, {"JOURNAL_STREAM=@pipe"});
  EXPECT_EQ(journal.wait_exit(10s), 1) << journal.output();
  EXPECT_TRUE(std::regex_search(journal.output(), std::regex("(^|\n)<3>.*rdmad.toml:2.*log_level")))
      << journal.output();
  EXPECT_NE(journal.output().find("<3>rdmad: not starting: 1 configuration error(s)"), std::string::npos)
      << journal.output();
  Subprocess plain({binary("daemon/rdmad"), "--config", cfg});
  EXPECT_EQ(plain.wait_exit(10s), 1) << plain.output();
  EXPECT_EQ(plain.output().find("<3>"), std::string::npos) << plain.output();
  EXPECT_NE(plain.output().find("rdmad: not starting: 1 configuration error(s)"), std::string::npos) << plain.output();
}

// RDMAD_LOG_LEVEL over a different log_level of the file is said at start (never silent), and a
// warning of the configuration reaches the log.
TEST(DaemonStartup, EnvironmentOverrideAndConfigWarningsAreLogged) {
  TempDir dir;
  const std::string cfg = dir.write("rdmad.toml", config_text(dir, "info"));
  Subprocess p({binary("daemon/rdmad"), "--config", cfg}, {"RDMAD_LOG_LEVEL=debug"});
  ASSERT_TRUE(p.wait_for_output("] ready", 10s)) << p.output();
  EXPECT_NE(p.output().find("[config] config warning warning=\"<environment>: RDMAD_LOG_LEVEL: \\\"debug\\\" "
                            "overrides daemon.log_level = \\\"info\\\" of the configuration\""),
            std::string::npos)
      << p.output();
  Subprocess check({binary("daemon/rdmad"), "--check-config", cfg}, {"RDMAD_LOG_LEVEL=debug"});
  EXPECT_EQ(check.wait_exit(10s), 0) << check.output();
  EXPECT_NE(check.output().find("warning: <environment>: RDMAD_LOG_LEVEL"), std::string::npos) << check.output();
  EXPECT_NE(check.output().find(": ok (1 warning)"), std::string::npos) << check.output();
}

TEST(DaemonStartup, SoftNicIsOpenedLoggedAndExported) {
  TempDir dir;
  const std::string cfg = dir.write(
      "rdmad.toml", config_text(dir, "info") +
                        "[[nic]]\nname = \"rail0\"\nbackend = \"soft\"\naddress = \"127.0.0.1\"\nudp_port = 0\n");
  Subprocess p({binary("daemon/rdmad"), "--config", cfg});
  ASSERT_TRUE(p.wait_for_output("] ready", 10s)) << p.output();
  EXPECT_TRUE(std::regex_search(p.output(), std::regex(R"(nic port nic=rail0 backend=soft device=rail0 port=1 link_layer=Ethernet state=ACTIVE speed_mbps=\d+ )")))
      << p.output();
  std::smatch m;
  const std::string out = p.output();
  ASSERT_TRUE(std::regex_search(out, m, std::regex(R"(metrics url=http://127\.0\.0\.1:(\d+)/metrics)")));
  const int port = std::stoi(m[1]);
  EXPECT_TRUE(metrics_contain(port, "rdmad_state_id{device=\"rail0\",port=\"1\"} 4", 5s));
  EXPECT_TRUE(metrics_contain(port, "rdmad_nic_info{device=\"rail0\",port=\"1\",backend=\"soft\",link_layer=\"Ethernet\",nic=\"rail0\"} 1", 5s));
  EXPECT_TRUE(metrics_contain(port, "rdmad_np_cnp_packets_sent_total{device=\"rail0\",port=\"1\"} 0", 5s));
  // The DCQCN histograms exist from the start, empty while no QP is up.
  EXPECT_TRUE(metrics_contain(port, "rdmad_dcqcn_rate_mbps_bucket{device=\"rail0\",port=\"1\",le=\"10\"} 0", 5s));
  EXPECT_TRUE(metrics_contain(port, "rdmad_dcqcn_rate_mbps_count{device=\"rail0\",port=\"1\"} 0", 5s));
  EXPECT_TRUE(metrics_contain(port, "rdmad_dcqcn_alpha_bucket{device=\"rail0\",port=\"1\",le=\"0.001\"} 0", 5s));
  EXPECT_TRUE(metrics_contain(port, "rdmad_dcqcn_alpha_count{device=\"rail0\",port=\"1\"} 0", 5s));
  // Same number of NICs, one setting changed: the reload says it needs a restart.
  dir.write("rdmad.toml", config_text(dir, "info") +
                              "[[nic]]\nname = \"rail0\"\nbackend = \"soft\"\naddress = \"127.0.0.1\"\nudp_port = 0\n"
                              "roce_priority = 5\n");
  p.signal(SIGHUP);
  EXPECT_TRUE(p.wait_for_output("restart needed key=nic", 5s)) << p.output();
  p.signal(SIGTERM);
  EXPECT_EQ(p.wait_exit(5s), 0);
}

// The client service end to end: librdmad talks to a real daemon whose soft NICs register memory
// through the transport interface.
TEST(DaemonClientService, RegistersHostMemoryOnEverySoftNicAndCleansUp) {
  TempDir dir;
  const std::string sock = dir.path() + "/run/rdmad.sock";
  const std::string cfg = dir.write(
      "rdmad.toml", config_text(dir, "info") + "[ipc]\nquota_registrations = 4\n" +
                        "[[nic]]\nname = \"rail0\"\nbackend = \"soft\"\naddress = \"127.0.0.1\"\nudp_port = 0\n"
                        "[[nic]]\nname = \"rail1\"\nbackend = \"soft\"\naddress = \"127.0.0.1\"\nudp_port = 0\n");
  Subprocess d({binary("daemon/rdmad"), "--config", cfg});
  ASSERT_TRUE(d.wait_for_output("] ready", 10s)) << d.output();
  EXPECT_NE(d.output().find("serving clients socket=" + sock), std::string::npos) << d.output();
  std::smatch m;
  const std::string out = d.output();
  ASSERT_TRUE(std::regex_search(out, m, std::regex(R"(metrics url=http://127\.0\.0\.1:(\d+)/metrics)")));
  const int port = std::stoi(m[1]);

  rdmad_client* client = nullptr;
  ASSERT_EQ(rdmad_connect(sock.c_str(), &client), RDMAD_OK) << rdmad_last_error(nullptr);
  const std::vector<rdmad_nic_info> nics = query_nics(client);
  ASSERT_EQ(nics.size(), 2u);
  EXPECT_STREQ(nics[0].name, "rail0");
  EXPECT_STREQ(nics[1].backend, "soft");
  EXPECT_EQ(nics[1].link_state, RDMAD_LINK_UP);

  rdmad_host_buffer buf{};
  ASSERT_EQ(rdmad_alloc_host(1 << 20, &buf), RDMAD_OK);
  rdmad_mr* mr = nullptr;
  ASSERT_EQ(rdmad_register_host(client, buf.fd, 0, buf.length,
                                RDMAD_ACCESS_LOCAL_WRITE | RDMAD_ACCESS_REMOTE_WRITE | RDMAD_ACCESS_REMOTE_READ, 0, &mr),
            RDMAD_OK)
      << rdmad_last_error(client);
  ASSERT_EQ(rdmad_mr_nic_count(mr), 2u);
  rdmad_nic_key k0{}, k1{};
  ASSERT_EQ(rdmad_mr_key(mr, 0, &k0), RDMAD_OK);
  ASSERT_EQ(rdmad_mr_key(mr, 1, &k1), RDMAD_OK);
  EXPECT_EQ(k0.nic_index, 0u);
  EXPECT_EQ(k1.nic_index, 1u);
  EXPECT_NE(k0.rkey, 0u);
  EXPECT_TRUE(metrics_contain(port, "rdmad_registrations{kind=\"host\"} 1", 5s));
  EXPECT_TRUE(metrics_contain(port, "rdmad_clients_connected 1", 5s));
  EXPECT_TRUE(metrics_contain(port, "rdmad_quota_usage_max_ratio 0.25\n", 5s));  // 1 of 4 registrations

  // Without a CUDA driver there is no device memory to register: refused, with the reason.
  rdmad_mr* gpu = nullptr;
  EXPECT_NE(rdmad_register_gpu(client, 0x1000, 4096, RDMAD_ACCESS_LOCAL_WRITE, 0, &gpu), RDMAD_OK);

  // The operator CLI sees the same NICs, and says why GPUDirect is unavailable here.
  Subprocess ctl({binary("tools/rdmactl/rdmactl"), "--socket", sock, "--json", "nics"});
  EXPECT_EQ(ctl.wait_exit(10s), 0) << ctl.output();
  EXPECT_NE(ctl.output().find("{\"index\":1,\"name\":\"rail1\",\"backend\":\"soft\",\"link\":\"up\""),
            std::string::npos)
      << ctl.output();
  Subprocess diag({binary("tools/rdmactl/rdmactl"), "--socket", sock, "diagnose"});
  EXPECT_EQ(diag.wait_exit(10s), 5) << "a failed check is exit 5: " << diag.output();
  // Soft NICs register a dma-buf by mapping it (MemoryRegistrar::maps_dmabuf); GPUDirect still fails.
  EXPECT_NE(diag.output().find("ok dmabuf rail0: supported (the soft backend maps the dma-buf"), std::string::npos)
      << diag.output();
  EXPECT_NE(diag.output().find("fail gpudirect: unavailable"), std::string::npos) << diag.output();
  Subprocess gone({binary("tools/rdmactl/rdmactl"), "--socket", dir.path() + "/nothing.sock", "status"});
  EXPECT_EQ(gone.wait_exit(10s), 3) << gone.output();

  // A client that goes away has its registrations released.
  rdmad_disconnect(client);
  EXPECT_TRUE(metrics_contain(port, "rdmad_registrations{kind=\"host\"} 0", 5s));
  EXPECT_TRUE(metrics_contain(port, "rdmad_clients_connected 0", 5s));
  EXPECT_TRUE(metrics_contain(port, "rdmad_quota_usage_max_ratio 0\n", 5s));
  rdmad_free_host(&buf);
  d.signal(SIGTERM);
  EXPECT_EQ(d.wait_exit(5s), 0) << d.output();
}

// The embedded default: no [[nic]] and no RDMA device (libibverbs lists none here) runs one soft
// NIC on loopback, which serves registrations; the log says so.
TEST(DaemonClientService, WithoutNicsTheEmbeddedSoftNicServesRegistrations) {
  TempDir dir;
  const std::string sock = dir.path() + "/run/rdmad.sock";
  const std::string cfg = dir.write("rdmad.toml", config_text(dir, "info"));
  Subprocess d({binary("daemon/rdmad"), "--config", cfg});
  ASSERT_TRUE(d.wait_for_output("] ready", 10s)) << d.output();
  EXPECT_NE(d.output().find("no nic configured embedded_default=true nics=1 detail=\"no rdma device: one soft nic "
                            "on 127.0.0.1\""),
            std::string::npos)
      << d.output();
  rdmad_client* client = nullptr;
  ASSERT_EQ(rdmad_connect(sock.c_str(), &client), RDMAD_OK) << rdmad_last_error(nullptr);
  const std::vector<rdmad_nic_info> nics = query_nics(client);
  ASSERT_EQ(nics.size(), 1u);
  EXPECT_STREQ(nics[0].name, "soft0");
  EXPECT_STREQ(nics[0].backend, "soft");
  EXPECT_EQ(nics[0].link_state, RDMAD_LINK_UP);
  rdmad_host_buffer buf{};
  ASSERT_EQ(rdmad_alloc_host(1 << 20, &buf), RDMAD_OK);
  rdmad_mr* mr = nullptr;
  ASSERT_EQ(rdmad_register_host(client, buf.fd, 0, buf.length, RDMAD_ACCESS_LOCAL_WRITE | RDMAD_ACCESS_REMOTE_READ, 0,
                                &mr),
            RDMAD_OK)
      << rdmad_last_error(client);
  EXPECT_EQ(rdmad_mr_nic_count(mr), 1u);
  Subprocess ctl({binary("tools/rdmactl/rdmactl"), "--socket", sock, "status"});
  EXPECT_EQ(ctl.wait_exit(10s), 0) << ctl.output();
  EXPECT_NE(ctl.output().find("nics:     1"), std::string::npos) << ctl.output();
  // A reload of the same file (still no [[nic]]) needs no restart.
  d.signal(SIGHUP);
  ASSERT_TRUE(d.wait_for_output("reload done", 10s)) << d.output();
  EXPECT_EQ(d.output().find("restart needed key=nic"), std::string::npos) << d.output();
  rdmad_disconnect(client);
  rdmad_free_host(&buf);
  d.signal(SIGTERM);
  EXPECT_EQ(d.wait_exit(5s), 0) << d.output();
}

// The operator view of a hardware NIC: with daemon.sysfs_root on a fixture host (a ConnectX port
// with the vendor driver's DCQCN tree), the start-up log shows the port and the NIC's DCQCN
// parameters, the port is exported from sysfs, and libibverbs not finding the device leaves only
// its datapath out of service.
TEST(DaemonStartup, HardwareNicOperatorViewFromSysfs) {
  TempDir dir;
  std::string text = config_text(dir, "info");
  text.insert(text.find("[metrics]"), "sysfs_root = \"" RDMAD_SOURCE_DIR "/tests/data/sysfs/roce-vendor-ecn\"\n");
  const std::string cfg = dir.write(
      "rdmad.toml", text + "[[nic]]\nname = \"rail0\"\nbackend = \"rdma_core\"\ndevice = \"mlx5_0\"\nroce_priority = 5\n");
  Subprocess p({binary("daemon/rdmad"), "--config", cfg});
  ASSERT_TRUE(p.wait_for_output("] ready", 10s)) << p.output();
  const std::string out = p.output();
  EXPECT_TRUE(std::regex_search(out, std::regex(R"(mlx5_0 port 1: Ethernet ACTIVE)"))) << out;
  EXPECT_NE(out.find("cc status device=mlx5_0 port=1 summary=\"DCQCN via vendor sysfs /sys/class/net/eth0/ecn"), std::string::npos) << out;
  EXPECT_NE(out.find("nic out of service nic=rail0 device=mlx5_0"), std::string::npos) << out;
  EXPECT_NE(out.find("cc misconfiguration device=mlx5_0 port=1"), std::string::npos) << out;  // CC off on priority 5
  std::smatch m;
  ASSERT_TRUE(std::regex_search(out, m, std::regex(R"(metrics url=http://127\.0\.0\.1:(\d+)/metrics)")));
  const int port = std::stoi(m[1]);
  EXPECT_TRUE(metrics_contain(port, "rdmad_state_id{device=\"mlx5_0\",port=\"1\"} 4", 5s));
  EXPECT_TRUE(metrics_contain(
      port, "rdmad_cc_misconfigured{device=\"mlx5_0\",port=\"1\",reason=\"cc_disabled_on_priority\"} 1", 5s));
  // The same finding in the diagnosis operators get from rdmactl diagnose.
  rdmad_client* c = nullptr;
  ASSERT_EQ(rdmad_connect((dir.path() + "/run/rdmad.sock").c_str(), &c), RDMAD_OK);
  std::string diag(4096, '\0');
  ASSERT_EQ(rdmad_diagnose(c, diag.data(), diag.size()), RDMAD_OK);
  rdmad_disconnect(c);
  EXPECT_TRUE(std::regex_search(diag, std::regex(R"(fail cc mlx5_0/1: .*\(cc_disabled_on_priority; DCQCN via vendor sysfs)")))
      << diag;
  // rdmactl nics lists the NIC in its slot, out of service, with the reason.
  const std::string sock = dir.path() + "/run/rdmad.sock";
  Subprocess ctl({binary("tools/rdmactl/rdmactl"), "--socket", sock, "nics"});
  EXPECT_EQ(ctl.wait_exit(10s), 0) << ctl.output();
  EXPECT_TRUE(std::regex_search(ctl.output(), std::regex(R"(\n0 +rail0 +rdma_core +out )"))) << ctl.output();
  EXPECT_TRUE(std::regex_search(ctl.output(), std::regex(R"(rail0: out of service: device mlx5_0: .+)")))
      << ctl.output();
  Subprocess json({binary("tools/rdmactl/rdmactl"), "--socket", sock, "--json", "nics"});
  EXPECT_EQ(json.wait_exit(10s), 0) << json.output();
  EXPECT_NE(json.output().find("\"out_of_service\":\"device mlx5_0: "), std::string::npos) << json.output();
  p.signal(SIGTERM);
  EXPECT_EQ(p.wait_exit(5s), 0);
}

TEST(DaemonStartup, NicThatCannotOpenIsAStartupErrorNamingIt) {
  TempDir dir;
  // 192.0.2.1 (TEST-NET-1) is not an address of this host, so the soft NIC cannot bind it.
  const std::string cfg = dir.write(
      "rdmad.toml", config_text(dir, "info") +
                        "[[nic]]\nname = \"rail9\"\nbackend = \"soft\"\naddress = \"192.0.2.1\"\nudp_port = 0\n");
  Subprocess p({binary("daemon/rdmad"), "--config", cfg});
  EXPECT_EQ(p.wait_exit(10s), 1) << p.output();
  EXPECT_NE(p.output().find("nic rail9: cannot open with backend soft"), std::string::npos) << p.output();
}

TEST(DaemonStartup, PortInUseIsAClearErrorNotACrash) {
  TempDir dir;
  const int busy = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(busy, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  ASSERT_EQ(listen(busy, 1), 0);
  socklen_t len = sizeof addr;
  getsockname(busy, reinterpret_cast<sockaddr*>(&addr), &len);
  const int port = ntohs(addr.sin_port);
  const std::string cfg = dir.write("rdmad.toml", config_text(dir, "info", fmt::format("127.0.0.1:{}", port)));
  Subprocess p({binary("daemon/rdmad"), "--config", cfg});
  EXPECT_EQ(p.wait_exit(10s), 1) << p.output();
  EXPECT_NE(p.output().find(fmt::format("cannot serve metrics on 127.0.0.1:{}", port)), std::string::npos)
      << p.output();
  close(busy);
}

TEST(DaemonCli, CheckConfigPrintsEveryErrorAndExitsOne) {
  TempDir dir;
  const std::string cfg = dir.write("bad.toml", "[daemon]\nlog_level = \"loud\"\n[metrics]\nlisten = \"x\"\n");
  Subprocess p({binary("daemon/rdmad"), "--check-config", cfg});
  EXPECT_EQ(p.wait_exit(10s), 1);
  EXPECT_NE(p.output().find(cfg + ":2:13: daemon.log_level"), std::string::npos) << p.output();
  EXPECT_NE(p.output().find(cfg + ":4:10: metrics.listen"), std::string::npos) << p.output();
}

TEST(DaemonCli, PrintedDefaultConfigPassesCheckConfig) {
  TempDir dir;
  Subprocess print({binary("daemon/rdmad"), "--print-default-config"});
  ASSERT_EQ(print.wait_exit(10s), 0);
  const std::string cfg = dir.write("default.toml", print.output());
  Subprocess check({binary("daemon/rdmad"), "--check-config", cfg});
  EXPECT_EQ(check.wait_exit(10s), 0) << check.output();
  EXPECT_NE(check.output().find(": ok"), std::string::npos);
}

TEST(DaemonCli, VersionAndInvalidConfigRefusesToStart) {
  Subprocess v({binary("daemon/rdmad"), "--version"});
  EXPECT_EQ(v.wait_exit(10s), 0);
  EXPECT_EQ(v.output().rfind("rdmad 0.1.0 (commit ", 0), 0u) << v.output();
  TempDir dir;
  const std::string cfg = dir.write("bad.toml", "[cc]\nprofile = \"x\"\n");
  Subprocess d({binary("daemon/rdmad"), "--config", cfg});
  EXPECT_EQ(d.wait_exit(10s), 1);
  EXPECT_NE(d.output().find("not starting: 1 configuration error(s)"), std::string::npos) << d.output();
}

// rdmactl's hidden test hook, against this fixture's daemon: exit code and output.
std::pair<int, std::string> ctl_stall(const TempDir& dir, const std::string& thread, const std::string& seconds) {
  Subprocess p({binary("tools/rdmactl/rdmactl"), "--socket", dir.path() + "/run/rdmad.sock", "debug", "stall", thread,
                seconds});
  const int code = p.wait_exit(10s).value_or(-1);
  return {code, p.output()};
}

constexpr const char* kSoftNic = "[[nic]]\nname = \"rail0\"\nbackend = \"soft\"\naddress = \"127.0.0.1\"\nudp_port = 0\n";

// The watchdog means it: a soft NIC datapath stuck inside a pass stops the pings (systemd would
// kill the service), is named in an error line and in rdmad_thread_stalled; when it moves again
// the pings resume.
TEST_F(DaemonProcess, WatchdogStopsPingingWhileADatapathThreadIsStalled) {
  NotifySocket notify(dir_.path() + "/notify.sock");
  // WATCHDOG_USEC = 1 s: pings every 500 ms, a thread busy without progress for 500 ms is stalled.
  const int port =
      start({"NOTIFY_SOCKET=" + dir_.path() + "/notify.sock", "WATCHDOG_USEC=1000000"}, {"--enable-test-hooks"}, kSoftNic);
  ASSERT_GT(port, 0);
  EXPECT_NE(proc_->output().find("test hooks enabled"), std::string::npos) << proc_->output();
  EXPECT_NE(proc_->output().find("watchdog threads=datapath:rail0,control "), std::string::npos) << proc_->output();
  ASSERT_TRUE(notify.wait_for("READY=1", 5s));
  // Healthy and idle: pings arrive.
  auto until = std::chrono::steady_clock::now() + 5s;
  while (notify.count("WATCHDOG=1") < 3 && std::chrono::steady_clock::now() < until) notify.wait_for("\x01", 50ms);
  ASSERT_GE(notify.count("WATCHDOG=1"), 3u);
  EXPECT_TRUE(metrics_contain(port, "rdmad_thread_stalled{thread=\"datapath:rail0\"} 0", 5s));
  // A name the daemon does not have is refused, with the names it has.
  const auto [bad_code, bad_out] = ctl_stall(dir_, "datapath:nope", "1");
  EXPECT_EQ(bad_code, 1) << bad_out;
  EXPECT_NE(bad_out.find("datapath:rail0"), std::string::npos) << bad_out;

  const auto [code, out] = ctl_stall(dir_, "datapath:rail0", "4");
  ASSERT_EQ(code, 0) << out;
  ASSERT_TRUE(proc_->wait_for_output("thread stalled thread=datapath:rail0", 5s)) << proc_->output();
  // A scrape does not wait for the stalled datapath: the stall is in it, beside the NIC's counters
  // (read without the datapath thread) — within a second, while the stall lasts 4 s.
  const auto scraped = std::chrono::steady_clock::now();
  EXPECT_TRUE(metrics_contain(port, "rdmad_thread_stalled{thread=\"datapath:rail0\"} 1", 1s));
  EXPECT_LT(std::chrono::steady_clock::now() - scraped, 1500ms);
  EXPECT_TRUE(metrics_contain(port, "rdmad_datapath_sleeps_total{device=", 1s));
  // From the error on, no ping until the thread moves again (the stall lasts 4 s).
  notify.wait_for("\x01", 150ms);  // take what was sent before the error (already queued)
  const size_t pings = notify.count("WATCHDOG=1");
  notify.wait_for("\x01", 1500ms);
  EXPECT_EQ(notify.count("WATCHDOG=1"), pings);
  EXPECT_EQ(proc_->output().find("thread progresses again"), std::string::npos) << proc_->output();
  // The stall ends: the thread is healthy again and the pings resume.
  ASSERT_TRUE(proc_->wait_for_output("thread progresses again thread=datapath:rail0", 10s)) << proc_->output();
  until = std::chrono::steady_clock::now() + 5s;
  while (notify.count("WATCHDOG=1") < pings + 2 && std::chrono::steady_clock::now() < until)
    notify.wait_for("\x01", 50ms);
  EXPECT_GE(notify.count("WATCHDOG=1"), pings + 2);
  EXPECT_TRUE(metrics_contain(port, "rdmad_thread_stalled{thread=\"datapath:rail0\"} 0", 5s));
}

// The flow engine is watched too, and a stall of it shows in rdmad_thread_stalled while it lasts
// (a scrape does not wait for the engine).
TEST_F(DaemonProcess, WatchdogNamesAStalledFlowEngineInTheMetrics) {
  NotifySocket notify(dir_.path() + "/notify.sock");
  const int port = start({"NOTIFY_SOCKET=" + dir_.path() + "/notify.sock", "WATCHDOG_USEC=1000000"},
                         {"--enable-test-hooks"},
                         std::string(kSoftNic) +
                             "[peer]\nenabled = true\nnode_id = \"nodeA\"\nlisten = \"127.0.0.1:0\"\ninsecure = true\n");
  ASSERT_GT(port, 0);
  EXPECT_NE(proc_->output().find("watchdog threads=datapath:rail0,flow-engine,control "), std::string::npos)
      << proc_->output();
  ASSERT_TRUE(notify.wait_for("READY=1", 5s));
  EXPECT_TRUE(metrics_contain(port, "rdmad_thread_stalled{thread=\"flow-engine\"} 0", 5s));
  const auto [code, out] = ctl_stall(dir_, "flow-engine", "3");
  ASSERT_EQ(code, 0) << out;
  ASSERT_TRUE(proc_->wait_for_output("thread stalled thread=flow-engine", 5s)) << proc_->output();
  EXPECT_TRUE(metrics_contain(port, "rdmad_thread_stalled{thread=\"flow-engine\"} 1", 2s));
  EXPECT_TRUE(metrics_contain(port, "rdmad_thread_stalled{thread=\"datapath:rail0\"} 0", 1s));
  notify.wait_for("\x01", 150ms);  // take what was sent before the error (already queued)
  const size_t pings = notify.count("WATCHDOG=1");
  notify.wait_for("\x01", 1000ms);
  EXPECT_EQ(notify.count("WATCHDOG=1"), pings);
  ASSERT_TRUE(proc_->wait_for_output("thread progresses again thread=flow-engine", 10s)) << proc_->output();
  EXPECT_TRUE(metrics_contain(port, "rdmad_thread_stalled{thread=\"flow-engine\"} 0", 5s));
}

TEST_F(DaemonProcess, StallHookIsRefusedWithoutTheFlagAndNamesTheThreads) {
  ASSERT_GT(start({}, {}, kSoftNic), 0);
  auto [code, out] = ctl_stall(dir_, "datapath:rail0", "1");
  EXPECT_EQ(code, 1) << out;
  EXPECT_NE(out.find("--enable-test-hooks"), std::string::npos) << out;
  EXPECT_EQ(proc_->output().find("test hooks enabled"), std::string::npos);
}

}  // namespace
}  // namespace rdmad::test
