// rdmactl's operator commands against a live daemon with soft NICs: flows, registrations, cc show
// and cc set (live on the soft datapath), reload, exit codes and the admin permission check.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <regex>
#include <string>
#include <vector>

#include "rdmad/rdmad.h"
#include "support/http_get.h"
#include "support/subprocess.h"
#include "support/temp_dir.h"

namespace rdmad::test {
namespace {

using namespace std::chrono_literals;

struct Ctl {
  int exit = -1;
  std::string output;
};

bool metrics_contain(int port, const std::string& needle, std::chrono::milliseconds deadline) {
  const auto end = std::chrono::steady_clock::now() + deadline;
  do {
    if (auto r = http_get("127.0.0.1", port, "/metrics"); r && r->body.find(needle) != std::string::npos)
      return true;
    usleep(10'000);
  } while (std::chrono::steady_clock::now() < end);
  return false;
}

class Rdmactl : public ::testing::Test {
 protected:
  void SetUp() override {
    // Others must reach the socket for the permission test: traversable directory, 0666 socket.
    ::chmod(dir_.path().c_str(), 0711);
    sock_ = dir_.path() + "/run/rdmad.sock";
    config_ = dir_.write("rdmad.toml", config_text("info"));
    daemon_ =
        std::make_unique<Subprocess>(std::vector<std::string>{binary("daemon/rdmad"), "--config", config_});
    ASSERT_TRUE(daemon_->wait_for_output("] ready", 15s)) << daemon_->output();
    std::smatch m;
    const std::string out = daemon_->output();
    ASSERT_TRUE(std::regex_search(out, m, std::regex(R"(metrics url=http://127\.0\.0\.1:(\d+)/metrics)")));
    metrics_port_ = std::stoi(m[1]);
  }
  void TearDown() override {
    if (client_) rdmad_disconnect(client_);
    if (daemon_) {
      daemon_->signal(SIGTERM);
      EXPECT_EQ(daemon_->wait_exit(10s), 0) << daemon_->output();
    }
  }

  std::string config_text(const std::string& log_level) const {
    return fmt::format(
        "[daemon]\nruntime_dir = \"{0}/run\"\nsocket_path = \"{0}/run/rdmad.sock\"\nlog_level = \"{1}\"\n"
        "[metrics]\nlisten = \"127.0.0.1:0\"\n[ipc]\nsocket_mode = \"0666\"\n"
        "[peer]\nenabled = true\nnode_id = \"nodeA\"\nlisten = \"127.0.0.1:0\"\ninsecure = true\n"
        "[cc]\nrpg_ai_rate = 7\n"
        "[[nic]]\nname = \"rail0\"\nbackend = \"soft\"\naddress = \"127.0.0.1\"\nudp_port = 0\n"
        "[[nic]]\nname = \"rail1\"\nbackend = \"soft\"\naddress = \"127.0.0.1\"\nudp_port = 0\n",
        dir_.path(), log_level);
  }

  Ctl ctl(std::vector<std::string> args, std::vector<std::string> prefix = {}) {
    std::vector<std::string> argv = std::move(prefix);
    argv.push_back(binary("tools/rdmactl/rdmactl"));
    argv.push_back("--socket");
    argv.push_back(sock_);
    argv.insert(argv.end(), args.begin(), args.end());
    Subprocess p(argv);
    Ctl c;
    c.exit = p.wait_exit(10s).value_or(-1);
    c.output = p.output();
    return c;
  }

  rdmad_client* client() {
    if (!client_) {
      EXPECT_EQ(rdmad_connect(sock_.c_str(), &client_), RDMAD_OK) << rdmad_last_error(nullptr);
    }
    return client_;
  }

  TempDir dir_;
  std::string sock_;
  std::string config_;
  int metrics_port_ = 0;
  std::unique_ptr<Subprocess> daemon_;
  rdmad_client* client_ = nullptr;
};

TEST_F(Rdmactl, StatusShowsAnInsecurePeerChannel) {
  Ctl text = ctl({"status"});
  ASSERT_EQ(text.exit, 0) << text.output;
  EXPECT_NE(text.output.find("peer:     INSECURE (plaintext, unauthenticated: [peer] insecure = true)"),
            std::string::npos)
      << text.output;
  Ctl json = ctl({"--json", "status"});
  ASSERT_EQ(json.exit, 0) << json.output;
  EXPECT_NE(json.output.find("\"peer_channel\":\"insecure\",\"peer_channel_insecure\":true"), std::string::npos)
      << json.output;
  // The daemon said so at start-up too, at warning.
  EXPECT_NE(daemon_->output().find("warning [peer] peer channel listening node_id=nodeA listen=127.0.0.1:"), std::string::npos)
      << daemon_->output();
  EXPECT_TRUE(metrics_contain(metrics_port_, "rdmad_peer_channel_insecure 1", 5s));
}

TEST_F(Rdmactl, StatusShowsVersionUptimeNodeConfigAndHealth) {
  Ctl text = ctl({"status"});
  ASSERT_EQ(text.exit, 0) << text.output;
  EXPECT_TRUE(std::regex_search(text.output, std::regex(R"(\nversion:  \d+\.\d+\.\d+\S* \(commit \S+\)\n)")))
      << text.output;
  EXPECT_NE(text.output.find("\nnode:     nodeA\n"), std::string::npos) << text.output;
  EXPECT_NE(text.output.find("\nconfig:   " + config_ + "\n"), std::string::npos) << text.output;
  EXPECT_TRUE(std::regex_search(text.output, std::regex(R"(\nuptime:   \d+[smhd].* \(since \d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ\)\n)")))
      << text.output;
  // Two soft NICs up, the peer channel on with no peer to dial: nothing wrong.
  EXPECT_NE(text.output.find("\nhealth:   ok\n"), std::string::npos) << text.output;
  EXPECT_NE(text.output.find("\nnics:     2 (2 up)\n"), std::string::npos) << text.output;
  EXPECT_NE(text.output.find("\npeers:    0 known, 0 ready\n"), std::string::npos) << text.output;
  EXPECT_NE(text.output.find("\nreloads:  0 ok, 0 failed\n"), std::string::npos) << text.output;
  Ctl json = ctl({"--json", "status"});
  ASSERT_EQ(json.exit, 0) << json.output;
  EXPECT_NE(json.output.find("\"node_id\":\"nodeA\",\"config_path\":\"" + config_ + "\""), std::string::npos)
      << json.output;
  EXPECT_NE(json.output.find("\"health\":\"ok\",\"health_reasons\":[],\"nics_up\":2,\"peer_enabled\":true"),
            std::string::npos)
      << json.output;
  EXPECT_TRUE(std::regex_search(json.output, std::regex(R"("uptime_seconds":\d+\.\d{3},)"))) << json.output;
  EXPECT_NE(json.output.find("\"last_reload_error\":null}"), std::string::npos) << json.output;
}

TEST_F(Rdmactl, GidsShowsEachSoftNicsAddress) {
  Ctl json = ctl({"--json", "gids"});
  ASSERT_EQ(json.exit, 0) << json.output;
  for (const char* nic : {"rail0", "rail1"}) {
    EXPECT_NE(json.output.find(fmt::format(
                  "{{\"device\":\"{0}\",\"port\":1,\"index\":0,\"gid\":\"0000:0000:0000:0000:0000:ffff:7f00:0001\","
                  "\"ipv4\":\"127.0.0.1\",\"type\":\"RoCE v2\",\"roce_version\":2,\"netdev\":\"\",\"nic\":\"{0}\"}}",
                  nic)),
              std::string::npos)
        << json.output;
  }
  Ctl text = ctl({"gids"});
  ASSERT_EQ(text.exit, 0) << text.output;
  EXPECT_TRUE(std::regex_search(text.output, std::regex(R"(^DEV +PORT +INDEX +GID +IPv4 +VER +DEV +NIC\n)")))
      << text.output;
  EXPECT_TRUE(std::regex_search(
      text.output, std::regex(R"(\nrail1 +1 +0 +0000:0000:0000:0000:0000:ffff:7f00:0001 +127\.0\.0\.1 +v2 +- +rail1\n)")))
      << text.output;
}

TEST_F(Rdmactl, PeersIsEmptyWithoutPeers) {
  Ctl json = ctl({"--json", "peers"});
  ASSERT_EQ(json.exit, 0) << json.output;
  EXPECT_EQ(json.output, "[]\n");
  Ctl text = ctl({"peers"});
  ASSERT_EQ(text.exit, 0) << text.output;
  EXPECT_NE(text.output.find("(no peers: "), std::string::npos) << text.output;
}

TEST_F(Rdmactl, FlowsListsEveryClientsFlowsWithOwnerAndState) {
  Ctl empty = ctl({"--json", "flows"});
  ASSERT_EQ(empty.exit, 0) << empty.output;
  EXPECT_EQ(empty.output, "[]\n");

  rdmad_flow_attr attr{7, 0, 0};
  rdmad_flow* flow = nullptr;
  ASSERT_EQ(rdmad_flow_open(client(), "nodeB", &attr, &flow), RDMAD_OK) << rdmad_last_error(client_);
  Ctl json = ctl({"--json", "flows"});
  ASSERT_EQ(json.exit, 0) << json.output;
  // nodeB is not a configured peer: the flow waits in "connecting" with nothing in flight.
  EXPECT_NE(json.output.find(fmt::format(
                "{{\"flow_id\":1,\"peer\":\"nodeB\",\"channel\":7,\"state\":\"connecting\",\"in_flight\":0,"
                "\"sq_depth\":256,\"cq_depth\":512,\"owner_uid\":{0},\"owner_pid\":{1},\"tenant\":\"uid {0}\"}}",
                getuid(), getpid())),
            std::string::npos)
      << json.output;
  Ctl table = ctl({"flows"});
  ASSERT_EQ(table.exit, 0) << table.output;
  EXPECT_TRUE(std::regex_search(table.output, std::regex(R"(\n1 +nodeB +7 +connecting +0 +256 +512 )")))
      << table.output;

  rdmad_flow_close(flow);
  Ctl after = ctl({"--json", "flows"});
  EXPECT_EQ(after.output, "[]\n");
}

TEST_F(Rdmactl, RegistrationsListsEveryClientsHandles) {
  EXPECT_EQ(ctl({"--json", "registrations"}).output, "[]\n");
  rdmad_host_buffer buf{};
  ASSERT_EQ(rdmad_alloc_host(1 << 20, &buf), RDMAD_OK);
  rdmad_mr* mr = nullptr;
  ASSERT_EQ(rdmad_register_host(client(), buf.fd, 4096, 65536,
                                RDMAD_ACCESS_LOCAL_WRITE | RDMAD_ACCESS_REMOTE_READ, 0, &mr),
            RDMAD_OK)
      << rdmad_last_error(client_);
  Ctl json = ctl({"--json", "registrations"});
  ASSERT_EQ(json.exit, 0) << json.output;
  EXPECT_NE(json.output.find(fmt::format("{{\"handle\":1,\"kind\":\"host\",\"offset\":4096,\"length\":65536,"
                                         "\"access\":\"local_write,remote_read\",\"pinned_bytes\":65536,"
                                         "\"owner_uid\":{0},\"owner_pid\":{1},\"tenant\":\"uid {0}\"}}",
                                         getuid(), getpid())),
            std::string::npos)
      << json.output;
  Ctl table = ctl({"registrations"});
  EXPECT_TRUE(std::regex_search(table.output, std::regex(R"(\n1 +host +4096 +65536 +65536 )")))
      << table.output;
  EXPECT_NE(table.output.find("uid " + std::to_string(getuid()) + " "), std::string::npos) << table.output;
  EXPECT_EQ(rdmad_deregister(client_, mr), RDMAD_OK);
  EXPECT_EQ(ctl({"--json", "registrations"}).output, "[]\n");
  rdmad_free_host(&buf);
}

TEST_F(Rdmactl, CcShowAndSetChangeASoftNicLive) {
  Ctl show = ctl({"--json", "cc", "show"});
  ASSERT_EQ(show.exit, 0) << show.output;
  // Both NICs run the [cc] profile with its override, on the soft datapath.
  for (const char* nic : {"rail0", "rail1"}) {
    EXPECT_NE(show.output.find(
                  fmt::format("{{\"nic\":\"{}\",\"backend\":\"soft\",\"source\":\"soft datapath (live)\","
                              "\"software\":true,\"knobs\":{{\"dce_tcp_g\":",
                              nic)),
              std::string::npos)
        << show.output;
  }
  EXPECT_EQ(std::regex_search(show.output, std::regex("\"rpg_ai_rate\":7,")), true) << show.output;

  Ctl set = ctl({"cc", "set", "--nic", "rail1", "rpg_ai_rate=42", "cnp_dscp=40"});
  ASSERT_EQ(set.exit, 0) << set.output;
  EXPECT_EQ(set.output, "set 2 knob(s) on 1 NIC(s)\n");
  Ctl rail1 = ctl({"cc", "show", "--nic", "rail1"});
  ASSERT_EQ(rail1.exit, 0) << rail1.output;
  EXPECT_TRUE(std::regex_search(rail1.output, std::regex(R"(\n  rpg_ai_rate +42\n)"))) << rail1.output;
  EXPECT_TRUE(std::regex_search(rail1.output, std::regex(R"(\n  cnp_dscp +40\n)"))) << rail1.output;
  Ctl rail0 = ctl({"cc", "show", "--nic", "rail0"});
  EXPECT_TRUE(std::regex_search(rail0.output, std::regex(R"(\n  rpg_ai_rate +7\n)"))) << rail0.output;

  // Every NIC at once.
  Ctl all = ctl({"--json", "cc", "set", "rpg_ai_rate=9"});
  ASSERT_EQ(all.exit, 0) << all.output;
  EXPECT_EQ(all.output, "{\"nics\":2,\"knobs\":1}\n");
  EXPECT_TRUE(
      std::regex_search(ctl({"cc", "show", "--nic", "rail0"}).output, std::regex(R"(\n  rpg_ai_rate +9\n)")));
}

TEST_F(Rdmactl, CcSetRefusesBadKnobsAndValuesWithoutChangingAnything) {
  Ctl unknown = ctl({"cc", "set", "rpg_ai_rate=11", "no_such_knob=1"});
  EXPECT_EQ(unknown.exit, 1) << unknown.output;
  EXPECT_NE(unknown.output.find("unknown knob no_such_knob"), std::string::npos) << unknown.output;
  Ctl range = ctl({"cc", "set", "cnp_dscp=64"});
  EXPECT_EQ(range.exit, 1) << range.output;
  EXPECT_NE(range.output.find("knob cnp_dscp: 64 is outside 0..63"), std::string::npos) << range.output;
  // Nothing was applied by the refused requests.
  EXPECT_TRUE(std::regex_search(ctl({"cc", "show"}).output, std::regex(R"(\n  rpg_ai_rate +7\n)")));
  Ctl nic = ctl({"cc", "show", "--nic", "rail9"});
  EXPECT_EQ(nic.exit, 1);
  EXPECT_NE(nic.output.find("no [[nic]] named rail9"), std::string::npos) << nic.output;
  // Syntax errors never reach the daemon: usage exit code.
  EXPECT_EQ(ctl({"cc", "set", "rpg_ai_rate"}).exit, 2);
  EXPECT_EQ(ctl({"cc", "set", "rpg_ai_rate=fast"}).exit, 2);
  EXPECT_EQ(ctl({"cc", "set"}).exit, 2);
}

// A profile as rdmad-sim tune writes it (leaf-spine WebSearch at 50% load, docs/tuning.md): every
// dynamics knob, 17 of them, more than one cc set request carries (16).
constexpr const char* kTunedProfile =
    "[profile]\nname = \"websearch-50\"\nbase = \"mlx5\"\n[knobs]\n"
    "dce_tcp_g = 1020\ndce_tcp_rtt = 50\ninitial_alpha_value = 1023\nrate_reduce_monitor_period = 1\n"
    "rpg_time_reset = 59\nrpg_byte_reset = 6055\nrpg_threshold = 4\nrpg_ai_rate = 1\nrpg_hai_rate = 307\n"
    "rpg_min_dec_fac = 39\nrpg_gd = 11\nrpg_min_rate = 1\nrpg_max_rate = 0\nrate_to_set_on_first_cnp = 0\n"
    "clamp_tgt_rate = 0\nclamp_tgt_rate_after_time_inc = 1\nmin_time_between_cnps = 1\n"
    "[tuning]\nscenario = \"leafspine_websearch\"\nseed = 1\n";

TEST_F(Rdmactl, CcSetProfilePushesEveryKnobToEachSoftNicAndReadsItBack) {
  const std::string file = dir_.write("ws.toml", kTunedProfile);
  Ctl set = ctl({"cc", "set", "--profile", file});
  ASSERT_EQ(set.exit, 0) << set.output;
  EXPECT_EQ(set.output.rfind("profile " + file + " \"websearch-50\" (base mlx5, 17 knobs)\n", 0), 0u) << set.output;
  for (const char* nic : {"rail0", "rail1"})
    EXPECT_NE(set.output.find(fmt::format("\nnic {} (soft): soft datapath (live)\n  dce_tcp_g                        1020\n", nic)),
              std::string::npos)
        << set.output;
  EXPECT_NE(set.output.find("\n  min_time_between_cnps            1\n"), std::string::npos) << set.output;
  EXPECT_NE(set.output.find("\nevery NIC runs the profile (2 NIC(s))\n"), std::string::npos) << set.output;
  // What the datapath runs, read separately: the first request's knobs and the second's (the 17th).
  Ctl show = ctl({"cc", "show", "--nic", "rail1"});
  for (const char* knob : {R"(\n  rpg_byte_reset +6055\n)", R"(\n  rpg_hai_rate +307\n)", R"(\n  min_time_between_cnps +1\n)",
                           R"(\n  cnp_dscp +48\n)"})
    EXPECT_TRUE(std::regex_search(show.output, std::regex(knob))) << knob << "\n" << show.output;
  EXPECT_TRUE(daemon_->wait_for_output("dcqcn set live nic=rail1", 5s)) << daemon_->output();

  // One NIC, as JSON: the other keeps what it runs.
  const std::string back = dir_.write("back.toml", "[knobs]\nrpg_time_reset = 300\nrpg_ai_rate = 5\n");
  Ctl one = ctl({"--json", "cc", "set", "--nic", "rail0", "--profile", back});
  ASSERT_EQ(one.exit, 0) << one.output;
  EXPECT_NE(one.output.find("\"nics\":[{\"nic\":\"rail0\",\"backend\":\"soft\",\"source\":\"soft datapath (live)\",\"error\":\"\","
                            "\"knobs\":{\"rpg_time_reset\":{\"wanted\":300,\"now\":300},\"rpg_ai_rate\":{\"wanted\":5,"
                            "\"now\":5}},\"differs\":[]}]}"),
            std::string::npos)
      << one.output;
  EXPECT_TRUE(std::regex_search(ctl({"cc", "show", "--nic", "rail0"}).output, std::regex(R"(\n  rpg_hai_rate +307\n)")));
  EXPECT_TRUE(std::regex_search(ctl({"cc", "show", "--nic", "rail1"}).output, std::regex(R"(\n  rpg_time_reset +59\n)")));
}

TEST_F(Rdmactl, CcSetProfileRefusesABadFileWithoutChangingAnything) {
  const std::string bad = dir_.write("bad.toml", "[profile]\nname = \"x\"\n[knobs]\nrpg_time_reset = 55\nrpg_ai_rate = 0\n");
  Ctl set = ctl({"cc", "set", "--profile", bad});
  EXPECT_EQ(set.exit, 2) << set.output;
  EXPECT_NE(set.output.find("rdmactl: cc set: " + bad + ":5:15: knobs.rpg_ai_rate: 0 is outside [1, 4294967295] (Mb/s)"),
            std::string::npos)
      << set.output;
  Ctl missing = ctl({"cc", "set", "--profile", dir_.path() + "/none.toml"});
  EXPECT_EQ(missing.exit, 2) << missing.output;
  EXPECT_NE(missing.output.find("cannot read profile"), std::string::npos) << missing.output;
  Ctl both = ctl({"cc", "set", "--profile", bad, "rpg_ai_rate=3"});
  EXPECT_EQ(both.exit, 2) << both.output;
  EXPECT_NE(both.output.find("give KNOB=VALUE... or --profile FILE, not both"), std::string::npos) << both.output;
  Ctl show = ctl({"cc", "show"});
  EXPECT_TRUE(std::regex_search(show.output, std::regex(R"(\n  rpg_time_reset +300\n)"))) << show.output;
  EXPECT_TRUE(std::regex_search(show.output, std::regex(R"(\n  rpg_ai_rate +7\n)"))) << show.output;
}

TEST_F(Rdmactl, ReloadCountsOkAndReportsABrokenFile) {
  ASSERT_TRUE(metrics_contain(metrics_port_, "rdmad_config_reloads_total{result=\"ok\"} 0", 5s));
  Ctl ok = ctl({"reload"});
  EXPECT_EQ(ok.exit, 0) << ok.output;
  EXPECT_EQ(ok.output, "configuration reloaded\n");
  EXPECT_TRUE(metrics_contain(metrics_port_, "rdmad_config_reloads_total{result=\"ok\"} 1", 5s));

  dir_.write("rdmad.toml", config_text("loud"));
  Ctl bad = ctl({"reload"});
  EXPECT_EQ(bad.exit, 1) << bad.output;
  EXPECT_NE(bad.output.find("still running on the previous configuration"), std::string::npos) << bad.output;
  EXPECT_NE(bad.output.find("rdmad.toml:4:13: daemon.log_level: invalid value"), std::string::npos)
      << bad.output;
  EXPECT_TRUE(metrics_contain(metrics_port_, "rdmad_config_reloads_total{result=\"error\"} 1", 5s));
  // status says so until a reload succeeds.
  Ctl status = ctl({"status"});
  EXPECT_NE(status.output.find("\nhealth:   degraded: last reload failed: running on the previous configuration\n"),
            std::string::npos)
      << status.output;
  EXPECT_NE(status.output.find("\nreloads:  1 ok, 1 failed; last: 1 error(s), still running"), std::string::npos)
      << status.output;
  dir_.write("rdmad.toml", config_text("info"));
  ASSERT_EQ(ctl({"reload"}).exit, 0);
  EXPECT_NE(ctl({"status"}).output.find("\nhealth:   ok\n"), std::string::npos);
}

TEST_F(Rdmactl, NicsShowsAddressCountersDcqcnAndCcParameters) {
  Ctl text = ctl({"nics"});
  ASSERT_EQ(text.exit, 0) << text.output;
  EXPECT_TRUE(std::regex_search(text.output, std::regex(R"(nic rail0 \(soft, device rail0\): up \d+ Mb/s, gid 127\.0\.0\.1 udp \d+ mtu 4096)")))
      << text.output;
  EXPECT_NE(text.output.find("  traffic      tx "), std::string::npos) << text.output;
  EXPECT_NE(text.output.find("  congestion   cnp sent 0"), std::string::npos) << text.output;
  EXPECT_TRUE(std::regex_search(text.output, std::regex(R"(  cc \(soft datapath \(live\)\)  .*rpg_ai_rate=7)"))) << text.output;
  Ctl json = ctl({"--json", "nics"});
  ASSERT_EQ(json.exit, 0) << json.output;
  EXPECT_TRUE(std::regex_search(json.output, std::regex(R"(^\[\{"index":0,"name":"rail0","backend":"soft","link":"up","speed_mbps":\d+,"device":"rail0")")))
      << json.output;
  EXPECT_NE(json.output.find("\"gid\":\"127.0.0.1\""), std::string::npos) << json.output;
  EXPECT_NE(json.output.find("\"rp_cnp_handled\":0"), std::string::npos) << json.output;
  EXPECT_NE(json.output.find("\"rpg_ai_rate\":7"), std::string::npos) << json.output;
  EXPECT_NE(json.output.find("{\"index\":1,\"name\":\"rail1\""), std::string::npos) << json.output;
}

TEST_F(Rdmactl, AdminCommandsNeedRootOrTheDaemonsUid) {
  if (getuid() != 0) GTEST_SKIP() << "needs root to run rdmactl as another user (nobody) with setpriv";
  if (access("/usr/bin/setpriv", X_OK) != 0) GTEST_SKIP() << "setpriv (util-linux) is not installed";
  const std::vector<std::string> as_nobody = {"/usr/bin/setpriv", "--reuid=65534", "--regid=65534",
                                              "--clear-groups"};
  // The client service itself stays open to others (allowed_uids empty, socket mode 0666).
  Ctl nics = ctl({"nics"}, as_nobody);
  if (nics.exit == 126 || nics.exit == 127 || nics.output.find("Permission denied") != std::string::npos)
    GTEST_SKIP() << "nobody cannot execute the build tree's rdmactl: " << nics.output;
  EXPECT_EQ(nics.exit, 0) << nics.output;
  EXPECT_NE(nics.output.find("rail0"), std::string::npos) << nics.output;
  EXPECT_NE(nics.output.find("counters and CC parameters: run as root"), std::string::npos) << nics.output;
  // status answers everyone; what only operators get, it says how to get.
  Ctl status = ctl({"status"}, as_nobody);
  EXPECT_EQ(status.exit, 0) << status.output;
  EXPECT_NE(status.output.find("(version, uptime, node id, configuration and health: run as root"), std::string::npos)
      << status.output;
  EXPECT_EQ(status.output.find("node:     nodeA"), std::string::npos) << status.output;
  const std::vector<std::vector<std::string>> admin = {
      {"flows"}, {"registrations"}, {"cc", "show"}, {"cc", "set", "rpg_ai_rate=1"}, {"reload"}, {"peers"}, {"gids"}};
  // They go to the admin socket (beside the client socket's directory, mode 0600 in a 0700
  // directory of the daemon's), which this uid may not open: "not allowed" (4), naming the socket.
  const std::string admin_sock = dir_.path() + "/run-admin/admin.sock";
  for (const auto& cmd : admin) {
    Ctl denied = ctl(cmd, as_nobody);
    EXPECT_EQ(denied.exit, 4) << cmd[0] << ": " << denied.output;
    EXPECT_NE(denied.output.find("not allowed to use rdmad's admin socket " + admin_sock +
                                 " (root and the daemon's user only)"),
              std::string::npos)
        << denied.output;
  }
  EXPECT_TRUE(std::regex_search(ctl({"cc", "show"}).output, std::regex(R"(\n  rpg_ai_rate +7\n)")));
}

// Where the admin socket is not, rdmactl says which socket it tried and that it is unreachable (3),
// and never falls back to the client socket.
TEST_F(Rdmactl, AdminCommandsUseTheAdminSocketOnly) {
  Ctl moved = ctl({"--admin-socket", dir_.path() + "/nowhere/admin.sock", "registrations"});
  EXPECT_EQ(moved.exit, 3) << moved.output;
  EXPECT_NE(moved.output.find("cannot reach rdmad's admin socket at " + dir_.path() + "/nowhere/admin.sock"),
            std::string::npos)
      << moved.output;
  // The client socket named as the admin socket: the daemon refuses admin requests there, even to root.
  Ctl wrong = ctl({"--admin-socket", sock_, "registrations"});
  EXPECT_EQ(wrong.exit, 1) << wrong.output;
  EXPECT_NE(wrong.output.find("admin requests go to the admin socket " + dir_.path() + "/run-admin/admin.sock"),
            std::string::npos)
      << wrong.output;
  Ctl right = ctl({"registrations"});
  EXPECT_EQ(right.exit, 0) << right.output;
}

TEST_F(Rdmactl, UnknownOrMissingCommandIsNamed) {
  Ctl typo = ctl({"stauts"});
  EXPECT_EQ(typo.exit, 2) << typo.output;
  EXPECT_NE(typo.output.find("unknown command 'stauts' (commands: status, nics, diagnose"), std::string::npos)
      << typo.output;
  Ctl none = ctl({});
  EXPECT_EQ(none.exit, 2) << none.output;
  EXPECT_NE(none.output.find("a command is required (commands: status,"), std::string::npos) << none.output;
  Ctl cc = ctl({"cc"});
  EXPECT_EQ(cc.exit, 2) << cc.output;
  EXPECT_NE(cc.output.find("show or set is required"), std::string::npos) << cc.output;
}

// diagnose exits 5 exactly when a check says fail, and --json gives each check as an object.
TEST_F(Rdmactl, DiagnoseExitCodeFollowsTheChecksAndJsonIsStructured) {
  Ctl text = ctl({"diagnose"});
  const bool any_fail = std::regex_search(text.output, std::regex("(^|\n)fail "));
  EXPECT_EQ(text.exit, any_fail ? 5 : 0) << text.output;
  EXPECT_NE(text.output.find("ok dmabuf rail0: supported"), std::string::npos) << text.output;
  Ctl json = ctl({"--json", "diagnose"});
  EXPECT_EQ(json.exit, text.exit) << json.output;
  EXPECT_NE(json.output.find("{\"check\":\"dmabuf rail0\",\"status\":\"ok\",\"detail\":\"supported ("),
            std::string::npos)
      << json.output;
  EXPECT_NE(json.output.find("{\"check\":\"peer channel\",\"status\":\"warn\",\"detail\":\"insecure: plaintext"),
            std::string::npos)
      << json.output;
  EXPECT_NE(json.output.find("\"hint\":\"configure [peer] tls or psk (docs/security.md)\"}"), std::string::npos)
      << json.output;
  EXPECT_NE(text.output.find("\n  hint: configure [peer] tls or psk"), std::string::npos) << text.output;
  // One object per check line of the text form (hint lines are not checks), nothing else.
  const auto objects = std::count(json.output.begin(), json.output.end(), '{');
  const auto lines = std::count(text.output.begin(), text.output.end(), '\n');
  size_t hint_lines = 0;
  for (size_t at = text.output.find("\n  hint: "); at != std::string::npos; at = text.output.find("\n  hint: ", at + 1))
    ++hint_lines;
  EXPECT_EQ(objects, lines - static_cast<long>(hint_lines)) << json.output;
}

// A socket this user may not open is "not allowed" (exit 4), not "cannot reach" (exit 3): the
// daemon may well be running.
TEST(RdmactlSocket, PermissionDeniedIsNotUnreachable) {
  if (getuid() != 0) GTEST_SKIP() << "needs root to run rdmactl as another user (nobody) with setpriv";
  if (access("/usr/bin/setpriv", X_OK) != 0) GTEST_SKIP() << "setpriv (util-linux) is not installed";
  TempDir dir;
  ::chmod(dir.path().c_str(), 0711);
  const std::string path = dir.path() + "/rdmad.sock";
  int s = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, path.c_str(), sizeof(addr.sun_path) - 1);
  ASSERT_EQ(bind(s, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0) << std::strerror(errno);
  ASSERT_EQ(listen(s, 4), 0);
  ASSERT_EQ(::chmod(path.c_str(), 0600), 0);
  Subprocess p({"/usr/bin/setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
                binary("tools/rdmactl/rdmactl"), "--socket", path, "status"});
  const int exit = p.wait_exit(10s).value_or(-1);
  ::close(s);
  if (exit == 126 || exit == 127) GTEST_SKIP() << "nobody cannot execute the build tree's rdmactl: " << p.output();
  EXPECT_EQ(exit, 4) << p.output();
  EXPECT_NE(p.output().find("not allowed to use rdmad at " + path), std::string::npos) << p.output();
  EXPECT_NE(p.output().find("Permission denied (uid 65534 may not use the socket"), std::string::npos) << p.output();
}

// A hardware NIC through NIC CC management: on a copy of a fixture host (ConnectX port with the
// vendor driver's DCQCN tree), cc show reads the NIC's knobs and cc set writes the file and reads
// it back.
// A daemon on a copy of the fixture host (a ConnectX port with the vendor driver's DCQCN tree) at
// dir/host, its one [[nic]] rail0 on it; `tweak` may change the copy before the daemon starts.
struct FixtureHost {
  std::filesystem::path root;
  std::string sock;
  std::unique_ptr<Subprocess> daemon;
};
FixtureHost start_fixture_host(const TempDir& dir, const std::function<void(const std::filesystem::path&)>& tweak = {}) {
  namespace fs = std::filesystem;
  FixtureHost h;
  h.root = fs::path(dir.path()) / "host";
  fs::copy(RDMAD_SOURCE_DIR "/tests/data/sysfs/roce-vendor-ecn", h.root,
           fs::copy_options::recursive | fs::copy_options::copy_symlinks);
  if (tweak) tweak(h.root);
  h.sock = dir.path() + "/run/rdmad.sock";
  const std::string cfg = dir.write(
      "rdmad.toml",
      fmt::format("[daemon]\nruntime_dir = \"{0}/run\"\nsocket_path = \"{1}\"\nsysfs_root = \"{2}\"\n"
                  "[metrics]\nlisten = \"127.0.0.1:0\"\n"
                  "[[nic]]\nname = \"rail0\"\nbackend = \"rdma_core\"\ndevice = \"mlx5_0\"\n",
                  dir.path(), h.sock, h.root.string()));
  h.daemon = std::make_unique<Subprocess>(std::vector<std::string>{binary("daemon/rdmad"), "--config", cfg});
  return h;
}

TEST(RdmactlHardware, CcShowAndSetGoThroughTheNicsSysfsTree) {
  TempDir dir;
  FixtureHost host = start_fixture_host(dir);
  Subprocess& d = *host.daemon;
  const auto& root = host.root;
  const std::string& sock = host.sock;
  ASSERT_TRUE(d.wait_for_output("] ready", 15s)) << d.output();
  auto run = [&](std::vector<std::string> args) {
    args.insert(args.begin(), {binary("tools/rdmactl/rdmactl"), "--socket", sock});
    Subprocess p(args);
    Ctl c;
    c.exit = p.wait_exit(10s).value_or(-1);
    c.output = p.output();
    return c;
  };
  Ctl show = run({"cc", "show"});
  ASSERT_EQ(show.exit, 0) << show.output;
  EXPECT_NE(show.output.find("nic rail0 (rdma_core): vendor sysfs /sys/class/net/eth0/ecn\n"),
            std::string::npos)
      << show.output;
  EXPECT_TRUE(std::regex_search(show.output, std::regex(R"(\n  rpg_ai_rate +5\n)"))) << show.output;

  Ctl set = run({"cc", "set", "--nic", "rail0", "rpg_ai_rate=9"});
  ASSERT_EQ(set.exit, 0) << set.output;
  std::ifstream knob(root / "sys/class/net/eth0/ecn/roce_rp/rpg_ai_rate");
  int64_t written = 0;
  knob >> written;
  EXPECT_EQ(written, 9);
  EXPECT_TRUE(std::regex_search(run({"cc", "show"}).output, std::regex(R"(\n  rpg_ai_rate +9\n)")));
  EXPECT_NE(d.output().find("cc knob set nic=rail0 change=\"rpg_ai_rate: 5 -> 9\""), std::string::npos) << d.output();
  // The port's GID table, like show_gids, named by the [[nic]] on it.
  Ctl gids = run({"--json", "gids"});
  ASSERT_EQ(gids.exit, 0) << gids.output;
  EXPECT_NE(gids.output.find("{\"device\":\"mlx5_0\",\"port\":1,\"index\":3,\"gid\":\"0000:0000:0000:0000:0000:ffff:ac10:0503\","
                             "\"ipv4\":\"172.16.5.3\",\"type\":\"RoCE v2\",\"roce_version\":2,\"netdev\":\"eth0\",\"nic\":\"rail0\"}"),
            std::string::npos)
      << gids.output;
  EXPECT_NE(gids.output.find("{\"device\":\"mlx5_0\",\"port\":1,\"index\":0,\"gid\":\"fe80:0000:0000:0000:0e42:a1ff:fe5e:0010\","
                             "\"ipv4\":null,\"type\":\"RoCE v1\",\"roce_version\":1,\"netdev\":\"eth0\",\"nic\":\"rail0\"}"),
            std::string::npos)
      << gids.output;
  EXPECT_TRUE(std::regex_search(run({"gids"}).output,
                                std::regex(R"(\nmlx5_0 +1 +2 +0000:0000:0000:0000:0000:ffff:ac10:0503 +172\.16\.5\.3 +v1 +eth0 +rail0\n)")));
  // The fixture's device cannot be opened (no provider): nothing can be registered on this node.
  Ctl status = run({"status"});
  EXPECT_EQ(status.exit, 0) << status.output;
  EXPECT_NE(status.output.find("\nhealth:   failing: no NIC up; nic rail0 out of service: "), std::string::npos)
      << status.output;
  // The metrics follow the change.
  std::smatch m;
  const std::string out = d.output();
  ASSERT_TRUE(std::regex_search(out, m, std::regex(R"(metrics url=http://127\.0\.0\.1:(\d+)/metrics)")));
  EXPECT_TRUE(metrics_contain(std::stoi(m[1]), "rpg_ai_rate=\"9\"", 5s));
  d.signal(SIGTERM);
  EXPECT_EQ(d.wait_exit(10s), 0) << d.output();
}

// [cc] profile_file: the daemon starts with the profile's knobs on its soft NIC, the [cc] knobs on top.
TEST(RdmactlProfile, TheDaemonStartsWithItsProfileFile) {
  TempDir dir;
  dir.write("ws.toml", kTunedProfile);
  const std::string sock = dir.path() + "/run/rdmad.sock";
  const std::string cfg = dir.write(
      "rdmad.toml", fmt::format("[daemon]\nruntime_dir = \"{0}/run\"\nsocket_path = \"{1}\"\n[metrics]\nlisten = \"127.0.0.1:0\"\n"
                                "[cc]\nprofile_file = \"ws.toml\"\nrpg_ai_rate = 3\n"
                                "[[nic]]\nname = \"rail0\"\nbackend = \"soft\"\naddress = \"127.0.0.1\"\nudp_port = 0\n",
                                dir.path(), sock));
  Subprocess d({binary("daemon/rdmad"), "--config", cfg});
  ASSERT_TRUE(d.wait_for_output("] ready", 15s)) << d.output();
  EXPECT_NE(d.output().find("dcqcn parameters profile=\"file " + dir.path() + "/ws.toml (websearch-50, base mlx5)\""),
            std::string::npos)
      << d.output();
  Subprocess p({binary("tools/rdmactl/rdmactl"), "--socket", sock, "cc", "show"});
  ASSERT_EQ(p.wait_exit(10s), 0) << p.output();
  for (const char* knob : {R"(\n  rpg_time_reset +59\n)", R"(\n  dce_tcp_rtt +50\n)", R"(\n  rpg_ai_rate +3\n)"})
    EXPECT_TRUE(std::regex_search(p.output(), std::regex(knob))) << knob << "\n" << p.output();
  d.signal(SIGTERM);
  EXPECT_EQ(d.wait_exit(10s), 0) << d.output();
}

// A profile pushed to a hardware NIC goes through NIC CC management: every knob file is written and
// read back; a knob the NIC cannot give back (here: its file is missing) is reported, exit 1.
TEST(RdmactlHardware, CcSetProfileWritesTheNicsFilesAndReportsWhatItCannotReadBack) {
  TempDir dir;
  FixtureHost host =
      start_fixture_host(dir, [](const std::filesystem::path& root) {
        std::filesystem::remove(root / "sys/class/net/eth0/ecn/roce_rp/rpg_gd");
      });
  Subprocess& d = *host.daemon;
  const auto ecn = host.root / "sys/class/net/eth0/ecn";
  const std::string& sock = host.sock;
  ASSERT_TRUE(d.wait_for_output("] ready", 15s)) << d.output();
  const std::string file = dir.write("ws.toml", kTunedProfile);
  Subprocess p({binary("tools/rdmactl/rdmactl"), "--socket", sock, "cc", "set", "--profile", file});
  EXPECT_EQ(p.wait_exit(10s), 1) << p.output();
  const std::string out = p.output();
  EXPECT_NE(out.find("\nnic rail0 (rdma_core): vendor sysfs /sys/class/net/eth0/ecn\n"), std::string::npos) << out;
  EXPECT_NE(out.find("\n  the daemon said: "), std::string::npos) << out;
  EXPECT_NE(out.find("rpg_gd: cannot read"), std::string::npos) << out;
  EXPECT_NE(out.find("\n  rpg_gd                           (unreadable; wanted 11)\n"), std::string::npos) << out;
  EXPECT_NE(out.find("\n  rpg_time_reset                   59\n"), std::string::npos) << out;
  EXPECT_NE(out.find("\n1 knob value(s) on the NICs differ from the profile\n"), std::string::npos) << out;
  // Both requests reached the NIC's files.
  const auto knob = [&](const char* side, const char* name) {
    std::ifstream f(ecn / side / name);
    int64_t v = -1;
    f >> v;
    return v;
  };
  EXPECT_EQ(knob("roce_rp", "rpg_time_reset"), 59);
  EXPECT_EQ(knob("roce_rp", "rpg_byte_reset"), 6055);
  EXPECT_EQ(knob("roce_np", "min_time_between_cnps"), 1);
  d.signal(SIGTERM);
  EXPECT_EQ(d.wait_exit(10s), 0) << d.output();
}

}  // namespace
}  // namespace rdmad::test
