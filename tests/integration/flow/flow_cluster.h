// Two (or more) real rdmad processes on loopback, each with soft NICs, peered over TCP; the test
// process is the client of both (one librdmad connection per daemon).
#pragma once

#include <netinet/in.h>
#include <sys/stat.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <regex>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "rdmad/rdmad.h"
#include "support/fill_pattern.h"
#include "support/free_port.h"
#include "support/http_get.h"
#include "support/subprocess.h"
#include "support/temp_dir.h"

namespace rdmad::test {

using namespace std::chrono_literals;

// Polls `f` every 10 ms until it holds or `deadline` passes.
template <class F>
bool eventually(F&& f, std::chrono::milliseconds deadline) {
  const auto end = std::chrono::steady_clock::now() + deadline;
  do {
    if (f()) return true;
    usleep(10'000);
  } while (std::chrono::steady_clock::now() < end);
  return false;
}

struct NicSpec {
  std::string address;  // 127.0.0.x
  int udp_port = 0;     // 0: a free one
  std::string advertise;  // "ip:port" peers send to (a fabric port in front of this NIC), or ""
  std::string options = {};  // more keys of the [[nic]] table ("datapath_threads = 2\n")
  std::string backend = "soft";  // "dpdk": options names its devargs; udp_port 0 stands for 4791
};

struct NodeSpec {
  std::string id;
  std::vector<NicSpec> nics;
  std::string extra;  // more TOML appended to the file (e.g. [flow] keys)
  std::string key_file;
  int qp_timeout = 14;
  std::vector<std::string> wrapper = {};  // argv prefix, e.g. {"ip", "netns", "exec", "ns"}
  std::string peer_host = "127.0.0.1";    // where this node's peer channel listens  // local ACK timeout 4.096 µs · 2^n (67 ms: scheduling gaps on a loaded machine are not losses)
  // More [peer] keys (limits, or credentials of the test's own: tls_* files, insecure = true). Unless
  // they name credentials or key_file is set, the node uses kTestClusterKey, written into its temp dir.
  std::string peer_keys = "";
  std::string daemon = "daemon/rdmad";  // the daemon binary, relative to the build directory
  // Run under rdmad-supervise (its descriptor store keeps the sessions across restart()).
  bool supervised = false;
};

// The pre-shared key of the test cluster: every node that brings no credentials of its own has it,
// so test daemons peer over TLS 1.3 like production ones (the key is no secret; the dir is private).
inline constexpr const char* kTestClusterKey = "rdmad integration test cluster key\n";

class Node {
 public:
  Node(NodeSpec spec, int peer_port) : spec_(std::move(spec)), peer_port_(peer_port) {
    for (auto& n : spec_.nics) {
      picked_.push_back(n.udp_port == 0 && n.backend == "soft");
      if (n.udp_port == 0) n.udp_port = free_port(SOCK_DGRAM);
    }
  }
  ~Node() {
    if (client_) rdmad_disconnect(client_);
  }

  // Writes the config (dialling `dial`: id -> peer port) and starts the daemon. A NIC port this
  // node picked itself (free_port) can be taken by a test running beside it before the daemon
  // binds it: the daemon then exits with "Address already in use", and it starts again on fresh
  // ports (at most twice).
  bool start(const std::vector<std::pair<std::string, int>>& dial, const std::string& dial_host = "127.0.0.1") {
    for (int attempt = 0;; ++attempt) {
      const bool last = attempt == 2 || std::find(picked_.begin(), picked_.end(), true) == picked_.end();
      if (start_once(dial, dial_host, last)) return true;
      if (last || proc_->output().find("Address already in use") == std::string::npos) {
        if (!last) ADD_FAILURE() << spec_.id << " did not start:\n" << proc_->output();
        return false;
      }
      proc_.reset();
      for (size_t i = 0; i < spec_.nics.size(); ++i)
        if (picked_[i]) spec_.nics[i].udp_port = free_port(SOCK_DGRAM);
    }
  }

  bool start_once(const std::vector<std::pair<std::string, int>>& dial, const std::string& dial_host, bool report) {
    dial_ = dial;
    dial_host_ = dial_host;
    std::string t = fmt::format(
        "[daemon]\nruntime_dir = \"{0}/run\"\nsocket_path = \"{0}/run/rdmad.sock\"\nlog_level = \"info\"\n"
        "[metrics]\nlisten = \"127.0.0.1:0\"\n[peer]\nenabled = true\nnode_id = \"{1}\"\n"
        "listen = \"{4}:{2}\"\nreconnect_min_ms = 50\nreconnect_max_ms = 500\nqp_timeout = {3}\n"
        "keepalive_interval_ms = 1000\n",
        dir_.path(), spec_.id, peer_port_, spec_.qp_timeout, spec_.peer_host);
    if (!spec_.key_file.empty()) {
      t += fmt::format("key_file = \"{}\"\n", spec_.key_file);
    } else if (spec_.peer_keys.find("tls_cert_file") == std::string::npos &&
               spec_.peer_keys.find("insecure") == std::string::npos) {
      const std::string key = dir_.write("peer.key", kTestClusterKey);
      ::chmod(key.c_str(), 0600);
      t += fmt::format("key_file = \"{}\"\n", key);
    }
    t += spec_.peer_keys;
    for (const auto& [id, port] : dial) t += fmt::format("[[peers]]\nnode_id = \"{}\"\naddress = \"{}:{}\"\n", id, dial_host, port);
    for (size_t i = 0; i < spec_.nics.size(); ++i) {
      const auto& n = spec_.nics[i];
      const int udp_port = n.backend == "soft" || n.udp_port != 0 ? n.udp_port : 4791;
      t += fmt::format("[[nic]]\nname = \"{}{}\"\nbackend = \"{}\"\naddress = \"{}\"\nudp_port = {}\n", spec_.id, i,
                       n.backend, n.address, udp_port);
      if (!n.advertise.empty()) {
        auto colon = n.advertise.rfind(':');
        t += fmt::format("advertise_address = \"{}\"\nadvertise_udp_port = {}\n", n.advertise.substr(0, colon),
                         n.advertise.substr(colon + 1));
      }
      t += n.options;
    }
    t += spec_.extra;
    config_ = dir_.write("rdmad.toml", t);
    std::vector<std::string> argv = spec_.wrapper;
    if (spec_.supervised) {
      for (const auto& a : {binary("tools/supervise/rdmad-supervise"), std::string("--runtime-dir"), dir_.path() + "/run",
                            std::string("--restart-delay-ms"), std::string("50"), std::string("--")})
        argv.push_back(a);
    }
    for (const auto& a : {binary(spec_.daemon), std::string("--config"), config_}) argv.push_back(a);
    proc_ = std::make_unique<Subprocess>(argv);
    return wait_ready(1, report);
  }

  // Waits until the daemon said ready the n-th time (restarts under the supervisor) and reads the
  // metrics port it printed last.
  bool wait_ready(size_t n, bool report = true) {
    const auto end = std::chrono::steady_clock::now() + 15s;
    while (occurrences(proc_->output(), "] ready") < n) {
      if (std::chrono::steady_clock::now() >= end || proc_->wait_exit(0ms).has_value()) {
        if (report) ADD_FAILURE() << spec_.id << " did not start:\n" << proc_->output();
        return false;
      }
      usleep(10'000);
    }
    const std::string out = proc_->output();
    std::regex re(R"(serving metrics url=http://127\.0\.0\.1:(\d+)/metrics)");
    for (auto it = std::sregex_iterator(out.begin(), out.end(), re); it != std::sregex_iterator(); ++it)
      metrics_port_ = std::stoi((*it)[1]);
    return metrics_port_ != 0;
  }

  static size_t occurrences(const std::string& text, const std::string& needle) {
    size_t n = 0;
    for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++n;
    return n;
  }

  // Stops the daemon with SIGTERM (the test's client stays connected, as an application's would)
  // and starts it again on the same configuration; false (with a test failure) if either fails.
  // Under the supervisor: asks it to (SIGUSR1), as `systemctl restart`.
  bool restart() {
    if (spec_.supervised) {
      const size_t ready = occurrences(proc_->output(), "] ready");
      proc_->signal(SIGUSR1);
      return wait_ready(ready + 1);
    }
    last_output_ += proc_ ? proc_->output() : std::string();
    if (proc_) {
      proc_->signal(SIGTERM);
      const auto code = proc_->wait_exit(10s);
      if (code != 0) {
        ADD_FAILURE() << spec_.id << " exited " << (code ? std::to_string(*code) : "late") << ":\n" << proc_->output();
        return false;
      }
    }
    return start(dial_, dial_host_);
  }
  // Output of the runs before the last restart.
  const std::string& earlier_output() const { return last_output_; }

  void kill() {
    if (client_) rdmad_disconnect(client_);
    client_ = nullptr;
    proc_.reset();
  }

  rdmad_client* client() {
    if (client_ == nullptr) {
      rdmad_status s = rdmad_connect(socket_path().c_str(), &client_);
      EXPECT_EQ(s, RDMAD_OK) << rdmad_last_error(nullptr);
    }
    return client_;
  }

  // One sample of a series from /metrics ("name{labels}"), nullopt when absent.
  std::optional<double> metric(const std::string& series) const {
    auto r = http_get("127.0.0.1", metrics_port_, "/metrics");
    if (!r) return std::nullopt;
    const std::string& b = r->body;
    for (size_t pos = b.find(series); pos != std::string::npos; pos = b.find(series, pos + 1)) {
      if (pos > 0 && b[pos - 1] != '\n') continue;
      size_t sp = pos + series.size();
      if (sp >= b.size() || b[sp] != ' ') continue;
      return std::stod(b.substr(sp + 1, b.find('\n', sp) - sp - 1));
    }
    return std::nullopt;
  }

  std::string socket_path() const { return dir_.path() + "/run/rdmad.sock"; }
  int metrics_port() const { return metrics_port_; }
  const std::string& id() const { return spec_.id; }
  int peer_port() const { return peer_port_; }
  std::string output() const { return proc_ ? proc_->output() : std::string(); }
  const NodeSpec& spec() const { return spec_; }
  Subprocess* process() { return proc_.get(); }

 private:
  NodeSpec spec_;
  std::vector<bool> picked_;  // by NIC: its UDP port came from free_port here
  int peer_port_;
  TempDir dir_;
  std::string config_;
  std::unique_ptr<Subprocess> proc_;
  int metrics_port_ = 0;
  rdmad_client* client_ = nullptr;
  std::vector<std::pair<std::string, int>> dial_;
  std::string dial_host_;
  std::string last_output_;
};

// Host memory registered with one daemon, also mapped in the test (to fill and check).
struct Buffer {
  rdmad_host_buffer host{};
  rdmad_mr* mr = nullptr;
  rdmad_client* client = nullptr;
  Buffer(rdmad_client* c, size_t bytes, uint32_t access) : client(c) {
    EXPECT_EQ(rdmad_alloc_host(bytes, &host), RDMAD_OK);
    EXPECT_EQ(rdmad_register_host(c, host.fd, 0, bytes, access, 0, &mr), RDMAD_OK) << rdmad_last_error(c);
  }
  ~Buffer() {
    if (mr != nullptr) rdmad_deregister(client, mr);
    rdmad_free_host(&host);
  }
  uint8_t* data() const { return static_cast<uint8_t*>(host.addr); }
};

inline constexpr uint32_t kAllAccess =
    RDMAD_ACCESS_LOCAL_WRITE | RDMAD_ACCESS_REMOTE_WRITE | RDMAD_ACCESS_REMOTE_READ;

// Exports [0, bytes) of `on_target` (registered with `target`'s daemon) to `importer`'s node with
// `rights` and imports it on `flow` (a flow of `importer`'s client). A failure fails the test, with
// the daemons' reasons.
inline rdmad_remote export_and_import(Node& target, const Buffer& on_target, size_t bytes, Node& importer,
                                      rdmad_flow* flow, uint32_t rights = RDMAD_ACCESS_REMOTE_WRITE) {
  rdmad_token token{};
  EXPECT_EQ(rdmad_export(target.client(), on_target.mr, 0, bytes, importer.id().c_str(), rights, &token), RDMAD_OK)
      << rdmad_last_error(target.client());
  rdmad_remote remote{};
  EXPECT_EQ(rdmad_flow_import(flow, &token, &remote), RDMAD_OK) << rdmad_last_error(importer.client());
  return remote;
}

// Runs rdmactl against a node's socket and returns what it printed (a non-zero exit fails the test).
inline std::string rdmactl(const Node& n, std::vector<std::string> args) {
  args.insert(args.begin(), {binary("tools/rdmactl/rdmactl"), "--socket", n.socket_path()});
  Subprocess p(args);
  const int exit = p.wait_exit(10s).value_or(-1);
  EXPECT_EQ(exit, 0) << p.output();
  return p.output();
}

// Index of the first differing byte, or -1.
inline long first_difference(const uint8_t* a, const uint8_t* b, size_t n) {
  for (size_t i = 0; i < n; i += 1 << 20) {
    size_t len = std::min<size_t>(1 << 20, n - i);
    if (std::memcmp(a + i, b + i, len) != 0) {
      for (size_t k = 0; k < len; ++k)
        if (a[i + k] != b[i + k]) return static_cast<long>(i + k);
    }
  }
  return -1;
}

// Waits for one completion (with a deadline) and returns it.
inline std::optional<rdmad_completion> wait_completion(rdmad_flow* f, std::chrono::milliseconds deadline) {
  const auto end = std::chrono::steady_clock::now() + deadline;
  rdmad_completion c{};
  while (std::chrono::steady_clock::now() < end) {
    if (rdmad_flow_poll(f, &c, 1) == 1) return c;
    rdmad_flow_wait(f, 100);
  }
  return std::nullopt;
}

// Opens a flow each way between node-a and node-b (`fa`: a's to b, `fb`: b's to a) and waits until
// both are connected.
inline void open_both_ways(Node& a, Node& b, rdmad_flow** fa, rdmad_flow** fb, int wait_ms = 10000) {
  ASSERT_EQ(rdmad_flow_open(a.client(), b.id().c_str(), nullptr, fa), RDMAD_OK) << rdmad_last_error(a.client());
  ASSERT_EQ(rdmad_flow_open(b.client(), a.id().c_str(), nullptr, fb), RDMAD_OK) << rdmad_last_error(b.client());
  ASSERT_EQ(rdmad_flow_wait_connected(*fa, wait_ms), RDMAD_OK) << a.output() << b.output();
  ASSERT_EQ(rdmad_flow_wait_connected(*fb, wait_ms), RDMAD_OK) << b.output();
}

// node-a WRITEs n bytes into node-b's memory, READs them back and SENDs them into a receive node-b
// posted, each checked byte-exact: `fa` is a's flow to b, `fb` b's flow to a (for the receive).
inline void write_read_send_byte_exact(Node& a, Node& b, rdmad_flow* fa, rdmad_flow* fb, size_t n) {
  Buffer src(a.client(), n, kAllAccess);
  Buffer dst(b.client(), n, kAllAccess);
  const rdmad_remote remote =
      export_and_import(b, dst, n, a, fa, RDMAD_ACCESS_REMOTE_WRITE | RDMAD_ACCESS_REMOTE_READ);
  EXPECT_EQ(remote.length, n);

  // WRITE a -> b.
  fill(src.data(), n, 1);
  fill(dst.data(), n, 2);
  ASSERT_EQ(rdmad_flow_write(fa, 1, src.mr, 0, &remote, 0, n), RDMAD_OK);
  auto c = wait_completion(fa, 240s);
  ASSERT_TRUE(c.has_value()) << a.output();
  EXPECT_EQ(c->status, RDMAD_OK);
  EXPECT_EQ(c->wr_id, 1u);
  EXPECT_EQ(c->length, n);
  EXPECT_EQ(first_difference(src.data(), dst.data(), n), -1);

  // READ b -> a.
  fill(dst.data(), n, 3);
  ASSERT_EQ(rdmad_flow_read(fa, 2, src.mr, 0, &remote, 0, n), RDMAD_OK);
  c = wait_completion(fa, 240s);
  ASSERT_TRUE(c.has_value()) << a.output();
  EXPECT_EQ(c->status, RDMAD_OK);
  EXPECT_EQ(c->op, RDMAD_OP_READ);
  EXPECT_EQ(first_difference(src.data(), dst.data(), n), -1);

  // SEND a -> b into a posted receive.
  fill(src.data(), n, 4);
  ASSERT_EQ(rdmad_flow_recv(fb, 77, dst.mr, 0, n), RDMAD_OK);
  ASSERT_EQ(rdmad_flow_send(fa, 3, src.mr, 0, n), RDMAD_OK);
  c = wait_completion(fa, 240s);
  ASSERT_TRUE(c.has_value()) << a.output();
  EXPECT_EQ(c->status, RDMAD_OK);
  auto r = wait_completion(fb, 30s);
  ASSERT_TRUE(r.has_value()) << b.output();
  EXPECT_EQ(r->status, RDMAD_OK);
  EXPECT_EQ(r->wr_id, 77u);
  EXPECT_EQ(r->op, RDMAD_OP_RECV);
  EXPECT_EQ(r->length, n);
  EXPECT_EQ(first_difference(src.data(), dst.data(), n), -1);
}

// Two daemons a and b dialling each other; nics per node and extra config are parameters.
struct Pair {
  std::unique_ptr<Node> a;
  std::unique_ptr<Node> b;
  Pair(NodeSpec sa, NodeSpec sb) {
    a = std::make_unique<Node>(std::move(sa), free_port(SOCK_STREAM));
    b = std::make_unique<Node>(std::move(sb), free_port(SOCK_STREAM));
  }
  bool start() { return b->start({}) && a->start({{b->id(), b->peer_port()}}, b->spec().peer_host); }
};

inline NodeSpec two_nic_node(const std::string& id, int first_octet, const std::string& extra = "") {
  return NodeSpec{id,
                  {NicSpec{fmt::format("127.0.0.{}", first_octet), 0, ""},
                   NicSpec{fmt::format("127.0.0.{}", first_octet + 1), 0, ""}},
                  extra,
                  "",
                  14,
                  {},
                  "127.0.0.1"};
}

}  // namespace rdmad::test
