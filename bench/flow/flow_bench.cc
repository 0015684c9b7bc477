// Flows through two real rdmad processes (soft NICs on loopback), against the soft backend used
// directly in one process:
//   1. ring latency: a zero-length WRITE completes inside node-a's daemon (ring -> engine ->
//      completion ring, no network), round trip with a busy-polling client, with rdmad_flow_wait
//      (eventfd), and paced so that the engine is asleep when the request comes (doorbell), with
//      eventfd baselines between two threads of this process;
//   2. 64 B WRITE round trip node-a -> node-b through both daemons vs a soft QP used directly;
//   3. 1 GiB WRITE throughput with 1 and 2 NICs per node and 1 and 4 QPs per lane ([flow]
//      qps_per_lane; chunk 1 MiB, default lane window), with the CPU time of each daemon's threads,
//      as a fraction of one soft QP used directly, measured in the same run (and the soft backend
//      with 4 QP pairs directly). The cases take turns and stay alive together: they hold
//      2 x bytes x 6 of memory (12 GiB at the default 1 GiB; --bytes=536870912 halves it).
// Usage: flow_bench [--iters=N] [--bytes=N] [--reps=N] [--pace-us=N] [--qp-timeout=N]
// [--qps-per-lane=1,4] [--source-ports=N] [--datapath-threads=N] [--backend=soft|dpdk]
// [--only=ring,small,throughput,sendrecv]
//   --source-ports: the soft NICs' source_ports option in part 3 (daemons and baseline; default: the
//   backend's, 8 UDP source ports, each QP pair hashed onto one).
//   --datapath-threads: the soft NICs' datapath_threads in part 3 (daemons and baseline; default 1):
//   a lane's QPs then spread over that many threads per NIC.
//   --backend=dpdk: part 3 with dpdk NICs (the RoCEv2 engine over DPDK ports) instead of soft ones:
//   each rail of the two daemons one net_memif link (node-b the server), and the baseline two dpdk
//   devices in this process joined by their own memif link; x bare is then over the bare dpdk QP.
//   4. SEND into a receive posted just before, node-a -> node-b (receive advertisement, WRITE,
//      send done, and the receive's own MRs in the peer's domain).
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/resource.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cinttypes>
#include <cstdlib>
#include <cstring>
#include <optional>

#include "daemon_pair.h"
#include "rdmad/base/trace_points.h"
#include "soft_direct.h"
#include "support/fill_pattern.h"

using Clock = std::chrono::steady_clock;
using rdmad::bench::FlowPair;
using rdmad::bench::SoftDirect;

namespace {

struct Options {
  int iters = 20000;
  size_t bytes = size_t{1} << 30;
  int reps = 3;
  int pace_us = 1000;   // between paced requests
  int qp_timeout = 14;  // the daemon's default (flow_cluster.h uses 8: ~1 ms, see BENCHMARKS.md)
  std::string only = "ring,small,throughput,sendrecv";
  std::vector<int> qps_per_lane = {1, 4};  // throughput: the [flow] qps_per_lane values measured
  int source_ports = -1;                   // throughput: soft source_ports; -1: the backend's default
  int datapath_threads = 1;                // throughput: soft datapath_threads
  std::string backend = "soft";            // throughput: the NICs' backend (soft or dpdk)
};

std::vector<int> int_list(const std::string& text) {
  std::vector<int> out;
  for (size_t at = 0; at < text.size();) {
    const size_t comma = std::min(text.find(',', at), text.size());
    out.push_back(std::atoi(text.substr(at, comma - at).c_str()));
    at = comma + 1;
  }
  return out;
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&](const char* key) -> std::optional<std::string> {
      const std::string k = std::string("--") + key + "=";
      if (a.rfind(k, 0) != 0) return std::nullopt;
      return a.substr(k.size());
    };
    if (auto v = value("iters"))
      o.iters = std::atoi(v->c_str());
    else if (auto b = value("bytes"))
      o.bytes = std::strtoull(b->c_str(), nullptr, 0);
    else if (auto r = value("reps"))
      o.reps = std::atoi(r->c_str());
    else if (auto s = value("only"))
      o.only = *s;
    else if (auto pace = value("pace-us"))
      o.pace_us = std::atoi(pace->c_str());
    else if (auto t = value("qp-timeout"))
      o.qp_timeout = std::atoi(t->c_str());
    else if (auto q = value("qps-per-lane"))
      o.qps_per_lane = int_list(*q);
    else if (auto sp = value("source-ports"))
      o.source_ports = std::atoi(sp->c_str());
    else if (auto dt = value("datapath-threads"))
      o.datapath_threads = std::atoi(dt->c_str());
    else if (auto be = value("backend")) {
      if (*be != "soft" && *be != "dpdk") throw std::runtime_error("--backend takes soft or dpdk, not " + *be);
      o.backend = *be;
    }
    else
      throw std::runtime_error("unknown argument " + a);
  }
  return o;
}

struct Stats {
  double p50 = 0, p99 = 0, p999 = 0;
};

Stats stats(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  auto at = [&](double q) {
    return v[std::min(v.size() - 1, static_cast<size_t>(q * static_cast<double>(v.size())))];
  };
  return {at(0.5), at(0.99), at(0.999)};
}

void print_row(const char* name, const Stats& s, size_t n) {
  std::printf("%-52s %9.1f %9.1f %9.1f %7zu\n", name, s.p50, s.p99, s.p999, n);
}

enum class Mode { kBusy, kWait, kPaced };

// Round trips of WRITEs of `length` bytes on the pair's flow (after 1000 untimed ones), in µs.
// With a length, every WRITE carries its index and the destination is checked after it.
std::vector<double> flow_round_trips(FlowPair& p, uint64_t length, Mode mode, int iters, int pace_us = 0) {
  std::vector<double> us;
  us.reserve(static_cast<size_t>(iters));
  rdmad_completion c{};
  for (int i = 0; i < iters + 1000; ++i) {
    const uint64_t tag = 0x5100000000ull + static_cast<uint64_t>(i);
    if (length >= sizeof(tag)) std::memcpy(p.src->data(), &tag, sizeof(tag));
    if (mode == Mode::kPaced) std::this_thread::sleep_for(std::chrono::microseconds(pace_us));
    const auto t0 = Clock::now();
    if (rdmad_flow_write(p.flow, tag, p.src->mr, 0, &p.remote, 0, length) != RDMAD_OK)
      throw std::runtime_error("rdmad_flow_write refused");
    for (;;) {
      if (rdmad_flow_poll(p.flow, &c, 1) == 1) break;
      if (mode != Mode::kBusy && rdmad_flow_wait(p.flow, 10000) != RDMAD_OK)
        throw std::runtime_error("no completion");
    }
    const auto t1 = Clock::now();
    if (c.status != RDMAD_OK || c.wr_id != tag || c.length != length)
      throw std::runtime_error(fmt::format("bad completion: status {} wr_id {:#x} length {}",
                                           static_cast<int>(c.status), c.wr_id, c.length));
    if (length >= sizeof(tag) && std::memcmp(p.dst->data(), p.src->data(), length) != 0)
      throw std::runtime_error("destination differs after a completed WRITE");
    if (i >= 1000) us.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
  }
  return us;
}

std::vector<double> soft_round_trips(SoftDirect& s, size_t length, int iters) {
  std::vector<double> us;
  us.reserve(static_cast<size_t>(iters));
  for (int i = 0; i < iters + 1000; ++i) {
    const uint64_t tag = static_cast<uint64_t>(i) + 1;
    std::memcpy(s.src(), &tag, sizeof(tag));
    const auto t0 = Clock::now();
    s.post_write(tag, 0, length);
    while (s.poll() == 0) {
    }
    const auto t1 = Clock::now();
    if (std::memcmp(s.dst(), s.src(), length) != 0) throw std::runtime_error("soft: destination differs");
    if (i >= 1000) us.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
  }
  return us;
}

// Baselines for the ring's sleeping sides, two threads of this process. kWait: the requester
// sets a flag and sleeps in poll on an eventfd, the other side spins on the flag and writes the
// eventfd (a client in rdmad_flow_wait, a spinning engine). kPaced: every pace_us the requester
// writes eventfd 1 and sleeps in poll on eventfd 2; the other side sleeps in poll on eventfd 1
// and writes eventfd 2 (an idle engine woken by the doorbell, then the client woken). In us.
std::vector<double> wake_round_trips(Mode mode, int iters, int pace_us = 0) {
  const int to_other = ::eventfd(0, EFD_CLOEXEC), to_me = ::eventfd(0, EFD_CLOEXEC);
  std::atomic<uint64_t> request{0};
  auto wait_fd = [](int fd) {
    pollfd p{fd, POLLIN, 0};
    ::poll(&p, 1, -1);
    uint64_t v;
    (void)!::read(fd, &v, sizeof(v));
  };
  auto ring = [](int fd) {
    uint64_t one = 1;
    (void)!::write(fd, &one, sizeof(one));
  };
  const uint64_t total = static_cast<uint64_t>(iters) + 1000;
  std::thread other([&] {
    for (uint64_t i = 1; i <= total; ++i) {
      if (mode == Mode::kPaced) {
        wait_fd(to_other);
      } else {
        while (request.load(std::memory_order_acquire) != i) {
        }
      }
      ring(to_me);
    }
  });
  std::vector<double> us;
  for (uint64_t i = 1; i <= total; ++i) {
    if (mode == Mode::kPaced) std::this_thread::sleep_for(std::chrono::microseconds(pace_us));
    const auto t0 = Clock::now();
    if (mode == Mode::kPaced)
      ring(to_other);
    else
      request.store(i, std::memory_order_release);
    wait_fd(to_me);
    if (i > 1000) us.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
  }
  other.join();
  ::close(to_other);
  ::close(to_me);
  return us;
}

void run_ring(const Options& o) {
  FlowPair p(1, 4096, o.qp_timeout);
  std::printf("\n1. ring latency: zero-length WRITE, completed by node-a's engine (round trip, us)\n");
  std::printf("%-52s %9s %9s %9s %7s\n", "", "p50", "p99", "p99.9", "n");
  print_row("busy-polling client", stats(flow_round_trips(p, 0, Mode::kBusy, o.iters)), o.iters);
  print_row("client blocked in rdmad_flow_wait (eventfd)",
            stats(flow_round_trips(p, 0, Mode::kWait, o.iters / 4)), o.iters / 4);
  print_row(fmt::format("paced {} us: engine asleep (doorbell), flow_wait", o.pace_us).c_str(),
            stats(flow_round_trips(p, 0, Mode::kPaced, 2000, o.pace_us)), 2000);
  print_row("baseline: eventfd, requester sleeps, other spins",
            stats(wake_round_trips(Mode::kWait, o.iters / 4)), o.iters / 4);
  print_row(fmt::format("baseline: eventfd ping-pong, both sleep, paced {} us", o.pace_us).c_str(),
            stats(wake_round_trips(Mode::kPaced, 2000, o.pace_us)), 2000);
}

void run_small(const Options& o) {
  const int n = o.iters / 2;
  std::printf("\n2. 64 B WRITE round trip (us)\n");
  std::printf("%-52s %9s %9s %9s %7s\n", "", "p50", "p99", "p99.9", "n");
  {
    SoftDirect s(4096);
    print_row("baseline: soft QP used directly, busy poll", stats(soft_round_trips(s, 64, n)), n);
  }
  FlowPair p(1, 4096, o.qp_timeout);
  print_row("flow node-a -> node-b, busy-polling client", stats(flow_round_trips(p, 64, Mode::kBusy, n)), n);
  print_row("flow node-a -> node-b, rdmad_flow_wait", stats(flow_round_trips(p, 64, Mode::kWait, n / 2)),
            n / 2);
}

// SEND of `length` bytes node-a -> node-b into a receive node-b posted just before, both
// completions waited for (busy poll), in µs: the receive is advertised to node-a over the peer
// channel, node-a WRITEs into it and sends "send done". Each receive gets MRs of its own over
// exactly its buffer in node-a's protection domain on node-b (registered when it is taken,
// deregistered when it completes). Every message carries its index, checked at the receiver.
std::vector<double> send_recv_round_trips(FlowPair& p, uint64_t length, int iters) {
  rdmad_flow* back = nullptr;
  if (rdmad_flow_open(p.b.client(), "node-a", nullptr, &back) != RDMAD_OK ||
      rdmad_flow_wait_connected(back, 15000) != RDMAD_OK)
    throw std::runtime_error("node-b's flow to node-a did not connect");
  std::vector<double> us;
  us.reserve(static_cast<size_t>(iters));
  auto wait = [](rdmad_flow* f, uint64_t tag, const char* what) {
    rdmad_completion c{};
    while (rdmad_flow_poll(f, &c, 1) != 1) {
    }
    if (c.status != RDMAD_OK || c.wr_id != tag)
      throw std::runtime_error(fmt::format("{}: status {} wr_id {:#x}", what, static_cast<int>(c.status), c.wr_id));
  };
  for (int i = 0; i < iters + 200; ++i) {
    const uint64_t tag = 0x5200000000ull + static_cast<uint64_t>(i);
    std::memcpy(p.src->data(), &tag, sizeof(tag));
    namespace trace = rdmad::base::trace;
    const auto t0 = Clock::now();
    trace::mark(trace::Point::kBenchStart, static_cast<uint64_t>(i));
    if (rdmad_flow_recv(back, tag, p.dst->mr, 0, length) != RDMAD_OK) throw std::runtime_error("recv refused");
    trace::mark(trace::Point::kBenchRecvPosted);
    if (rdmad_flow_send(p.flow, tag, p.src->mr, 0, length) != RDMAD_OK) throw std::runtime_error("send refused");
    trace::mark(trace::Point::kBenchSendPosted);
    wait(p.flow, tag, "send");
    trace::mark(trace::Point::kBenchSendSeen);
    wait(back, tag, "recv");
    trace::mark(trace::Point::kBenchRecvSeen);
    const auto t1 = Clock::now();
    if (std::memcmp(p.dst->data(), p.src->data(), length) != 0) throw std::runtime_error("received bytes differ");
    if (i >= 200) us.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
  }
  rdmad_flow_close(back);
  return us;
}

void run_sendrecv(const Options& o) {
  const int n = std::max(100, o.iters / 10);
  std::printf("\n4. SEND into a just-posted receive, node-a -> node-b, busy poll (us)\n");
  std::printf("%-52s %9s %9s %9s %7s\n", "", "p50", "p99", "p99.9", "n");
  FlowPair p(1, 1 << 16, o.qp_timeout);
  print_row("64 B", stats(send_recv_round_trips(p, 64, n)), static_cast<size_t>(n));
  print_row("64 KiB", stats(send_recv_round_trips(p, 1 << 16, n)), static_cast<size_t>(n));
}

using rdmad::test::fill;

double self_cpu_seconds() {
  rusage u{};
  ::getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) * 1e-6;
}

// CPU seconds per thread of a daemon between two snapshots, as "comm s, comm s, ..." (threads
// over 1% of the wall time), and the total.
std::pair<double, std::string> cpu_delta(const std::map<int, rdmad::bench::ThreadTicks>& before,
                                         const std::map<int, rdmad::bench::ThreadTicks>& after, double wall) {
  const double hz = static_cast<double>(::sysconf(_SC_CLK_TCK));
  double total = 0;
  std::string parts;
  for (const auto& [tid, t] : after) {
    auto it = before.find(tid);
    const double s = static_cast<double>(t.ticks - (it != before.end() ? it->second.ticks : 0)) / hz;
    total += s;
    if (s > 0.01 * wall) parts += fmt::format("{}{} {:.2f}", parts.empty() ? "" : ", ", t.comm, s);
  }
  return {total, parts};
}

struct Transfer {
  double seconds;
  double cpu_a, cpu_b, cpu_client;
  std::string threads_a, threads_b;
  std::string counters;
};

Transfer flow_transfer(FlowPair& p, size_t bytes, uint64_t seed) {
  fill(p.src->data(), bytes, seed);
  const auto ta = rdmad::bench::thread_ticks(p.a.pid()), tb = rdmad::bench::thread_ticks(p.b.pid());
  auto counters = [&] {
    return std::array<double, 4>{p.a.metric_sum("rdmad_retransmitted_packets_total"),
                                 p.b.metric_sum("rdmad_retransmitted_packets_total"),
                                 p.a.metric_sum("rdmad_rp_cnp_packets_handled_total"),
                                 p.a.metric_sum("rdmad_local_ack_timeout_errors_total")};
  };
  const auto c0 = counters();
  const double client0 = self_cpu_seconds();
  const auto t0 = Clock::now();
  if (rdmad_flow_write(p.flow, seed, p.src->mr, 0, &p.remote, 0, bytes) != RDMAD_OK)
    throw std::runtime_error("rdmad_flow_write refused");
  rdmad_completion c{};
  while (rdmad_flow_poll(p.flow, &c, 1) == 0)
    if (rdmad_flow_wait(p.flow, 300000) != RDMAD_OK) throw std::runtime_error("no completion in 300 s");
  Transfer r{};
  r.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  r.cpu_client = self_cpu_seconds() - client0;
  auto [ca, sa] = cpu_delta(ta, rdmad::bench::thread_ticks(p.a.pid()), r.seconds);
  auto [cb, sb] = cpu_delta(tb, rdmad::bench::thread_ticks(p.b.pid()), r.seconds);
  r.cpu_a = ca;
  r.cpu_b = cb;
  r.threads_a = sa;
  r.threads_b = sb;
  const auto c1 = counters();
  r.counters = fmt::format("retransmitted packets a {} b {}, CNPs handled by a {}, ack timeouts a {}",
                           c1[0] - c0[0], c1[1] - c0[1], c1[2] - c0[2], c1[3] - c0[3]);
  if (c.status != RDMAD_OK || c.length != bytes)
    throw std::runtime_error(fmt::format("WRITE of {} bytes failed: {} (length {}); {}\nnode-a log:\n{}",
                                         bytes, rdmad_strerror(c.status), c.length, r.counters, p.a.log()));
  if (std::memcmp(p.src->data(), p.dst->data(), bytes) != 0)
    throw std::runtime_error("1 GiB WRITE not byte-exact");
  return r;
}

// 1 MiB WRITEs, 8 in flight, the i-th on QP pair i mod k (k = s.qp_count()).
double soft_transfer(SoftDirect& s, size_t bytes, uint64_t seed) {
  constexpr size_t kChunk = 1 << 20, kWindow = 8;
  fill(s.src(), bytes, seed);
  const auto t0 = Clock::now();
  size_t posted = 0, done = 0, outstanding = 0;
  const size_t chunks = (bytes + kChunk - 1) / kChunk;
  while (done < chunks) {
    while (posted < chunks && outstanding < kWindow) {
      s.post_write(posted, posted * kChunk, std::min(kChunk, bytes - posted * kChunk), posted % s.qp_count());
      ++posted;
      ++outstanding;
    }
    const size_t n = s.poll();
    done += n;
    outstanding -= n;
    if (n == 0)
      std::this_thread::sleep_for(std::chrono::microseconds(20));  // leave the cores to the datapath
  }
  const double secs = std::chrono::duration<double>(Clock::now() - t0).count();
  if (std::memcmp(s.src(), s.dst(), bytes) != 0) throw std::runtime_error("soft: 1 GiB WRITE not byte-exact");
  return secs;
}

double gbps(size_t bytes, double s) { return static_cast<double>(bytes) * 8 / s / 1e9; }

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// One configuration of part 3: the soft backend used directly with k QP pairs, or a pair of
// daemons with n NICs each and k QPs per lane.
struct ThroughputCase {
  std::string name;
  int qps = 1;
  std::unique_ptr<SoftDirect> direct;
  std::unique_ptr<FlowPair> pair;
  std::vector<double> gbps, cpu;  // per timed run; cpu: the process (direct) or both daemons (flow)
  double chunks0 = 0;             // flows: chunks node-a had posted before the timed runs
};

void run_throughput(const Options& o) {
  std::printf("\n3. WRITE of %zu MiB, chunk 1 MiB, lane window 8, qp_timeout %d (%d runs each)\n",
              o.bytes >> 20, o.qp_timeout, o.reps);
  std::printf("(the cases take turns, one WRITE each per round, so that load from outside falls on all of them;\n"
              " direct: 'client s' is this whole process, both soft NICs included)\n");
  std::map<std::string, int64_t> soft_options;
  std::string nic_keys;
  if (o.source_ports >= 0) {
    soft_options["source_ports"] = o.source_ports;
    nic_keys = fmt::format("source_ports = {}\n", o.source_ports);
    std::printf("(soft NICs with source_ports = %d)\n", o.source_ports);
  }
  if (o.datapath_threads != 1) {
    soft_options["datapath_threads"] = o.datapath_threads;
    nic_keys += fmt::format("datapath_threads = {}\n", o.datapath_threads);
    std::printf("(%s NICs with datapath_threads = %d)\n", o.backend.c_str(), o.datapath_threads);
  }
  if (o.backend != "soft") std::printf("(%s NICs: each rail a net_memif link)\n", o.backend.c_str());
  // The bare soft QP is the reference of 'x bare'; the same process with k QP pairs (chunks round
  // robin) shows what k QPs cost the soft datapath itself, without a daemon.
  std::vector<ThroughputCase> cases;
  for (int qps : o.qps_per_lane) {
    ThroughputCase c;
    c.name = fmt::format("baseline: {} {} QP(s) direct", qps, o.backend);
    c.qps = qps;
    c.direct = std::make_unique<SoftDirect>(o.bytes, static_cast<size_t>(qps), soft_options, o.backend);
    soft_transfer(*c.direct, o.bytes, 99);  // untimed, as for the flows
    cases.push_back(std::move(c));
  }
  for (int nics : {1, 2}) {
    for (int qps : o.qps_per_lane) {
      ThroughputCase c;
      c.name = fmt::format("flow, {} NIC(s), {} QP(s) per lane", nics, qps);
      c.qps = qps;
      c.pair = std::make_unique<FlowPair>(nics, o.bytes, o.qp_timeout, fmt::format("[flow]\nqps_per_lane = {}\n", qps),
                                          nic_keys, o.backend);
      // One untimed WRITE of the whole size first: the destination's pages are faulted in by
      // node-b's datapath (first touch costs node-b ~0.7 CPU s per GiB) and the balancer has
      // measured its lanes.
      flow_transfer(*c.pair, o.bytes, 99);
      c.chunks0 = c.pair->a.metric_sum("rdmad_balancer_chunks_sent_total");
      cases.push_back(std::move(c));
    }
  }
  std::printf("%-34s %7s %8s %9s %9s %9s %10s\n", "", "Gb/s", "wall s", "cpu a s", "cpu b s", "client s", "cpu/wall");
  for (int r = 0; r < o.reps; ++r) {
    for (ThroughputCase& c : cases) {
      if (c.direct) {
        const auto before = rdmad::bench::thread_ticks(::getpid());
        const double secs = soft_transfer(*c.direct, o.bytes, static_cast<uint64_t>(r) + 1);
        auto [cpu, parts] = cpu_delta(before, rdmad::bench::thread_ticks(::getpid()), secs);
        c.gbps.push_back(gbps(o.bytes, secs));
        c.cpu.push_back(cpu);
        std::printf("%-34s %7.2f %8.2f %9s %9s %9.2f %10.2f\n", c.name.c_str(), c.gbps.back(), secs, "-", "-", cpu,
                    cpu / secs);
        std::printf("    threads: %s\n", parts.c_str());
        continue;
      }
      const Transfer t = flow_transfer(*c.pair, o.bytes, static_cast<uint64_t>(r) + 1);
      c.gbps.push_back(gbps(o.bytes, t.seconds));
      c.cpu.push_back(t.cpu_a + t.cpu_b);
      std::printf("%-34s %7.2f %8.2f %9.2f %9.2f %9.2f %10.2f\n", c.name.c_str(), c.gbps.back(), t.seconds, t.cpu_a,
                  t.cpu_b, t.cpu_client, (t.cpu_a + t.cpu_b + t.cpu_client) / t.seconds);
      std::printf("    node-a: %s\n    node-b: %s\n    %s\n", t.threads_a.c_str(), t.threads_b.c_str(),
                  t.counters.c_str());
    }
  }
  // The summary: medians, and Gb/s as a fraction of the bare soft QP's median in this run.
  if (cases.empty() || cases.front().qps != 1)
    throw std::runtime_error("--qps-per-lane must start with 1 (the bare QP reference)");
  const double bare = median(cases.front().gbps);
  const double gib = static_cast<double>(o.bytes) / static_cast<double>(1ull << 30);
  std::printf("\n%-34s %12s %7s %14s  %s\n", "medians", "Gb/s", "x bare", "cpu s per GiB",
              "node-a's chunks (timed runs; by lane QP: warm-up too)");
  for (const ThroughputCase& c : cases) {
    std::string split;
    if (c.pair) {
      // Which of the lanes' QPs carried the timed chunks (rdmad_flow_lane_qp_chunks_sent_total; the
      // warm-up's chunks are spread alike).
      const double total = c.pair->a.metric_sum("rdmad_balancer_chunks_sent_total");
      for (int j = 0; j < c.qps; ++j)
        split += fmt::format(" {:.0f}", c.pair->a.metric_sum_where("rdmad_flow_lane_qp_chunks_sent_total",
                                                                   fmt::format("lane_qp=\"{}\"", j)));
      split = fmt::format("{:.0f}; by QP:{}", total - c.chunks0, split);
    }
    std::printf("%-34s %12.2f %7.2f %14.2f  %s\n", c.name.c_str(), median(c.gbps), median(c.gbps) / bare,
                median(c.cpu) / gib, split.c_str());
  }
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const Options o = parse(argc, argv);
    std::printf("flow_bench: %ld CPUs online; latencies in us; cpu = utime+stime from /proc\n",
                ::sysconf(_SC_NPROCESSORS_ONLN));
    if (o.only.find("ring") != std::string::npos) run_ring(o);
    if (o.only.find("small") != std::string::npos) run_small(o);
    if (o.only.find("throughput") != std::string::npos) run_throughput(o);
    if (o.only.find("sendrecv") != std::string::npos) run_sendrecv(o);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "flow_bench: %s\n", e.what());
    return 1;
  }
  return 0;
}
