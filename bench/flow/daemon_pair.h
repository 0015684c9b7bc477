// Two real rdmad processes on loopback for the flow benchmark: soft NICs on 127.0.0.x, peered
// over TCP, the benchmark process the client of both. Configurations are written the way
// tests/integration/flow/flow_cluster.h writes them; this copy has no test framework in it and
// reads the daemons' CPU time per thread from /proc.
#pragma once

#include <dirent.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "rdmad/rdmad.h"
#include "support/free_port.h"

namespace rdmad::bench {

using test::free_port;

inline std::string read_all(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// CPU time of one process in clock ticks, per thread (tid -> {comm, utime+stime}).
struct ThreadTicks {
  std::string comm;
  uint64_t ticks = 0;
};
inline std::map<int, ThreadTicks> thread_ticks(pid_t pid) {
  std::map<int, ThreadTicks> out;
  const std::string base = fmt::format("/proc/{}/task", pid);
  DIR* d = ::opendir(base.c_str());
  if (d == nullptr) return out;
  while (dirent* e = ::readdir(d)) {
    if (e->d_name[0] == '.') continue;
    const std::string s = read_all(base + "/" + e->d_name + "/stat");
    const size_t open = s.find('('), close = s.rfind(')');
    if (open == std::string::npos || close == std::string::npos) continue;
    std::istringstream rest(s.substr(close + 2));
    std::string field;
    uint64_t utime = 0, stime = 0;
    for (int i = 3; i <= 15 && rest >> field; ++i) {  // fields 14 and 15: utime, stime
      if (i == 14) utime = std::stoull(field);
      if (i == 15) stime = std::stoull(field);
    }
    out[std::atoi(e->d_name)] = {s.substr(open + 1, close - open - 1), utime + stime};
  }
  ::closedir(d);
  return out;
}

// One daemon: its temp directory, config, process and client connection.
class Daemon {
 public:
  // qp_timeout: the flow QPs' local ACK timeout exponent ([peer] qp_timeout); nic_keys: more keys
  // of every [[nic]] (backend options such as "source_ports = 0\n"); per_nic_keys[i], when given,
  // more keys of NIC i (a dpdk port's devargs).
  Daemon(std::string id, std::vector<std::string> nic_addresses, std::string extra, int qp_timeout,
         std::string nic_keys = "", std::string backend = "soft", std::vector<std::string> per_nic_keys = {})
      : id_(std::move(id)),
        nics_(std::move(nic_addresses)),
        extra_(std::move(extra)),
        nic_keys_(std::move(nic_keys)),
        backend_(std::move(backend)),
        per_nic_keys_(std::move(per_nic_keys)),
        qp_timeout_(qp_timeout),
        peer_port_(free_port(SOCK_STREAM)) {
    char tmpl[] = "/tmp/rdmad-flowbench-XXXXXX";
    if (::mkdtemp(tmpl) == nullptr) throw std::runtime_error("mkdtemp failed");
    dir_ = tmpl;
  }
  ~Daemon() {
    stop();
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  Daemon(const Daemon&) = delete;
  Daemon& operator=(const Daemon&) = delete;

  // Writes the config (dialling `dial`: id -> peer port), starts the daemon, waits for "ready".
  void start(const std::vector<std::pair<std::string, int>>& dial) {
    std::string t = fmt::format(
        "[daemon]\nruntime_dir = \"{0}/run\"\nsocket_path = \"{0}/run/rdmad.sock\"\nlog_level = \"info\"\n"
        "[metrics]\nlisten = \"127.0.0.1:0\"\n[peer]\nenabled = true\nnode_id = \"{1}\"\n"
        "listen = \"127.0.0.1:{2}\"\nreconnect_min_ms = 50\nreconnect_max_ms = 500\nqp_timeout = {3}\n"
        "keepalive_interval_ms = 200\nkey_file = \"{0}/peer.key\"\n",
        dir_, id_, peer_port_, qp_timeout_);
    // Both daemons of a pair hold the same bench key (TLS 1.3 with a pre-shared key, as deployed).
    std::ofstream(dir_ + "/peer.key") << "rdmad flow benchmark pair key\n";
    ::chmod((dir_ + "/peer.key").c_str(), 0600);
    for (const auto& [id, port] : dial)
      t += fmt::format("[[peers]]\nnode_id = \"{}\"\naddress = \"127.0.0.1:{}\"\n", id, port);
    for (size_t i = 0; i < nics_.size(); ++i)
      t += fmt::format("[[nic]]\nname = \"{}{}\"\nbackend = \"{}\"\naddress = \"{}\"\nudp_port = {}\n{}{}", id_,
                       i, backend_, nics_[i], free_port(SOCK_DGRAM), nic_keys_,
                       i < per_nic_keys_.size() ? per_nic_keys_[i] : std::string());
    t += extra_;
    const std::string config = dir_ + "/rdmad.toml";
    std::ofstream(config) << t;
    log_ = dir_ + "/rdmad.log";
    // RDMAD_FLOW_BENCH_DAEMON runs another build of the daemon (before/after comparisons).
    const char* env = std::getenv("RDMAD_FLOW_BENCH_DAEMON");
    const std::string binary = env != nullptr ? env : RDMAD_DAEMON_BINARY;
    pid_ = ::fork();
    if (pid_ < 0) throw std::runtime_error("fork failed");
    if (pid_ == 0) {
      int fd = ::open(log_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
      ::dup2(fd, 1);
      ::dup2(fd, 2);
      ::execl(binary.c_str(), binary.c_str(), "--config", config.c_str(), static_cast<char*>(nullptr));
      ::_exit(127);
    }
    const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (read_all(log_).find("] ready") == std::string::npos) {
      int status = 0;
      if (std::chrono::steady_clock::now() > end || ::waitpid(pid_, &status, WNOHANG) == pid_)
        throw std::runtime_error(id_ + " did not start:\n" + read_all(log_));
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    if (rdmad_connect((dir_ + "/run/rdmad.sock").c_str(), &client_) != RDMAD_OK)
      throw std::runtime_error(id_ + ": rdmad_connect failed");
  }

  void stop() {
    if (client_ != nullptr) rdmad_disconnect(client_);
    client_ = nullptr;
    if (pid_ <= 0) return;
    ::kill(pid_, SIGTERM);
    int status = 0;
    const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (::waitpid(pid_, &status, WNOHANG) == 0) {
      if (std::chrono::steady_clock::now() > end) {
        ::kill(pid_, SIGKILL);
        ::waitpid(pid_, &status, 0);
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    pid_ = -1;
  }

  // Sum of every sample of a metric (all label sets) from the daemon's /metrics, by curl; -1 when
  // unavailable.
  double metric_sum(const std::string& name) const { return metric_sum_where(name, ""); }
  // The same over the samples whose labels contain `label` (e.g. lane_qp="1"; "": all of them).
  double metric_sum_where(const std::string& name, const std::string& label) const {
    const std::string log_text = read_all(log_);
    const std::string key = "serving metrics url=http://127.0.0.1:";
    const size_t at = log_text.find(key);
    if (at == std::string::npos) return -1;
    const int port = std::atoi(log_text.c_str() + at + key.size());
    FILE* f = ::popen(fmt::format("curl -s --max-time 5 http://127.0.0.1:{}/metrics", port).c_str(), "r");
    if (f == nullptr) return -1;
    double sum = 0;
    char line[1024];
    while (std::fgets(line, sizeof(line), f) != nullptr) {
      const std::string l(line);
      if (l.rfind(name, 0) != 0 || (l[name.size()] != ' ' && l[name.size()] != '{')) continue;
      if (!label.empty() && l.find(label) == std::string::npos) continue;
      sum += std::atof(l.c_str() + l.rfind(' ') + 1);
    }
    ::pclose(f);
    return sum;
  }

  rdmad_client* client() const { return client_; }
  std::string socket_path() const { return dir_ + "/run/rdmad.sock"; }
  pid_t pid() const { return pid_; }
  const std::string& id() const { return id_; }
  int peer_port() const { return peer_port_; }
  std::string log() const { return read_all(log_); }

 private:
  std::string id_;
  std::vector<std::string> nics_;
  std::string extra_;
  std::string nic_keys_;
  std::string backend_;
  std::vector<std::string> per_nic_keys_;
  int qp_timeout_;
  int peer_port_;
  std::string dir_;
  std::string log_;
  pid_t pid_ = -1;
  rdmad_client* client_ = nullptr;
};

// Host memory registered with one daemon and mapped here (to fill and check).
struct Buffer {
  rdmad_host_buffer host{};
  rdmad_mr* mr = nullptr;
  rdmad_client* client = nullptr;
  Buffer(rdmad_client* c, size_t bytes) : client(c) {
    const uint32_t access = RDMAD_ACCESS_LOCAL_WRITE | RDMAD_ACCESS_REMOTE_WRITE | RDMAD_ACCESS_REMOTE_READ;
    if (rdmad_alloc_host(bytes, &host) != RDMAD_OK ||
        rdmad_register_host(c, host.fd, 0, bytes, access, 0, &mr) != RDMAD_OK)
      throw std::runtime_error(std::string("buffer: ") + rdmad_last_error(c));
  }
  ~Buffer() {
    if (mr != nullptr) rdmad_deregister(client, mr);
    rdmad_free_host(&host);
  }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  uint8_t* data() const { return static_cast<uint8_t*>(host.addr); }
};

// node-a and node-b (a dials b), `nics` soft NICs each, with a's flow to b open and connected and
// `bytes` of b's memory exported to a and imported on that flow.
struct FlowPair {
  std::string links;  // dpdk: the memif sockets' directory
  Daemon a;
  Daemon b;
  rdmad_flow* flow = nullptr;
  std::unique_ptr<Buffer> src;  // on a
  std::unique_ptr<Buffer> dst;  // on b
  rdmad_remote remote{};

  static std::vector<std::string> addresses(int first_octet, int nics) {
    std::vector<std::string> out;
    for (int i = 0; i < nics; ++i) out.push_back(fmt::format("127.0.0.{}", first_octet + i));
    return out;
  }

  // dpdk NICs: rail i of node-a and of node-b joined by a net_memif link (node-b, which starts
  // first, is the server), on 10.78.i.1 and 10.78.i.2.
  static std::vector<std::string> dpdk_addresses(int side, int nics) {
    std::vector<std::string> out;
    for (int i = 0; i < nics; ++i) out.push_back(fmt::format("10.78.{}.{}", i, side + 1));
    return out;
  }
  static std::vector<std::string> memif_keys(const std::string& role, const std::string& dir, int nics) {
    std::vector<std::string> out;
    for (int i = 0; i < nics; ++i)
      out.push_back(fmt::format("devargs = \"net_memif{0},role={1},socket={2}/rail{0}.sock,socket-abstract=no,id=0\"\n"
                                "mtu = 9000\nmbufs = 8191\n",
                                i, role, dir));
    return out;
  }
  static std::string links_dir() {
    char tmpl[] = "/tmp/rdmad-flowbench-links-XXXXXX";
    if (::mkdtemp(tmpl) == nullptr) throw std::runtime_error("mkdtemp failed");
    return tmpl;
  }

  FlowPair(int nics, size_t bytes, int qp_timeout, const std::string& extra = "", const std::string& nic_keys = "",
           const std::string& backend = "soft")
      : links(backend == "dpdk" ? links_dir() : std::string()),
        a("node-a", backend == "dpdk" ? dpdk_addresses(0, nics) : addresses(11, nics), extra, qp_timeout, nic_keys,
          backend, backend == "dpdk" ? memif_keys("client", links, nics) : std::vector<std::string>{}),
        b("node-b", backend == "dpdk" ? dpdk_addresses(1, nics) : addresses(21, nics), extra, qp_timeout, nic_keys,
          backend, backend == "dpdk" ? memif_keys("server", links, nics) : std::vector<std::string>{}) {
    b.start({});
    a.start({{b.id(), b.peer_port()}});
    if (rdmad_flow_open(a.client(), "node-b", nullptr, &flow) != RDMAD_OK ||
        rdmad_flow_wait_connected(flow, 15000) != RDMAD_OK)
      throw std::runtime_error(std::string("flow did not connect: ") + rdmad_last_error(a.client()) + "\n" +
                               a.log());
    src = std::make_unique<Buffer>(a.client(), bytes);
    dst = std::make_unique<Buffer>(b.client(), bytes);
    rdmad_token token{};
    if (rdmad_export(b.client(), dst->mr, 0, bytes, "node-a", RDMAD_ACCESS_REMOTE_WRITE, &token) !=
            RDMAD_OK ||
        rdmad_flow_import(flow, &token, &remote) != RDMAD_OK)
      throw std::runtime_error("export/import failed");
  }
  ~FlowPair() {
    rdmad_flow_close(flow);
    src.reset();
    dst.reset();
    a.stop();
    b.stop();
    if (!links.empty()) {
      std::error_code ec;
      std::filesystem::remove_all(links, ec);
    }
  }
  FlowPair(const FlowPair&) = delete;
  FlowPair& operator=(const FlowPair&) = delete;
};

}  // namespace rdmad::bench
