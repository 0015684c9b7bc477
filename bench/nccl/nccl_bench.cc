// An nccl-tests-style sweep, 8 B .. 256 MiB, send/recv and a ring AllReduce, between two processes
// (one rank per node) on two real rdmad daemons (two soft NICs each), through three transports in
// the same run:
//   plugin  libnccl-net-rdmad.so driven as NCCL drives it (host buffers: staged)
//   plugin-memfd  the same on host memory a sealed memfd backs (rdmad_alloc_host): registered as it
//           is and moved without a copy, as GPU memory through dma-buf is (the plugin's own cost)
//   flow    librdmad flows used directly (SEND/RECV from registered memfd memory, no copy)
//   tcp     one TCP connection on loopback (the same algorithm over a socket)
// send/recv, per size: the round trip of a ping-pong (p50 of n, µs, halved = latency) and the
// bandwidth of a stream of messages with 4 in flight (GB/s).
// allreduce, per size: a float32 sum over the two ranks, as NCCL's ring runs it (reduce-scatter,
// then all-gather), each step moved in pieces of at most 512 KiB with 8 in flight (NCCL's Simple
// protocol: a 4 MiB buffer in NCCL_STEPS = 8 slots): the time per AllReduce (p50) and the bus
// bandwidth (size / time × 2(n-1)/n, = size / time for two ranks). The first AllReduce of each size
// is checked exactly against a local sum. See BENCHMARKS.md, "NCCL plugin".
//
//   nccl_bench [--max-bytes N] [--only plugin,plugin-memfd,flow,tcp] [--ops sendrecv,allreduce]
//   --only runs the transports in the order given.
#include <dlfcn.h>
#include <sched.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/wait.h>

#include <algorithm>
#include <deque>
#include <set>
#include <sstream>
#include <cstdarg>
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

// What one side of a transport does: post a send or a receive, and wait for what it posted. Each
// side has two buffers of the largest size: 0 (what is sent, the AllReduce's data) and 1 (scratch).
// Operations are numbered from 1 in posting order, sends and receives together.
struct Side {
  using Op = uint64_t;
  static constexpr Op kAll = ~Op{0};
  std::function<Op(int buf, size_t off, size_t n)> send;  // from buffer `buf` at `off`
  std::function<Op(int buf, size_t off, size_t n)> recv;  // into buffer `buf` at `off`
  std::function<void(Op upto)> wait;                      // until every operation up to `upto` completed
  uint8_t* buf[2] = {nullptr, nullptr};
};

constexpr size_t kWindow = 4;

size_t iterations_for(size_t bytes) { return bytes <= 65536 ? 2000 : bytes <= (1 << 20) ? 200 : bytes <= (16 << 20) ? 20 : 4; }

// The measurement, run by both processes in lock step (pinger = the parent).
void measure(Side& side, bool pinger, size_t max_bytes, const char* name) {
  struct {
    Side& s;
    void send(size_t n) { s.send(0, 0, n); }
    void recv(size_t n) { s.recv(0, 0, n); }
    void wait() { s.wait(Side::kAll); }
  } s{side};
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

constexpr size_t kPiece = 512 << 10;    // NCCL's Simple protocol: NCCL_BUFFSIZE (4 MiB) / NCCL_STEPS
constexpr size_t kPiecesInFlight = 8;   // NCCL_STEPS

// One ring step: send buffer 0's [send_off, +len) to the other rank while its same length arrives
// in buffer `rbuf` at `recv_off`, piece by piece with a sliding window, as NCCL's proxy fills its
// slots; `arrived(off, n)` sees each piece once it is in, oldest first.
void ring_step(Side& s, size_t send_off, int rbuf, size_t recv_off, size_t len,
               const std::function<void(size_t, size_t)>& arrived) {
  struct Piece {
    Side::Op last;
    size_t off, n;
  };
  std::deque<Piece> in_flight;
  for (size_t posted = 0; posted < len || !in_flight.empty();) {
    if (posted < len && in_flight.size() < kPiecesInFlight) {
      const size_t n = std::min(kPiece, len - posted);
      s.recv(rbuf, recv_off + posted, n);
      in_flight.push_back({s.send(0, send_off + posted, n), posted, n});
      posted += n;
      continue;
    }
    s.wait(in_flight.front().last);
    if (arrived) arrived(in_flight.front().off, in_flight.front().n);
    in_flight.pop_front();
  }
}

float initial(int rank, size_t i) { return static_cast<float>(rank == 0 ? i % 997 : 2 * (i % 991)); }

// A float32 sum AllReduce over the two ranks (rank 0 = the pinger), in place in buffer 0.
void allreduce(Side& s, int rank, size_t bytes) {
  const size_t half = bytes / 2, own = static_cast<size_t>(rank) * half, other = half - own;
  auto* data = reinterpret_cast<float*>(s.buf[0]);
  const auto* scratch = reinterpret_cast<const float*>(s.buf[1]);
  // Reduce-scatter: the other rank's half goes to it, ours comes back and is summed into ours.
  ring_step(s, other, 1, own, half, [&](size_t off, size_t n) {
    for (size_t i = (own + off) / 4, end = (own + off + n) / 4; i < end; ++i) data[i] += scratch[i];
  });
  // All-gather: our summed half to the other rank, its summed half into ours.
  ring_step(s, own, 0, other, half, nullptr);
}

void measure_allreduce(Side& s, bool pinger, size_t max_bytes, const char* name) {
  const int rank = pinger ? 0 : 1;
  for (size_t bytes = 8; bytes <= max_bytes; bytes *= (bytes < 1024 ? 8 : 4)) {
    const size_t n = std::max<size_t>(4, iterations_for(bytes) / 4), count = bytes / 4;
    auto* data = reinterpret_cast<float*>(s.buf[0]);
    for (size_t i = 0; i < count; ++i) data[i] = initial(rank, i);
    allreduce(s, rank, bytes);  // untimed, checked
    for (size_t i = 0; i < count; ++i)
      if (data[i] != initial(0, i) + initial(1, i))
        die(std::string(name) + " allreduce of " + std::to_string(bytes) + " B: element " + std::to_string(i) + " is " +
            std::to_string(data[i]) + ", expected " + std::to_string(initial(0, i) + initial(1, i)));
    std::memset(data, 0, bytes);  // the timed ones sum zeros: the same work, no overflow
    std::vector<double> times;
    const auto t0 = Clock::now();
    for (size_t i = 0; i < n; ++i) {
      const auto t = Clock::now();
      allreduce(s, rank, bytes);
      times.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t).count());
    }
    const double secs = std::chrono::duration<double>(Clock::now() - t0).count();
    if (pinger) {
      std::sort(times.begin(), times.end());
      std::printf("%-7s %10zu B  allreduce p50 %9.1f us  busbw %7.3f GB/s\n", name, bytes, times[times.size() / 2],
                  static_cast<double>(bytes) * static_cast<double>(n) / secs / 1e9);
      std::fflush(stdout);
    }
  }
}

std::string g_ops = "sendrecv,allreduce";  // --ops

// The measurements --ops asks for.
void measure_all(Side& s, bool pinger, size_t max_bytes, const char* name) {
  if (g_ops.find("sendrecv") != std::string::npos) measure(s, pinger, max_bytes, name);
  if (g_ops.find("allreduce") != std::string::npos) measure_allreduce(s, pinger, max_bytes, name);
}

// ---- the plugin, as NCCL calls it
// NCCL's logger: the plugin's warnings, and its comms' close lines (how many bytes were staged).
void plugin_log(abi::LogLevel level, unsigned long, const char*, int, const char* fmt, ...) {
  if (level > abi::kLogInfo) return;
  char line[512];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(line, sizeof line, fmt, ap);
  va_end(ap);
  if (level <= abi::kLogWarn || std::strstr(line, ": comm with node ") != nullptr) std::fprintf(stderr, "%s\n", line);
}

void run_plugin(bool pinger, int handle_pipe[2], size_t max_bytes, bool memfd) {
  void* lib = dlopen(RDMAD_NCCL_PLUGIN, RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) die(std::string("dlopen: ") + dlerror());
  auto* net = static_cast<abi::NetV10*>(dlsym(lib, "ncclNetPlugin_v10"));
  if (net == nullptr || net->init(plugin_log, nullptr) != abi::kSuccess) die("plugin init failed");
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
  // NCCL's own host buffers (not memfd-backed: staged), or librdmad's sealed memfds.
  std::vector<uint8_t> vectors[2];
  rdmad_host_buffer hosts[2] = {};
  uint8_t* bufs[2] = {nullptr, nullptr};
  for (int b = 0; b < 2; ++b) {
    if (memfd) {
      if (rdmad_alloc_host(max_bytes, &hosts[b]) != RDMAD_OK) die("rdmad_alloc_host");
      bufs[b] = static_cast<uint8_t*>(hosts[b].addr);
    } else {
      vectors[b].resize(max_bytes);
      bufs[b] = vectors[b].data();
    }
  }
  void *mh_s = nullptr, *mh_r[2] = {nullptr, nullptr};
  net->reg_mr(send_comm, bufs[0], max_bytes, abi::kPtrHost, &mh_s);
  for (int b = 0; b < 2; ++b) net->reg_mr(recv_comm, bufs[b], max_bytes, abi::kPtrHost, &mh_r[b]);
  std::deque<std::pair<Side::Op, void*>> pending;
  Side::Op op = 0;
  Side s;
  s.buf[0] = bufs[0];
  s.buf[1] = bufs[1];
  s.send = [&](int b, size_t off, size_t n) {
    void* r = nullptr;
    while (r == nullptr)
      if (net->isend(send_comm, bufs[b] + off, n, 0, mh_s, nullptr, &r) != abi::kSuccess) die("isend");
    pending.emplace_back(++op, r);
    return op;
  };
  s.recv = [&](int b, size_t off, size_t n) {
    void* r = nullptr;
    void* d = bufs[b] + off;
    int tag = 0;
    while (r == nullptr)
      if (net->irecv(recv_comm, 1, &d, &n, &tag, &mh_r[b], nullptr, &r) != abi::kSuccess) die("irecv");
    pending.emplace_back(++op, r);
    return op;
  };
  s.wait = [&](Side::Op upto) {
    for (; !pending.empty() && pending.front().first <= upto; pending.pop_front()) {
      int done = 0, size = 0;
      for (;;) {
        if (net->test(pending.front().second, &done, &size) != abi::kSuccess) die("test");
        if (done) break;
        sched_yield();  // as NCCL's proxy thread does between idle passes
      }
    }
  };
  measure_all(s, pinger, max_bytes, memfd ? "plugin-memfd" : "plugin");
  for (int b = 0; b < 2; ++b) net->dereg_mr(recv_comm, mh_r[b]);
  net->dereg_mr(send_comm, mh_s);
  net->close_send(send_comm);
  net->close_recv(recv_comm);
  net->close_listen(listen);
  for (auto& h : hosts)
    if (h.addr != nullptr) rdmad_free_host(&h);
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
    bench::Buffer b0(c, max_bytes), b1(c, max_bytes);
    const bench::Buffer* bufs[2] = {&b0, &b1};
    uint64_t id = 0;
    Side::Op first_open = 1;          // every operation below it completed
    std::set<Side::Op> done_above;    // completed ones above it
    Side s;
    s.buf[0] = b0.data();
    s.buf[1] = b1.data();
    s.send = [&](int b, size_t off, size_t n) {
      while (rdmad_flow_send(f, id + 1, bufs[b]->mr, off, n) == RDMAD_ERR_NO_RESOURCE) {
      }
      return ++id;
    };
    s.recv = [&](int b, size_t off, size_t n) {
      while (rdmad_flow_recv(f, id + 1, bufs[b]->mr, off, n) == RDMAD_ERR_NO_RESOURCE) {
      }
      return ++id;
    };
    s.wait = [&](Side::Op upto) {
      rdmad_completion cs[16];
      while (first_open <= std::min(upto, id)) {
        size_t k = rdmad_flow_poll(f, cs, 16);
        if (k == 0) sched_yield();  // as NCCL's proxy thread does between idle passes
        for (size_t i = 0; i < k; ++i) {
          if (cs[i].status != RDMAD_OK) die(std::string("flow completion: ") + rdmad_strerror(cs[i].status));
          done_above.insert(cs[i].wr_id);
        }
        while (done_above.erase(first_open) == 1) ++first_open;
      }
    };
    measure_all(s, pinger, max_bytes, "flow");
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
  // Sends and receives are queued and moved together in wait(), without blocking on either: both
  // ranks of an AllReduce step send before they read, more than the socket buffers hold.
  std::vector<uint8_t> bufs[2] = {std::vector<uint8_t>(max_bytes), std::vector<uint8_t>(max_bytes)};
  struct Piece {
    Side::Op op;
    uint8_t* p;
    size_t n;
  };
  Side::Op op = 0;
  std::deque<Piece> sends, recvs;
  Side s;
  s.buf[0] = bufs[0].data();
  s.buf[1] = bufs[1].data();
  s.send = [&](int b, size_t off, size_t n) {
    sends.push_back({++op, bufs[b].data() + off, n});
    return op;
  };
  s.recv = [&](int b, size_t off, size_t n) {
    recvs.push_back({++op, bufs[b].data() + off, n});
    return op;
  };
  s.wait = [&](Side::Op upto) {
    auto open = [upto](const std::deque<Piece>& q) { return !q.empty() && q.front().op <= upto; };
    for (;;) {
      while (!sends.empty() && sends.front().n == 0) sends.pop_front();
      while (!recvs.empty() && recvs.front().n == 0) recvs.pop_front();
      if (!open(sends) && !open(recvs)) break;
      bool moved = false;
      if (!sends.empty()) {
        ssize_t w = ::send(fd, sends.front().p, sends.front().n, MSG_DONTWAIT | MSG_NOSIGNAL);
        if (w > 0) {
          sends.front().p += w;
          sends.front().n -= static_cast<size_t>(w);
          moved = true;
        } else if (w < 0 && errno != EAGAIN) {
          die("tcp send");
        }
      }
      if (!recvs.empty()) {
        ssize_t r = ::recv(fd, recvs.front().p, recvs.front().n, MSG_DONTWAIT);
        if (r > 0) {
          recvs.front().p += r;
          recvs.front().n -= static_cast<size_t>(r);
          moved = true;
        } else if (r == 0 || errno != EAGAIN) {
          die("tcp recv");
        }
      }
      if (moved) continue;
      pollfd p{fd, static_cast<short>((recvs.empty() ? 0 : POLLIN) | (sends.empty() ? 0 : POLLOUT)), 0};
      ::poll(&p, 1, -1);
    }
  };
  measure_all(s, pinger, max_bytes, "tcp");
  close(fd);
}

}  // namespace

int main(int argc, char** argv) {
  size_t max_bytes = 256u << 20;
  std::string only = "plugin,plugin-memfd,flow,tcp";
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--max-bytes") == 0) max_bytes = std::stoull(argv[i + 1]);
    if (std::strcmp(argv[i], "--only") == 0) only = argv[i + 1];
    if (std::strcmp(argv[i], "--ops") == 0) g_ops = argv[i + 1];
  }
  bench::Daemon b("node-b", {"127.0.0.21", "127.0.0.22"}, "", 14);
  b.start({});
  bench::Daemon a("node-a", {"127.0.0.11", "127.0.0.12"}, "", 14);
  a.start({{"node-b", b.peer_port()}});
  setenv("RDMAD_NCCL_SOCKET_IFNAME", "lo", 1);
  const int tcp_port = test::free_port(SOCK_STREAM);
  std::printf("nccl_bench: node-a -> node-b, 2 soft NICs each, max %zu bytes; send/recv: %zu messages in flight for "
              "bandwidth; allreduce: 2 ranks, pieces of %zu KiB, %zu in flight\n",
              max_bytes, kWindow, kPiece >> 10, kPiecesInFlight);
  // In the order given (alternate it between runs to cancel any order effect).
  std::vector<std::string> order;
  std::stringstream list(only);
  for (std::string t; std::getline(list, t, ',');) {
    if (t != "plugin" && t != "plugin-memfd" && t != "flow" && t != "tcp")
      die("--only " + t + ": expected plugin, plugin-memfd, flow or tcp");
    order.push_back(t);
  }
  for (const std::string& name : order) {
    const char* t = name.c_str();
    const bool plugin = std::strncmp(t, "plugin", 6) == 0, memfd = std::strcmp(t, "plugin-memfd") == 0;
    int to_child[2], to_parent[2];
    if (pipe(to_child) != 0 || pipe(to_parent) != 0) die("pipe");
    pid_t pid = fork();
    if (pid == 0) {
      setenv("RDMAD_SOCKET", b.socket_path().c_str(), 1);
      int ends[2] = {to_child[0], to_parent[1]};
      if (plugin) run_plugin(false, ends, max_bytes, memfd);
      if (std::strcmp(t, "flow") == 0) run_flow(false, b.socket_path(), "node-a", max_bytes);
      if (std::strcmp(t, "tcp") == 0) run_tcp(false, tcp_port, max_bytes);
      std::_Exit(0);
    }
    setenv("RDMAD_SOCKET", a.socket_path().c_str(), 1);
    int ends[2] = {to_parent[0], to_child[1]};
    if (plugin) {
      // The plugin keeps one daemon connection per process: run the pinger in a child too.
      pid_t p2 = fork();
      if (p2 == 0) {
        run_plugin(true, ends, max_bytes, memfd);
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
