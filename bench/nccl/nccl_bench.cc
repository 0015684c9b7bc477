// An nccl-tests-style send/recv sweep, 8 B .. 256 MiB, between two processes on two real rdmad
// daemons (two soft NICs each), through three transports in the same run:
//   plugin  libnccl-net-rdmad.so driven as NCCL drives it (host buffers: staged)
//   flow    librdmad flows used directly (SEND/RECV from registered memfd memory, no copy)
//   tcp     one TCP connection on loopback (the same algorithm over a socket)
// Per size: the round trip of a ping-pong (p50 of n, µs, halved = latency) and the bandwidth of a
// stream of messages with 4 in flight (GB/s). See BENCHMARKS.md, "NCCL plugin".
//
//   nccl_bench [--max-bytes N] [--only plugin,flow,tcp]
#include <dlfcn.h>
#include <sched.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/wait.h>

#include <algorithm>
#include <cstring>
#include <functional>

#include "../../nccl/src/abi.h"
#include "../flow/daemon_pair.h"

namespace {

using namespace rdmad;
using Clock = std::chrono::steady_clock;
namespace abi = rdmad::nccl::abi;

[[noreturn]] void die(const std::string& what) {
  std::fprintf(stderr, "nccl_bench: %s\n", what.c_str());
  std::_Exit(1);
}

// What one side of a transport does: post a send or a receive, and wait for all posted.
struct Side {
  std::function<void(size_t)> send;  // from the side's buffer
  std::function<void(size_t)> recv;  // into the side's buffer
  std::function<void()> wait;        // until everything posted completed
};

constexpr size_t kWindow = 4;

size_t iterations_for(size_t bytes) { return bytes <= 65536 ? 2000 : bytes <= (1 << 20) ? 200 : bytes <= (16 << 20) ? 20 : 4; }

// The measurement, run by both processes in lock step (pinger = the parent).
void measure(Side& s, bool pinger, size_t max_bytes, const char* name) {
  for (size_t bytes = 8; bytes <= max_bytes; bytes *= (bytes < 1024 ? 8 : 4)) {
    const size_t n = iterations_for(bytes);
    std::vector<double> rtt;
    for (size_t i = 0; i < n + 10; ++i) {
      const auto t0 = Clock::now();
      if (pinger) {
        s.recv(bytes);
        s.send(bytes);
        s.wait();
      } else {
        s.recv(bytes);
        s.wait();
        s.send(bytes);
        s.wait();
      }
      if (i >= 10) rtt.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
    }
    // Stream: n messages, kWindow in flight, then a one-byte answer. One untimed window first, as
    // nccl-tests warms up: NCCL sends from the same buffers over and over, so the plugin's staging
    // buffers for kWindow messages in flight exist from then on (the ping-pong above used one).
    for (size_t k = 0; k < kWindow; ++k) pinger ? s.send(bytes) : s.recv(bytes);
    s.wait();
    const auto t0 = Clock::now();
    for (size_t i = 0; i < n; i += kWindow) {
      for (size_t k = 0; k < kWindow && i + k < n; ++k) pinger ? s.send(bytes) : s.recv(bytes);
      s.wait();
    }
    pinger ? s.recv(1) : s.send(1);
    s.wait();
    const double secs = std::chrono::duration<double>(Clock::now() - t0).count();
    if (pinger) {
      std::sort(rtt.begin(), rtt.end());
      std::printf("%-7s %10zu B  latency p50 %9.1f us  p99 %9.1f us  bandwidth %7.3f GB/s\n", name, bytes,
                  rtt[rtt.size() / 2] / 2, rtt[rtt.size() * 99 / 100] / 2,
                  static_cast<double>(bytes) * static_cast<double>(n) / secs / 1e9);
      std::fflush(stdout);
    }
  }
}

// ---- the plugin, as NCCL calls it
void run_plugin(bool pinger, int handle_pipe[2], size_t max_bytes) {
  void* lib = dlopen(RDMAD_NCCL_PLUGIN, RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) die(std::string("dlopen: ") + dlerror());
  auto* net = static_cast<abi::NetV10*>(dlsym(lib, "ncclNetPlugin_v10"));
  if (net == nullptr || net->init(nullptr, nullptr) != abi::kSuccess) die("plugin init failed");
  char handle[abi::kHandleMaxBytes] = {};
  void* comm = nullptr;
  void* listen = nullptr;
  // The pinger receives on one comm and sends on another: two pairs.
  void *send_comm = nullptr, *recv_comm = nullptr;
  if (!pinger) {
    net->listen(0, handle, &listen);
    if (write(handle_pipe[1], handle, sizeof(handle)) != sizeof(handle)) die("pipe");
    while (recv_comm == nullptr) net->accept(listen, &recv_comm, nullptr);
    if (read(handle_pipe[0], handle, sizeof(handle)) != sizeof(handle)) die("pipe");
    while (send_comm == nullptr) net->connect(0, nullptr, handle, &send_comm, nullptr);
  } else {
    if (read(handle_pipe[0], handle, sizeof(handle)) != sizeof(handle)) die("pipe");
    while (send_comm == nullptr) net->connect(0, nullptr, handle, &send_comm, nullptr);
    char back[abi::kHandleMaxBytes] = {};
    net->listen(0, back, &listen);
    if (write(handle_pipe[1], back, sizeof(back)) != sizeof(back)) die("pipe");
    while (recv_comm == nullptr) net->accept(listen, &recv_comm, nullptr);
  }
  (void)comm;
  std::vector<uint8_t> buf(max_bytes);
  void *mh_s, *mh_r;
  net->reg_mr(send_comm, buf.data(), buf.size(), abi::kPtrHost, &mh_s);
  net->reg_mr(recv_comm, buf.data(), buf.size(), abi::kPtrHost, &mh_r);
  std::vector<void*> pending;
  Side s;
  s.send = [&](size_t n) {
    void* r = nullptr;
    while (r == nullptr)
      if (net->isend(send_comm, buf.data(), n, 0, mh_s, nullptr, &r) != abi::kSuccess) die("isend");
    pending.push_back(r);
  };
  s.recv = [&](size_t n) {
    void* r = nullptr;
    void* d = buf.data();
    int tag = 0;
    while (r == nullptr)
      if (net->irecv(recv_comm, 1, &d, &n, &tag, &mh_r, nullptr, &r) != abi::kSuccess) die("irecv");
    pending.push_back(r);
  };
  s.wait = [&] {
    for (void* r : pending) {
      int done = 0, size = 0;
      for (;;) {
        if (net->test(r, &done, &size) != abi::kSuccess) die("test");
        if (done) break;
        sched_yield();  // as NCCL's proxy thread does between idle passes
      }
    }
    pending.clear();
  };
  measure(s, pinger, max_bytes, "plugin");
  net->close_send(send_comm);
  net->close_recv(recv_comm);
  net->close_listen(listen);
}

// ---- librdmad flows directly
void run_flow(bool pinger, const std::string& socket, const std::string& peer, size_t max_bytes) {
  rdmad_client* c = nullptr;
  if (rdmad_connect(socket.c_str(), &c) != RDMAD_OK) die("connect");
  rdmad_flow_attr attr{};
  attr.channel = 0x6e63636c62656e63ull;  // "ncclbenc"
  rdmad_flow* f = nullptr;
  if (rdmad_flow_open(c, peer.c_str(), &attr, &f) != RDMAD_OK || rdmad_flow_wait_connected(f, 10000) != RDMAD_OK)
    die(std::string("flow: ") + rdmad_last_error(c));
  {
    bench::Buffer b(c, max_bytes);
    size_t outstanding = 0;
    uint64_t id = 0;
    Side s;
    s.send = [&](size_t n) {
      while (rdmad_flow_send(f, ++id, b.mr, 0, n) == RDMAD_ERR_NO_RESOURCE) {
      }
      ++outstanding;
    };
    s.recv = [&](size_t n) {
      while (rdmad_flow_recv(f, ++id, b.mr, 0, n) == RDMAD_ERR_NO_RESOURCE) {
      }
      ++outstanding;
    };
    s.wait = [&] {
      rdmad_completion cs[16];
      while (outstanding > 0) {
        size_t k = rdmad_flow_poll(f, cs, 16);
        if (k == 0) sched_yield();  // as NCCL's proxy thread does between idle passes
        for (size_t i = 0; i < k; ++i)
          if (cs[i].status != RDMAD_OK) die(std::string("flow completion: ") + rdmad_strerror(cs[i].status));
        outstanding -= k;
      }
    };
    measure(s, pinger, max_bytes, "flow");
  }
  rdmad_flow_close(f);
  rdmad_disconnect(c);
}

// ---- TCP on loopback
void run_tcp(bool pinger, int port, size_t max_bytes) {
  int fd = -1;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(static_cast<uint16_t>(port));
  if (!pinger) {
    int l = socket(AF_INET, SOCK_STREAM, 0), one = 1;
    setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (bind(l, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 || listen(l, 1) != 0) die("tcp listen");
    fd = accept(l, nullptr, nullptr);
    close(l);
  } else {
    const auto end = Clock::now() + std::chrono::seconds(10);
    for (;;) {
      fd = socket(AF_INET, SOCK_STREAM, 0);
      if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0) break;
      close(fd);
      if (Clock::now() > end) die("tcp connect");
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  }
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  std::vector<uint8_t> buf(max_bytes);
  size_t to_read = 0;
  Side s;
  s.send = [&](size_t n) {
    for (size_t off = 0; off < n;) {
      ssize_t w = ::send(fd, buf.data() + off, n - off, 0);
      if (w <= 0) die("tcp send");
      off += static_cast<size_t>(w);
    }
  };
  s.recv = [&](size_t n) { to_read += n; };
  s.wait = [&] {
    while (to_read > 0) {
      ssize_t r = ::recv(fd, buf.data(), std::min(to_read, buf.size()), 0);
      if (r <= 0) die("tcp recv");
      to_read -= static_cast<size_t>(r);
    }
  };
  measure(s, pinger, max_bytes, "tcp");
  close(fd);
}

}  // namespace

int main(int argc, char** argv) {
  size_t max_bytes = 256u << 20;
  std::string only = "plugin,flow,tcp";
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--max-bytes") == 0) max_bytes = std::stoull(argv[i + 1]);
    if (std::strcmp(argv[i], "--only") == 0) only = argv[i + 1];
  }
  bench::Daemon b("node-b", {"127.0.0.21", "127.0.0.22"}, "", 14);
  b.start({});
  bench::Daemon a("node-a", {"127.0.0.11", "127.0.0.12"}, "", 14);
  a.start({{"node-b", b.peer_port()}});
  setenv("RDMAD_NCCL_SOCKET_IFNAME", "lo", 1);
  const int tcp_port = test::free_port(SOCK_STREAM);
  std::printf("nccl_bench: node-a -> node-b, 2 soft NICs each, max %zu bytes, %zu messages in flight for bandwidth\n",
              max_bytes, kWindow);
  for (const char* t : {"plugin", "flow", "tcp"}) {
    if (only.find(t) == std::string::npos) continue;
    int to_child[2], to_parent[2];
    if (pipe(to_child) != 0 || pipe(to_parent) != 0) die("pipe");
    pid_t pid = fork();
    if (pid == 0) {
      setenv("RDMAD_SOCKET", b.socket_path().c_str(), 1);
      int ends[2] = {to_child[0], to_parent[1]};
      if (std::strcmp(t, "plugin") == 0) run_plugin(false, ends, max_bytes);
      if (std::strcmp(t, "flow") == 0) run_flow(false, b.socket_path(), "node-a", max_bytes);
      if (std::strcmp(t, "tcp") == 0) run_tcp(false, tcp_port, max_bytes);
      std::_Exit(0);
    }
    setenv("RDMAD_SOCKET", a.socket_path().c_str(), 1);
    int ends[2] = {to_parent[0], to_child[1]};
    if (std::strcmp(t, "plugin") == 0) {
      // The plugin keeps one daemon connection per process: run the pinger in a child too.
      pid_t p2 = fork();
      if (p2 == 0) {
        run_plugin(true, ends, max_bytes);
        std::_Exit(0);
      }
      int st = 0;
      waitpid(p2, &st, 0);
    }
    if (std::strcmp(t, "flow") == 0) run_flow(true, a.socket_path(), "node-b", max_bytes);
    if (std::strcmp(t, "tcp") == 0) run_tcp(true, tcp_port, max_bytes);
    int status = 0;
    waitpid(pid, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) die(std::string(t) + ": the other side failed");
  }
  return 0;
}
