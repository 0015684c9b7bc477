// Soft backend over loopback against plain-socket baselines measured in the same run:
//   1. one RC QP, RDMA WRITE of 64 KiB and 1 MiB messages vs a TCP connection moving the same bytes,
//      and vs the bare UDP floor: one thread sending the same packet layout (12-byte head, 4096-byte
//      payload from the message buffer, 4-byte tail) in UDP_SEGMENT runs of 15 to a polling UDP_GRO
//      receiver, with no protocol at all — what one sending thread can push through kernel UDP
//      sockets when it does nothing else;
//   2. 64-byte WRITE round trip (post → ACK completion, the application polling its CQ) p50/p99 vs a
//      UDP ping-pong, with the client blocking in recv and with it polling its socket;
//   3. packets per second per core (packets handled / CPU seconds of both datapath threads and of
//      the posting thread, which computes payload CRCs at post).
// Each throughput round also runs the soft NICs with crc_at_post = false ("dp crc": the datapath
// computes every ICRC itself), so the column soft/dp is that change's A/B in the same round.
//   4. (only with `idle`) the cost of QPs that do nothing: 64 KiB WRITE throughput, the datapath's
//      packets per CPU second and 64 B round trip on one busy QP while 0, 63, 1023 and 65535 more QP
//      pairs between the same two NICs sit connected and idle (a NIC holds at most 65536 QPs).
//   5. (only with `threads`) datapath threads: 64 KiB WRITEs on 1, 2 and 4 QPs at once between two
//      NICs of 1 and 2 datapath threads each: Gb/s and the CPU the datapath threads used.
//   6. (only with `dpdk`) the dpdk backend, two NICs joined by net_memif in this process: 64 KiB and
//      1 MiB WRITEs on one QP with payloads attached in place and copied, against soft NICs, TCP,
//      the UDP floor and one thread's memcpy out of a 64 MiB source (the ceiling of a datapath that
//      copies each byte once); packets per second per datapath core; then the 64 B round trip
//      against the UDP ping-pong floors.
// Usage: verbs_soft_bench [seconds per throughput point, default 2] [write|rtt|all|idle|threads,
//                         default all] [rounds, default 3]
//   write: only part 1 (and 3); rtt: only part 2 — to profile one part by itself; idle: only part 4,
//   threads: only part 5, dpdk: only part 6, `rounds` times.
//   RDMAD_BENCH_SPAN=N makes the soft WRITEs cycle through N message-sized slices of a larger
//   source region (payload from memory instead of cache; TCP and the floor still reuse one buffer).
//   RDMAD_BENCH_CPU=1 also prints, for every soft throughput run, the share of a core the
//   requester's and the responder's datapath threads and the posting thread used.
//   Part 1 alternates soft, soft with dp crc, TCP and the UDP floor for each size `rounds` times (this VM's speed drifts between
//   runs seconds apart) and reports every round's ratio and their median.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <netinet/udp.h>
#include <poll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "rdmad/base/assert.h"
#include "rdmad/verbs/registry.h"

using namespace rdmad::verbs;
using Clock = std::chrono::steady_clock;

namespace {

double thread_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) / 1e9;
}

struct Ep {
  std::unique_ptr<Device> dev;
  std::unique_ptr<ProtectionDomain> pd;
  std::unique_ptr<CompletionQueue> cq;
  std::unique_ptr<QueuePair> qp;
  ~Ep() {
    qp.reset();
    cq.reset();
    pd.reset();
    dev.reset();
  }
};

// What the two NICs of a run are: soft NICs on loopback with these options, or dpdk NICs joined by
// a net_memif link (the first the server, the second the client, in this process).
struct NicKind {
  std::string backend = "soft";
  bool udp_offload = true;
  uint32_t completion_spin_us = 0;
  bool crc_at_post = true;
  uint32_t threads = 1;
  bool zero_copy_tx = true;  // dpdk: payloads attached in place (memif copies at tx)
  uint32_t busy_poll_us = 0;
};

NicKind soft_nic(bool udp_offload = true, uint32_t completion_spin_us = 0, bool crc_at_post = true,
                 uint32_t threads = 1) {
  return NicKind{"soft", udp_offload, completion_spin_us, crc_at_post, threads, true};
}

NicKind dpdk_nic(bool zero_copy_tx = true, uint32_t busy_poll_us = 0) {
  NicKind k;
  k.backend = "dpdk";
  k.zero_copy_tx = zero_copy_tx;
  k.busy_poll_us = busy_poll_us;
  return k;
}

void open_ep(BackendRegistry& reg, Ep& e, const NicKind& kind, bool second) {
  DeviceConfig c;
  c.backend_options["cc_enabled"] = false;
  c.backend_options["crc_at_post"] = kind.crc_at_post;
  c.backend_options["completion_spin_us"] = int64_t{kind.completion_spin_us};
  c.backend_options["datapath_threads"] = int64_t{kind.threads};
  c.backend_options["busy_poll_us"] = int64_t{kind.busy_poll_us};
  if (kind.backend == "soft") {
    c.backend_options["udp_port"] = 0;
    c.backend_options["udp_offload"] = kind.udp_offload;
  } else {
    // One memif link per run: the server port stays for the process (DPDK 22.11's memif cannot
    // remove it safely) and is opened again by name; each client is new.
    static int clients = 0;
    const std::string socket = ",socket=/tmp/rdmad-bench-" + std::to_string(getpid()) + ".sock,socket-abstract=no";
    c.address = second ? "10.99.0.2" : "10.99.0.1";
    c.backend_options["devargs"] =
        second ? "net_memif_bench_c" + std::to_string(clients++) + ",role=client" + socket
               : std::string("net_memif_bench_s,role=server") + socket;
    c.backend_options["mtu"] = 9000;
    c.backend_options["zero_copy_tx"] = kind.zero_copy_tx;
  }
  auto dev = reg.open(kind.backend, c);
  if (!dev.ok()) {
    std::fprintf(stderr, "cannot open a %s nic: %s\n", kind.backend.c_str(), dev.status().message().c_str());
    std::exit(1);
  }
  e.dev = std::move(dev.value());
  e.pd = std::move(e.dev->alloc_pd().value());
  e.cq = std::move(e.dev->create_cq(4096).value());
  QpInitAttr ia;
  ia.max_send_wr = 1024;
  ia.send_cq = ia.recv_cq = e.cq.get();
  e.qp = std::move(e.pd->create_qp(ia).value());
}

// Opens both NICs; a dpdk pair is used once both ends see their link up.
void open_pair(BackendRegistry& reg, Ep& a, Ep& b, const NicKind& kind) {
  open_ep(reg, a, kind, false);
  open_ep(reg, b, kind, true);
  const auto deadline = Clock::now() + std::chrono::seconds(10);
  for (Ep* e : {&a, &b}) {
    while (e->dev->query_port(1).value().state != PortState::kActive && Clock::now() < deadline) {
      std::this_thread::yield();
    }
  }
}

// Takes `x` to RTS towards QP `dest_qpn` at port `p`.
void connect_qp(QueuePair& x, const PortInfo& p, uint32_t dest_qpn, uint32_t mtu) {
  QpAttr at;
  at.state = QpState::kInit;
  at.access_flags = kAccessRemoteWrite;
  RDMAD_ASSERT(x.modify(at, kQpState | kQpAccessFlags).ok(), "modify failed");
  at.state = QpState::kRtr;
  at.path_mtu_bytes = mtu;
  at.dest_qp_num = dest_qpn;
  at.rq_psn = 0;
  at.dest_gid = p.gid;
  at.dest_udp_port = p.udp_port;
  RDMAD_ASSERT(x.modify(at, kQpState | kQpPathMtu | kQpDestQpn | kQpRqPsn | kQpAv).ok(), "modify failed");
  at.state = QpState::kRts;
  at.sq_psn = 0;
  at.timeout = 14;
  RDMAD_ASSERT(x.modify(at, kQpState | kQpSqPsn | kQpTimeout).ok(), "modify failed");
}

void connect(Ep& a, Ep& b, uint32_t mtu) {
  connect_qp(*a.qp, b.dev->query_port(1).value(), b.qp->qp_num(), mtu);
  connect_qp(*b.qp, a.dev->query_port(1).value(), a.qp->qp_num(), mtu);
}

// `n` more QP pairs between a's and b's NICs, connected and left idle (part 4).
std::vector<std::unique_ptr<QueuePair>> idle_pairs(Ep& a, Ep& b, int n, uint32_t depth = 16) {
  std::vector<std::unique_ptr<QueuePair>> qps;
  const PortInfo pa = a.dev->query_port(1).value(), pb = b.dev->query_port(1).value();
  QpInitAttr ia;
  ia.max_send_wr = depth;
  for (int i = 0; i < n; ++i) {
    ia.send_cq = ia.recv_cq = a.cq.get();
    auto x = std::move(a.pd->create_qp(ia).value());
    ia.send_cq = ia.recv_cq = b.cq.get();
    auto y = std::move(b.pd->create_qp(ia).value());
    connect_qp(*x, pb, y->qp_num(), 4096);
    connect_qp(*y, pa, x->qp_num(), 4096);
    qps.push_back(std::move(x));
    qps.push_back(std::move(y));
  }
  return qps;
}

// Polls `cq`; when it is empty, arms it, polls once more, and sleeps on its notification fd until
// a completion arrives (at most 10 ms) — how a throughput application waits without spinning.
size_t poll_or_wait(CompletionQueue& cq, std::span<WorkCompletion> out) {
  size_t n = cq.poll(out);
  if (n > 0) return n;
  if (!cq.request_notify().ok()) {
    std::this_thread::sleep_for(std::chrono::microseconds(20));
    return cq.poll(out);
  }
  n = cq.poll(out);
  if (n > 0) return n;
  pollfd p{cq.notify_fd(), POLLIN, 0};
  if (::poll(&p, 1, 10) > 0) cq.ack_notify();
  return cq.poll(out);
}

struct WriteResult {
  double gbps;
  double pps_per_core;
};

WriteResult soft_write_throughput(BackendRegistry& reg, size_t msg, double seconds, const NicKind& kind,
                                  int idle_qps = 0) {
  Ep a, b;
  open_pair(reg, a, b, kind);
  connect(a, b, 4096);
  auto idle = idle_pairs(a, b, idle_qps);
  // RDMAD_BENCH_SPAN=N: successive WRs read N different message-sized slices of the source, so
  // that with N · msg well above the caches the payload comes from memory, as in a large transfer.
  const char* span_env = std::getenv("RDMAD_BENCH_SPAN");
  const size_t span = msg * static_cast<size_t>(std::max(1, span_env != nullptr ? std::atoi(span_env) : 1));
  std::vector<uint8_t> src(span, 1), dst(msg, 0);
  auto smr = std::move(a.pd->reg_mr(src.data(), span, 0).value());
  size_t next_off = 0;
  auto dmr = std::move(b.pd->reg_mr(dst.data(), msg, kAccessLocalWrite | kAccessRemoteWrite).value());
  SendWr w;
  w.opcode = WrOpcode::kRdmaWrite;
  w.sge = {reinterpret_cast<uint64_t>(src.data()), static_cast<uint32_t>(msg), smr->lkey()};
  w.remote_addr = reinterpret_cast<uint64_t>(dst.data());
  w.rkey = dmr->rkey();
  const size_t inflight = std::max<size_t>(2, (4u << 20) / msg);  // ~4 MiB outstanding
  size_t outstanding = 0, done = 0;
  NicCounters c0a = a.dev->counters(), c0b = b.dev->counters();
  const double poster0 = thread_cpu_seconds();
  auto t0 = Clock::now();
  auto end = t0 + std::chrono::duration<double>(seconds);
  WorkCompletion wc[64];
  while (Clock::now() < end || outstanding > 0) {
    while (Clock::now() < end && outstanding < inflight) {
      w.sge.addr = reinterpret_cast<uint64_t>(src.data()) + next_off;
      next_off = (next_off + msg) % span;
      RDMAD_ASSERT(a.qp->post_send({&w, 1}).ok(), "post_send failed");
      ++outstanding;
    }
    size_t n = outstanding > 0 ? poll_or_wait(*a.cq, wc) : 0;
    for (size_t i = 0; i < n; ++i) {
      if (wc[i].status != WcStatus::kSuccess) {
        std::fprintf(stderr, "write failed: %s\n", std::string(to_string(wc[i].status)).c_str());
        std::exit(1);
      }
    }
    outstanding -= n;
    done += n;
  }
  double secs = std::chrono::duration<double>(Clock::now() - t0).count();
  const double poster_cpu = thread_cpu_seconds() - poster0;
  NicCounters c1a = a.dev->counters(), c1b = b.dev->counters();
  // CPU seconds of both NICs' datapath threads (each reads its own thread CPU clock), and of this
  // posting thread, which computes payload CRCs at post (crc_at_post).
  double cpu = static_cast<double>((c1a.datapath_cpu_ns - c0a.datapath_cpu_ns) + (c1b.datapath_cpu_ns - c0b.datapath_cpu_ns)) / 1e9 +
               poster_cpu;
  double packets = static_cast<double>((c1a.tx_packets - c0a.tx_packets) + (c1a.rx_packets - c0a.rx_packets) +
                                       (c1b.tx_packets - c0b.tx_packets) + (c1b.rx_packets - c0b.rx_packets));
  if (std::getenv("RDMAD_BENCH_CPU")) {
    std::fprintf(stderr, "  %s cpu share: requester %.2f responder %.2f poster %.2f\n",
                 kind.crc_at_post ? kind.backend.c_str() : "dp crc",
                 (c1a.datapath_cpu_ns - c0a.datapath_cpu_ns) / 1e9 / secs, (c1b.datapath_cpu_ns - c0b.datapath_cpu_ns) / 1e9 / secs,
                 poster_cpu / secs);
  }
  idle.clear();  // before the QPs' devices
  if (c1a.retransmitted_packets > c0a.retransmitted_packets) {
    std::fprintf(stderr, "  (%llu retransmitted packets)\n",
                 static_cast<unsigned long long>(c1a.retransmitted_packets - c0a.retransmitted_packets));
  }
  return {static_cast<double>(done) * msg * 8 / secs / 1e9, cpu > 0 ? packets / cpu : 0};
}

// Binds `fd` to 127.0.0.1 on a port the kernel picks; returns the bound address.
sockaddr_in bind_loopback(int fd) {
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(fd, reinterpret_cast<const sockaddr*>(&sa), sizeof sa);
  socklen_t len = sizeof sa;
  getsockname(fd, reinterpret_cast<sockaddr*>(&sa), &len);
  return sa;
}

double tcp_throughput(size_t msg, double seconds) {
  int ls = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in sa = bind_loopback(ls);
  listen(ls, 1);
  int c = socket(AF_INET, SOCK_STREAM, 0);
  connect(c, reinterpret_cast<const sockaddr*>(&sa), sizeof sa);
  int s = accept(ls, nullptr, nullptr);
  std::vector<uint8_t> buf(msg, 1);
  size_t received = 0;
  std::thread reader([&] {
    std::vector<uint8_t> rb(msg);
    for (;;) {
      ssize_t n = recv(s, rb.data(), rb.size(), 0);
      if (n <= 0) break;
      received += static_cast<size_t>(n);
    }
  });
  auto t0 = Clock::now();
  auto end = t0 + std::chrono::duration<double>(seconds);
  while (Clock::now() < end) {
    size_t off = 0;
    while (off < msg) off += static_cast<size_t>(send(c, buf.data() + off, msg - off, 0));
  }
  shutdown(c, SHUT_WR);
  reader.join();
  double secs = std::chrono::duration<double>(Clock::now() - t0).count();
  close(c);
  close(s);
  close(ls);
  return static_cast<double>(received) * 8 / secs / 1e9;
}

// The bare UDP floor (see the top of the file): payload Gb/s the receiver got. Each run of 15 packets
// is one sendmsg of 45 iovecs, as the soft datapath's gather sends are; the receiver polls its
// socket (so the sender never pays for waking it: with a blocking receiver that costs the sender
// 14% here), reads what the kernel coalesced into one 64 KiB buffer and counts the payload bytes.
// No checksum, no placement, no acknowledgements: only the kernel's work and the copies it makes.
double udp_gso_floor(size_t msg, double seconds) {
  // msg is a multiple of kPayload (64 KiB or 1 MiB), so every packet is whole.
  constexpr size_t kHead = 12, kPayload = 4096, kTail = 4, kSeg = kHead + kPayload + kTail, kRun = 15;
  int tx = socket(AF_INET, SOCK_DGRAM, 0), rx = socket(AF_INET, SOCK_DGRAM, 0);
  int buf_bytes = 8 << 20, one = 1;
  setsockopt(tx, SOL_SOCKET, SO_SNDBUFFORCE, &buf_bytes, sizeof buf_bytes);
  setsockopt(rx, SOL_SOCKET, SO_RCVBUFFORCE, &buf_bytes, sizeof buf_bytes);
  setsockopt(rx, SOL_UDP, UDP_GRO, &one, sizeof one);
  sockaddr_in sa = bind_loopback(rx);
  std::atomic<bool> stop{false};
  std::atomic<size_t> received{0};
  std::thread reader([&] {
    std::vector<uint8_t> rb(65536);
    while (!stop.load()) {
      ssize_t n = recv(rx, rb.data(), rb.size(), MSG_DONTWAIT);  // polls: the sender never wakes it
      if (n > 0) received.fetch_add(static_cast<size_t>(n) / kSeg * kPayload);  // messages are whole packets
    }
  });
  std::vector<uint8_t> src(msg, 1);
  uint8_t head[kHead] = {}, tail[kTail] = {};
  iovec iov[kRun * 3];
  alignas(cmsghdr) char ctrl[CMSG_SPACE(sizeof(uint16_t))];
  const uint16_t gso = kSeg;
  // Like the soft QP's window, at most 4 MiB ahead of the receiver, so the receive buffer never
  // overflows and the figure is what arrived, not what was dropped.
  constexpr size_t kWindow = 4u << 20;
  size_t sent = 0;
  auto t0 = Clock::now();
  auto end = t0 + std::chrono::duration<double>(seconds);
  while (Clock::now() < end) {
    while (sent > received.load() + kWindow) std::this_thread::yield();
    sent += msg;
    for (size_t off = 0; off < msg;) {
      size_t n = 0;
      for (; n < kRun && off < msg; ++n, off += kPayload) {
        iov[3 * n] = {head, kHead};
        iov[3 * n + 1] = {src.data() + off, kPayload};
        iov[3 * n + 2] = {tail, kTail};
      }
      msghdr m{};
      m.msg_name = &sa;
      m.msg_namelen = sizeof sa;
      m.msg_iov = iov;
      m.msg_iovlen = 3 * n;
      m.msg_control = ctrl;
      m.msg_controllen = sizeof ctrl;
      cmsghdr* c = CMSG_FIRSTHDR(&m);
      c->cmsg_level = SOL_UDP;
      c->cmsg_type = UDP_SEGMENT;
      c->cmsg_len = CMSG_LEN(sizeof gso);
      std::memcpy(CMSG_DATA(c), &gso, sizeof gso);
      if (sendmsg(tx, &m, 0) < 0 && errno != EAGAIN && errno != ENOBUFS) {
        std::perror("udp floor: sendmsg");
        std::exit(1);
      }
    }
  }
  double secs = std::chrono::duration<double>(Clock::now() - t0).count();
  stop.store(true);
  reader.join();
  close(tx);
  close(rx);
  return static_cast<double>(received.load()) * 8 / secs / 1e9;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t mid = v.size() / 2;
  return v.size() % 2 == 1 ? v[mid] : (v[mid - 1] + v[mid]) / 2;
}

struct Lat {
  double p50_us, p99_us;
};

Lat percentiles(std::vector<double>& v) {
  std::sort(v.begin(), v.end());
  return {v[v.size() / 2], v[v.size() * 99 / 100]};
}

Lat soft_write_rtt(BackendRegistry& reg, int iters, const NicKind& kind, int idle_qps = 0) {
  Ep a, b;
  open_pair(reg, a, b, kind);
  connect(a, b, 1024);
  auto idle = idle_pairs(a, b, idle_qps);
  std::vector<uint8_t> src(64, 1), dst(64, 0);
  auto smr = std::move(a.pd->reg_mr(src.data(), 64, 0).value());
  auto dmr = std::move(b.pd->reg_mr(dst.data(), 64, kAccessLocalWrite | kAccessRemoteWrite).value());
  SendWr w;
  w.opcode = WrOpcode::kRdmaWrite;
  w.sge = {reinterpret_cast<uint64_t>(src.data()), 64, smr->lkey()};
  w.remote_addr = reinterpret_cast<uint64_t>(dst.data());
  w.rkey = dmr->rkey();
  std::vector<double> us;
  WorkCompletion wc;
  for (int i = 0; i < iters + 1000; ++i) {
    auto t0 = Clock::now();
    RDMAD_ASSERT(a.qp->post_send({&w, 1}).ok(), "post_send failed");
    while (a.cq->poll({&wc, 1}) == 0) {
    }
    if (i >= 1000) us.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
  }
  idle.clear();
  return percentiles(us);
}

// Part 4: one busy QP among `idle` idle pairs, `rounds` times.
void idle_scaling(BackendRegistry& reg, double seconds, int rounds) {
  constexpr int kCases = 4;
  const int ns[kCases] = {0, 63, 1023, 65535};
  std::printf("%-36s %10s %10s %10s %10s\n", "1 busy QP among N idle pairs", "N = 0", "N = 63", "N = 1023",
              "N = 65535");
  for (int r = 0; r < rounds; ++r) {
    double gbps[kCases], pps[kCases], p50[kCases], p99[kCases];
    for (int k = 0; k < kCases; ++k) {
      const WriteResult w = soft_write_throughput(reg, size_t{64} << 10, seconds, soft_nic(), ns[k]);
      gbps[k] = w.gbps;
      pps[k] = w.pps_per_core;
      const Lat l = soft_write_rtt(reg, 5000, soft_nic(), ns[k]);
      p50[k] = l.p50_us;
      p99[k] = l.p99_us;
    }
    std::printf("round %-2d WRITE 64 KiB Gb/s %16.2f %10.2f %10.2f %10.2f\n", r + 1, gbps[0], gbps[1], gbps[2], gbps[3]);
    std::printf("round %-2d packets/s per datapath core %8.0f %10.0f %10.0f %10.0f\n", r + 1, pps[0], pps[1], pps[2],
                pps[3]);
    std::printf("round %-2d 64 B round trip p50 us %11.1f %10.1f %10.1f %10.1f\n", r + 1, p50[0], p50[1], p50[2], p50[3]);
    std::printf("round %-2d 64 B round trip p99 us %11.1f %10.1f %10.1f %10.1f\n", r + 1, p99[0], p99[1], p99[2], p99[3]);
    std::fflush(stdout);
  }
}

// Part 5: `qps` QPs between two NICs of `threads` datapath threads each, 64 KiB WRITEs on all of
// them at once for `seconds`: Gb/s and the datapath threads' CPU (both NICs, in cores).
struct ThreadsResult {
  double gbps;
  double datapath_cores;
};
ThreadsResult threads_throughput(BackendRegistry& reg, uint32_t threads, int qps, double seconds) {
  constexpr size_t kMsg = size_t{64} << 10;
  Ep a, b;
  open_pair(reg, a, b, soft_nic(true, 0, true, threads));
  connect(a, b, 4096);
  std::vector<std::unique_ptr<QueuePair>> more = idle_pairs(a, b, qps - 1, 64);  // a's QPs at even indices
  std::vector<QueuePair*> senders{a.qp.get()};
  for (size_t i = 0; i < more.size(); i += 2) senders.push_back(more[i].get());
  std::vector<uint8_t> src(kMsg, 1), dst(kMsg * senders.size(), 0);
  auto smr = std::move(a.pd->reg_mr(src.data(), src.size(), 0).value());
  auto dmr = std::move(b.pd->reg_mr(dst.data(), dst.size(), kAccessLocalWrite | kAccessRemoteWrite).value());
  const size_t per_qp = std::max<size_t>(2, (4u << 20) / kMsg / senders.size());
  std::vector<size_t> outstanding(senders.size(), 0);
  size_t done = 0;
  NicCounters c0a = a.dev->counters(), c0b = b.dev->counters();
  auto t0 = Clock::now();
  auto end = t0 + std::chrono::duration<double>(seconds);
  WorkCompletion wc[64];
  size_t total_out = 0;
  while (Clock::now() < end || total_out > 0) {
    for (size_t q = 0; q < senders.size() && Clock::now() < end; ++q) {
      while (outstanding[q] < per_qp) {
        SendWr w;
        w.opcode = WrOpcode::kRdmaWrite;
        w.wr_id = q;
        w.sge = {reinterpret_cast<uint64_t>(src.data()), static_cast<uint32_t>(kMsg), smr->lkey()};
        w.remote_addr = reinterpret_cast<uint64_t>(dst.data()) + q * kMsg;
        w.rkey = dmr->rkey();
        RDMAD_ASSERT(senders[q]->post_send({&w, 1}).ok(), "post_send failed");
        ++outstanding[q];
        ++total_out;
      }
    }
    const size_t n = total_out > 0 ? poll_or_wait(*a.cq, wc) : 0;
    for (size_t i = 0; i < n; ++i) {
      RDMAD_ASSERT(wc[i].status == WcStatus::kSuccess, "write failed");
      --outstanding[wc[i].wr_id];
      --total_out;
    }
    done += n;
  }
  const double secs = std::chrono::duration<double>(Clock::now() - t0).count();
  NicCounters c1a = a.dev->counters(), c1b = b.dev->counters();
  const double cpu =
      static_cast<double>((c1a.datapath_cpu_ns - c0a.datapath_cpu_ns) + (c1b.datapath_cpu_ns - c0b.datapath_cpu_ns)) / 1e9;
  more.clear();
  return {static_cast<double>(done) * kMsg * 8 / secs / 1e9, cpu / secs};
}

void threads_scaling(BackendRegistry& reg, double seconds, int rounds) {
  std::printf("%-44s %16s %16s %16s\n", "64 KiB WRITEs, Gb/s (datapath cores)", "1 QP", "2 QPs", "4 QPs");
  for (int r = 0; r < rounds; ++r) {
    for (uint32_t threads : {1u, 2u}) {
      std::printf("round %-2d %u datapath thread(s) per NIC %10s", r + 1, threads, "");
      for (int qps : {1, 2, 4}) {
        const ThreadsResult t = threads_throughput(reg, threads, qps, seconds);
        std::printf(" %9.2f (%4.2f)", t.gbps, t.datapath_cores);
      }
      std::printf("\n");
      std::fflush(stdout);
    }
  }
}

// busy_client: the client polls its socket (MSG_DONTWAIT) instead of blocking in recv, as the soft
// round trip's application polls its CQ; the echo side blocks, as the soft datapath sleeps.
Lat udp_pingpong(int iters, bool busy_client = false) {
  int a = socket(AF_INET, SOCK_DGRAM, 0), b = socket(AF_INET, SOCK_DGRAM, 0);
  const sockaddr_in sa = bind_loopback(a), sb = bind_loopback(b);
  std::thread echo([&] {
    char buf[128];
    for (int i = 0; i < iters + 1000; ++i) {
      ssize_t n = recv(b, buf, sizeof buf, 0);
      sendto(b, buf, static_cast<size_t>(n), 0, reinterpret_cast<const sockaddr*>(&sa), sizeof sa);
    }
  });
  char msg[64] = {};
  std::vector<double> us;
  for (int i = 0; i < iters + 1000; ++i) {
    auto t0 = Clock::now();
    sendto(a, msg, sizeof msg, 0, reinterpret_cast<const sockaddr*>(&sb), sizeof sb);
    if (busy_client) {
      while (recv(a, msg, sizeof msg, MSG_DONTWAIT) < 0) {
      }
    } else {
      recv(a, msg, sizeof msg, 0);
    }
    if (i >= 1000) us.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
  }
  echo.join();
  close(a);
  close(b);
  return percentiles(us);
}

}  // namespace

// One thread copying `msg`-byte messages out of a 64 MiB source (out of the caches, as a large
// transfer's payload) into one destination: the ceiling of a datapath that copies each byte once.
double memcpy_gbps(size_t msg, double seconds) {
  const size_t span = size_t{64} << 20;
  std::vector<uint8_t> src(span, 3), dst(msg, 0);
  size_t off = 0, bytes = 0;
  const auto t0 = Clock::now();
  const auto end = t0 + std::chrono::duration<double>(seconds);
  while (Clock::now() < end) {
    std::memcpy(dst.data(), src.data() + off, msg);
    off = (off + msg) % span;
    bytes += msg;
  }
  const double secs = std::chrono::duration<double>(Clock::now() - t0).count();
  volatile uint8_t keep = dst[msg / 2];
  (void)keep;
  return static_cast<double>(bytes) * 8 / secs / 1e9;
}

// Part 6: the dpdk backend over net_memif against soft, TCP, the UDP floor and memcpy, in rounds;
// then 64 B round trips against the UDP ping-pong floors.
void dpdk_part(BackendRegistry& reg, double seconds, int rounds) {
  if (reg.find("dpdk") == nullptr) {
    std::printf("dpdk: not built into this binary (RDMAD_WITH_DPDK off)\n");
    return;
  }
  std::printf("%-24s %9s %9s %9s %9s %9s %9s %8s %8s %8s %14s %14s\n", "1 QP, Gb/s", "dpdk", "dpdk cp",
              "soft", "tcp", "udp floor", "memcpy", "dpdk/tcp", "dpdk/sft", "dpdk/cpy", "dpdk pkts/s/c",
              "soft pkts/s/c");
  for (size_t msg : {size_t{64} << 10, size_t{1} << 20}) {
    const char* name = msg == (64u << 10) ? "64 KiB" : "1 MiB";
    std::vector<double> vs_tcp, vs_soft, vs_copy;
    for (int r = 0; r < rounds; ++r) {
      const WriteResult d = soft_write_throughput(reg, msg, seconds, dpdk_nic(true));
      const WriteResult dc = soft_write_throughput(reg, msg, seconds, dpdk_nic(false));
      const WriteResult so = soft_write_throughput(reg, msg, seconds, soft_nic());
      const double t = tcp_throughput(msg, seconds);
      const double f = udp_gso_floor(msg, seconds);
      const double m = memcpy_gbps(msg, seconds);
      vs_tcp.push_back(d.gbps / t);
      vs_soft.push_back(d.gbps / so.gbps);
      vs_copy.push_back(d.gbps / m);
      std::printf("WRITE %-6s round %-5d %9.2f %9.2f %9.2f %9.2f %9.2f %9.2f %8.2f %8.2f %8.2f %14.0f %14.0f\n", name,
                  r + 1, d.gbps, dc.gbps, so.gbps, t, f, m, d.gbps / t, d.gbps / so.gbps, d.gbps / m, d.pps_per_core,
                  so.pps_per_core);
      std::fflush(stdout);
    }
    std::printf("WRITE %-6s median of %d rounds %59s %8.2f %8.2f %8.2f\n", name, rounds, "", median(vs_tcp),
                median(vs_soft), median(vs_copy));
  }
  const int iters = 20000;
  // dpdk NICs nap when idle (no rx interrupts on memif): "dpdk" as configured by default, "dpdk
  // poll" with busy_poll_us = 50 (polling on after each pass with work, as DPDK datapaths do).
  const Lat d = soft_write_rtt(reg, iters, dpdk_nic());
  const Lat dp = soft_write_rtt(reg, iters, dpdk_nic(true, 50));
  const Lat so = soft_write_rtt(reg, iters, soft_nic());
  const Lat u = udp_pingpong(iters);
  const Lat ub = udp_pingpong(iters, true);
  std::printf("%-20s %9s %10s %9s %9s %12s %10s %12s\n", "64 B round trip", "dpdk us", "dpdk poll", "soft us",
              "udp us", "udp poll us", "dpdk/udp", "dpoll/udp");
  std::printf("%-20s %9.1f %10.1f %9.1f %9.1f %12.1f %10.2f %12.2f\n", "p50", d.p50_us, dp.p50_us, so.p50_us, u.p50_us,
              ub.p50_us, d.p50_us / u.p50_us, dp.p50_us / u.p50_us);
  std::printf("%-20s %9.1f %10.1f %9.1f %9.1f %12.1f %10.2f %12.2f\n", "p99", d.p99_us, dp.p99_us, so.p99_us, u.p99_us,
              ub.p99_us, d.p99_us / u.p99_us, dp.p99_us / u.p99_us);
}

int main(int argc, char** argv) {
  double seconds = argc > 1 ? std::atof(argv[1]) : 2.0;
  const std::string part = argc > 2 ? argv[2] : "all";
  const int rounds = argc > 3 ? std::atoi(argv[3]) : 3;
  if (seconds <= 0 ||
      (part != "all" && part != "write" && part != "rtt" && part != "idle" && part != "threads" && part != "dpdk") ||
      rounds < 1) {
    std::fprintf(stderr,
                 "usage: verbs_soft_bench [seconds per throughput point > 0] [write|rtt|all|idle|threads|dpdk] "
                 "[rounds >= 1]\n");
    return 2;
  }
  BackendRegistry reg;
  rdmad::verbs::register_builtin_backends(reg);
  if (part == "idle") {
    idle_scaling(reg, seconds, rounds);
    return 0;
  }
  if (part == "threads") {
    threads_scaling(reg, seconds, rounds);
    return 0;
  }
  if (part == "dpdk") {
    dpdk_part(reg, seconds, rounds);
    return 0;
  }
  // "no offload": the same soft NICs with udp_offload = false (one datagram per packet each way).
  // "dp crc": the same soft NICs with crc_at_post = false (the datapath computes every ICRC).
  if (part != "rtt") {
    std::printf("%-28s %10s %9s %9s %9s %8s %8s %8s %8s %17s\n", "throughput (1 QP, loopback)", "soft Gb/s",
                "dp crc", "tcp Gb/s", "udp floor", "soft/tcp", "soft/udp", "udp/tcp", "soft/dp", "soft pkts/s/core");
  }
  for (size_t msg : {size_t{64} << 10, size_t{1} << 20}) {
    if (part == "rtt") break;
    const char* name = msg == (64u << 10) ? "64 KiB" : "1 MiB";
    std::vector<double> vs_tcp, vs_floor, floor_vs_tcp, vs_dp;
    for (int r = 0; r < rounds; ++r) {
      WriteResult s = soft_write_throughput(reg, msg, seconds, soft_nic());
      WriteResult d = soft_write_throughput(reg, msg, seconds, soft_nic(true, 0, false));
      double t = tcp_throughput(msg, seconds);
      double f = udp_gso_floor(msg, seconds);
      vs_tcp.push_back(s.gbps / t);
      vs_floor.push_back(s.gbps / f);
      floor_vs_tcp.push_back(f / t);
      vs_dp.push_back(s.gbps / d.gbps);
      std::printf("WRITE %-6s round %-10d %10.2f %9.2f %9.2f %9.2f %8.2f %8.2f %8.2f %8.2f %17.0f\n", name, r + 1,
                  s.gbps, d.gbps, t, f, s.gbps / t, s.gbps / f, f / t, s.gbps / d.gbps, s.pps_per_core);
      std::fflush(stdout);
    }
    std::printf("WRITE %-6s median of %-2d rounds %40s %8.2f %8.2f %8.2f %8.2f\n", name, rounds, "", median(vs_tcp),
                median(vs_floor), median(floor_vs_tcp), median(vs_dp));
    WriteResult plain = soft_write_throughput(reg, msg, seconds, soft_nic(false));
    std::printf("WRITE %-6s no offload %30.2f Gb/s %12.0f pkts/s/core\n", name, plain.gbps, plain.pps_per_core);
  }
  if (part == "write") return 0;
  const int iters = 20000;
  Lat s = soft_write_rtt(reg, iters, soft_nic());
  Lat u = udp_pingpong(iters);
  Lat ub = udp_pingpong(iters, true);
  Lat spin = soft_write_rtt(reg, iters, soft_nic(true, 20));  // completion_spin_us = 20 on both NICs
  // Two floors: both UDP threads blocking, and the client polling like the soft bench's application.
  std::printf("%-20s %9s %9s %7s %12s %7s %10s\n", "64 B round trip", "soft us", "udp us", "ratio", "udp poll us",
              "ratio", "spin20 us");
  std::printf("%-20s %9.1f %9.1f %7.2f %12.1f %7.2f %10.1f\n", "p50", s.p50_us, u.p50_us, s.p50_us / u.p50_us,
              ub.p50_us, s.p50_us / ub.p50_us, spin.p50_us);
  std::printf("%-20s %9.1f %9.1f %7.2f %12.1f %7.2f %10.1f\n", "p99", s.p99_us, u.p99_us, s.p99_us / u.p99_us,
              ub.p99_us, s.p99_us / ub.p99_us, spin.p99_us);
  return 0;
}
