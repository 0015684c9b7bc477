// Two processes, one RC QP each, on the devices of one backend (rdma_core: two hosts' NICs, or rxe in
// two qemu guests as tests/vm/guest/perftest.sh runs it), measured the way perftest measures, so
// its figures sit beside ib_write_bw's and ib_send_lat's on the same devices:
//   write_bw  RDMA WRITEs of --size bytes, --iters of them, at most --tx-depth outstanding, every
//             --cq-mod-th signaled (ib_write_bw -t / -Q), the requester busy-polling its CQ;
//             Gb/s = bytes · 8 / 10^9 / (first post → last completion), as --report_gbits.
//   send_lat  SEND ping-pong of --size bytes, --iters round trips; one-way latency = round trip / 2,
//             median (perftest's t_typical) and mean (t_avg). --events sleeps on the CQ's
//             notification fd (ib_send_lat -e) instead of spinning.
// Usage: verbs_pair_bench server|client ADDRESS --device NAME --test write_bw|send_lat
//                         [--backend rdma_core|soft] [--size BYTES] [--iters N] [--port TCP_PORT]
//                         [--tx-depth N] [--cq-mod N] [--events] [--mtu BYTES]
//   --mtu: the path MTU (default: the smaller of the two ports' active MTUs, as perftest).
//   The server binds ADDRESS:port (TCP, for the QP exchange; 0.0.0.0 for any), the client connects
//   to it, retrying for 60 s, as perftest's client does not. The client prints the result line.
//   soft: ADDRESS (the server's: 127.0.0.1) is also where both soft NICs bind (ephemeral UDP ports).
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "rdmad/verbs/registry.h"

using namespace rdmad::verbs;
using Clock = std::chrono::steady_clock;

namespace {

[[noreturn]] void die(const std::string& what) {
  std::fprintf(stderr, "verbs_pair_bench: %s\n", what.c_str());
  std::exit(1);
}

struct Options {
  bool server = false;
  std::string address;
  std::string backend = "rdma_core";
  std::string device;
  std::string test;
  uint32_t size = 65536;
  uint32_t iters = 1000;
  uint16_t port = 18600;
  uint32_t tx_depth = 128;
  uint32_t cq_mod = 16;
  bool events = false;
  uint32_t mtu = 0;  // 0: the ports' active MTU
};

Options parse(int argc, char** argv) {
  Options o;
  if (argc < 3) die("usage: verbs_pair_bench server|client ADDRESS --device NAME --test write_bw|send_lat ...");
  o.server = std::strcmp(argv[1], "server") == 0;
  if (!o.server && std::strcmp(argv[1], "client") != 0) die("first argument: server or client");
  o.address = argv[2];
  for (int i = 3; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) die(a + " needs a value");
      return argv[++i];
    };
    auto number = [&]() { return static_cast<uint32_t>(std::stoul(value())); };
    if (a == "--backend") o.backend = value();
    else if (a == "--device") o.device = value();
    else if (a == "--test") o.test = value();
    else if (a == "--size") o.size = number();
    else if (a == "--iters") o.iters = number();
    else if (a == "--port") o.port = static_cast<uint16_t>(number());
    else if (a == "--tx-depth") o.tx_depth = number();
    else if (a == "--cq-mod") o.cq_mod = number();
    else if (a == "--events") o.events = true;
    else if (a == "--mtu") o.mtu = number();
    else die("unknown option " + a);
  }
  if (o.test != "write_bw" && o.test != "send_lat") die("--test write_bw or send_lat");
  if (o.size == 0 || o.iters == 0 || o.tx_depth == 0 || o.cq_mod == 0) die("sizes and counts must be positive");
  return o;
}

// ---- the TCP side channel (QP numbers, PSNs, GIDs, keys), as perftest's -------------------------

void write_all(int fd, const void* p, size_t n) {
  const auto* b = static_cast<const uint8_t*>(p);
  while (n > 0) {
    const ssize_t k = ::write(fd, b, n);
    if (k <= 0) die(std::string("side channel write: ") + std::strerror(errno));
    b += k;
    n -= static_cast<size_t>(k);
  }
}

void read_all(int fd, void* p, size_t n) {
  auto* b = static_cast<uint8_t*>(p);
  while (n > 0) {
    const ssize_t k = ::read(fd, b, n);
    if (k <= 0) die("side channel closed by the peer");
    b += k;
    n -= static_cast<size_t>(k);
  }
}

sockaddr_in tcp_address(const std::string& ip, uint16_t port) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  if (inet_pton(AF_INET, ip.c_str(), &a.sin_addr) != 1) die("not an IPv4 address: " + ip);
  return a;
}

int side_channel(const Options& o) {
  const sockaddr_in where = tcp_address(o.address, o.port);
  const auto deadline = Clock::now() + std::chrono::seconds(60);
  if (o.server) {
    const int l = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    const int one = 1;
    ::setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (::bind(l, reinterpret_cast<const sockaddr*>(&where), sizeof where) != 0 || ::listen(l, 1) != 0) {
      die(std::string("listen on ") + o.address + ": " + std::strerror(errno));
    }
    pollfd p{l, POLLIN, 0};
    if (::poll(&p, 1, 60000) != 1) die("no client within 60 s");
    const int fd = ::accept4(l, nullptr, nullptr, SOCK_CLOEXEC);
    ::close(l);
    if (fd < 0) die(std::string("accept: ") + std::strerror(errno));
    return fd;
  }
  // The server may not be listening yet: try again until the deadline.
  while (true) {
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (::connect(fd, reinterpret_cast<const sockaddr*>(&where), sizeof where) == 0) {
      const int one = 1;
      ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
      return fd;
    }
    ::close(fd);
    if (Clock::now() > deadline) die("no server at " + o.address + " within 60 s");
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

struct Wire {  // one endpoint's half of the exchange (same machine type on both ends)
  uint32_t qpn;
  uint32_t psn;
  uint8_t gid[16];
  uint64_t addr;
  uint32_t rkey;
  uint32_t mtu;
  uint16_t udp_port;
  uint16_t lid;
};

// ---- one endpoint -------------------------------------------------------------------------------

struct Endpoint {
  std::unique_ptr<Device> dev;
  std::unique_ptr<ProtectionDomain> pd;
  std::unique_ptr<CompletionQueue> cq;
  std::unique_ptr<QueuePair> qp;
  std::vector<uint8_t> buf;  // write_bw: the source (client) or target (server); send_lat: send half, receive half
  std::unique_ptr<MemoryRegion> mr;
  ~Endpoint() {  // QP → CQ → MR → PD → device
    qp.reset();
    cq.reset();
    mr.reset();
    pd.reset();
    dev.reset();
  }
};

void open_endpoint(const Options& o, Endpoint& e) {
  BackendRegistry reg;
  register_builtin_backends(reg);
  DeviceConfig c;
  c.name = o.device;
  const BackendInfo* backend = reg.find(o.backend);
  if (backend != nullptr && backend->caps.needs_address) {  // a NIC of its own on the bench's address
    c.address = o.address == "0.0.0.0" ? "127.0.0.1" : o.address;
    c.backend_options["udp_port"] = 0;
    c.backend_options["cc_enabled"] = false;
  }
  auto d = reg.open(o.backend, c);
  if (!d.ok()) die("open " + o.backend + " " + o.device + ": " + d.status().message());
  e.dev = std::move(d.value());
  e.pd = std::move(e.dev->alloc_pd().value());
  auto cq = e.dev->create_cq(4 * o.tx_depth + 64);
  if (!cq.ok()) die("create_cq: " + cq.status().message());
  e.cq = std::move(cq.value());
  QpInitAttr ia;
  ia.max_send_wr = o.tx_depth;
  ia.max_recv_wr = o.tx_depth;
  ia.send_cq = e.cq.get();
  ia.recv_cq = e.cq.get();
  auto qp = e.pd->create_qp(ia);
  if (!qp.ok()) die("create_qp: " + qp.status().message());
  e.qp = std::move(qp.value());
  e.buf.assign(o.test == "send_lat" ? 2 * size_t{o.size} : o.size, 0);
  for (size_t i = 0; i < e.buf.size(); ++i) e.buf[i] = static_cast<uint8_t>(i * 7 + 1);
  auto mr = e.pd->reg_mr(e.buf.data(), e.buf.size(), kAccessLocalWrite | kAccessRemoteWrite);
  if (!mr.ok()) die("reg_mr: " + mr.status().message());
  e.mr = std::move(mr.value());
}

void connect(Endpoint& e, const Wire& local, const Wire& remote) {
  QpAttr a;
  a.state = QpState::kInit;
  a.access_flags = kAccessRemoteWrite;
  Status st = e.qp->modify(a, kQpState | kQpAccessFlags);
  if (st.ok()) {
    a.state = QpState::kRtr;
    a.path_mtu_bytes = std::min(local.mtu, remote.mtu);
    a.dest_qp_num = remote.qpn;
    a.rq_psn = remote.psn;
    std::memcpy(a.dest_gid.raw.data(), remote.gid, 16);
    a.dest_udp_port = remote.udp_port;
    a.dest_lid = remote.lid;
    a.min_rnr_timer = 12;
    a.max_dest_rd_atomic = 16;
    st = e.qp->modify(a, kQpState | kQpPathMtu | kQpDestQpn | kQpRqPsn | kQpAv | kQpMinRnrTimer | kQpMaxDestRdAtomic);
  }
  if (st.ok()) {
    a.state = QpState::kRts;
    a.sq_psn = local.psn;
    a.timeout = 14;
    a.retry_cnt = 7;
    a.rnr_retry = 7;
    a.max_rd_atomic = 16;
    st = e.qp->modify(a, kQpState | kQpSqPsn | kQpTimeout | kQpRetryCnt | kQpRnrRetry | kQpMaxRdAtomic);
  }
  if (!st.ok()) die("connect the QP: " + st.message());
}

/// Polls until at least one completion (spinning, or asleep on the notification fd with --events);
/// dies after 60 s or on an error completion.
size_t wait_some(Endpoint& e, bool events, std::span<WorkCompletion> out) {
  const auto deadline = Clock::now() + std::chrono::seconds(60);
  while (true) {
    size_t n = e.cq->poll(out);
    if (n == 0 && events) {
      if (!e.cq->request_notify().ok()) die("request_notify failed");
      n = e.cq->poll(out);  // a completion that came before the request raises no event
      if (n == 0) {
        pollfd p{e.cq->notify_fd(), POLLIN, 0};
        ::poll(&p, 1, 1000);
        e.cq->ack_notify();
        n = e.cq->poll(out);
      }
    }
    for (size_t i = 0; i < n; ++i) {
      if (out[i].status != WcStatus::kSuccess) die(std::string("completion: ") + std::string(to_string(out[i].status)));
    }
    if (n > 0) return n;
    if (Clock::now() > deadline) die("no completion within 60 s");
  }
}

void run_write_bw(const Options& o, Endpoint& e, const Wire& remote, int fd) {
  uint8_t done = 1;
  if (o.server) {  // the target: nothing to do but wait for the client's end
    read_all(fd, &done, 1);
    return;
  }
  std::vector<SendWr> batch(32);
  WorkCompletion wc[64];
  uint64_t posted = 0, completed = 0;
  const auto start = Clock::now();
  while (completed < o.iters) {
    size_t n = 0;
    while (posted + n < o.iters && posted + n - completed < o.tx_depth && n < batch.size()) {
      SendWr& w = batch[n];
      const uint64_t index = posted + n + 1;
      w.wr_id = index;
      w.opcode = WrOpcode::kRdmaWrite;
      w.sge = {reinterpret_cast<uint64_t>(e.buf.data()), o.size, e.mr->lkey()};
      w.remote_addr = remote.addr;
      w.rkey = remote.rkey;
      w.signaled = index % o.cq_mod == 0 || index == o.iters;
      ++n;
    }
    if (n > 0) {
      size_t took = 0;
      const Status st = e.qp->post_send({batch.data(), n}, &took);
      if (!st.ok() && st.code() != StatusCode::kNoResource) die("post_send: " + st.message());
      posted += took;
    }
    const size_t k = posted - completed >= o.tx_depth || posted == o.iters ? wait_some(e, false, wc) : e.cq->poll(wc);
    for (size_t i = 0; i < k; ++i) {
      if (wc[i].status != WcStatus::kSuccess) die(std::string("completion: ") + std::string(to_string(wc[i].status)));
      completed = std::max<uint64_t>(completed, wc[i].wr_id);  // a signaled WR completes the ones before it
    }
  }
  const double secs = std::chrono::duration<double>(Clock::now() - start).count();
  write_all(fd, &done, 1);
  const double gbps = static_cast<double>(o.size) * o.iters * 8 / 1e9 / secs;
  std::printf("write_bw %u B x %u: %.4f Gb/s (%.3f s)\n", o.size, o.iters, gbps, secs);
}

void run_send_lat(const Options& o, Endpoint& e, int fd) {
  uint8_t* send_half = e.buf.data();
  uint8_t* recv_half = e.buf.data() + o.size;
  const uint32_t lkey = e.mr->lkey();
  auto post_recv = [&](uint64_t id) {
    RecvWr r;
    r.wr_id = id;
    r.sge = {reinterpret_cast<uint64_t>(recv_half), o.size, lkey};
    if (!e.qp->post_recv({&r, 1}).ok()) die("post_recv failed");
  };
  const uint32_t ring = std::min<uint32_t>(16, o.tx_depth);
  for (uint32_t i = 0; i < ring; ++i) post_recv(i);
  uint8_t go = 1;  // both sides have receives posted before the first SEND
  write_all(fd, &go, 1);
  read_all(fd, &go, 1);
  SendWr s;
  s.opcode = WrOpcode::kSend;
  s.sge = {reinterpret_cast<uint64_t>(send_half), o.size, lkey};
  WorkCompletion wc[16];
  uint64_t received = 0, sent = 0;  // completions so far; a receive is posted again at once
  auto wait_until = [&](uint64_t want_received, uint64_t want_sent) {
    while (received < want_received || sent < want_sent) {
      const size_t n = wait_some(e, o.events, wc);
      for (size_t i = 0; i < n; ++i) {
        if (wc[i].opcode == WcOpcode::kRecv) {
          ++received;
          post_recv(wc[i].wr_id);
        } else {
          ++sent;
        }
      }
    }
  };
  auto post_send = [&] {
    if (!e.qp->post_send({&s, 1}).ok()) die("post_send failed");
  };
  std::vector<double> one_way_us;
  one_way_us.reserve(o.iters);
  for (uint64_t i = 1; i <= o.iters; ++i) {
    const auto t0 = Clock::now();
    if (o.server) {  // answer the i-th SEND (the previous answer's completion first: one in flight)
      wait_until(i, i - 1);
      post_send();
    } else {
      post_send();
      wait_until(i, i);
    }
    one_way_us.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count() / 2);
  }
  if (o.server) wait_until(o.iters, o.iters);
  if (o.server) return;
  std::vector<double> sorted = one_way_us;
  std::sort(sorted.begin(), sorted.end());
  double sum = 0;
  for (double v : one_way_us) sum += v;
  std::printf("send_lat %u B x %u%s: p50 %.2f us, mean %.2f us (one way)\n", o.size, o.iters,
              o.events ? " events" : "", sorted[sorted.size() / 2], sum / static_cast<double>(sorted.size()));
}

}  // namespace

int main(int argc, char** argv) {
  const Options o = parse(argc, argv);
  Endpoint e;
  open_endpoint(o, e);
  auto queried = e.dev->query_port(1);
  if (!queried.ok()) die("query_port: " + queried.status().message());
  const PortInfo port = queried.value();
  Wire local{};
  local.qpn = e.qp->qp_num();
  local.psn = (o.server ? 0x10203u : 0x40506u) & 0xffffff;
  std::memcpy(local.gid, port.gid.raw.data(), 16);
  local.addr = reinterpret_cast<uint64_t>(e.buf.data());
  local.rkey = e.mr->rkey();
  local.mtu = o.mtu != 0 ? o.mtu : port.active_mtu_bytes;
  local.udp_port = port.udp_port;
  local.lid = port.lid;
  const int fd = side_channel(o);
  Wire remote{};
  write_all(fd, &local, sizeof local);
  read_all(fd, &remote, sizeof remote);
  connect(e, local, remote);
  uint8_t ready = 1;  // both QPs in RTS before anything is sent
  write_all(fd, &ready, 1);
  read_all(fd, &ready, 1);
  if (o.test == "write_bw") {
    run_write_bw(o, e, remote, fd);
  } else {
    run_send_lat(o, e, fd);
  }
  ::close(fd);
  return 0;
}
