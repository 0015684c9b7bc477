// Client service latency and throughput on the soft backend, against a bare SOCK_SEQPACKET
// ping-pong floor measured in the same run.
//
//   BM_PingPongFloor            two bare 64-byte round trips per iteration (same message count as
//                               one register + deregister pair), echo thread blocking in recv
//   BM_RegisterDeregister/N     rdmad_register_host + rdmad_deregister of an N-byte memfd range
//   BM_PairsThroughput/W        the same pair from 16 client threads, one connection each, the
//                               service on W worker threads (0: the default, min(4, hardware
//                               threads)), registering on no NIC (the registrar double)
//   BM_NicPairs/N               the daemon's real path: 4 KiB pairs from 16 client threads, the
//                               service (default workers) registering on N soft NICs through the
//                               daemon's VerbsRegistrar; N = 0 is the registrar double, the baseline
//   BM_PingPongFloor16/T        the throughput floor: 16 client threads, each doing two bare
//                               64-byte round trips per iteration against T echo threads, each
//                               serving its share of the connections from its own epoll
//                               (non-blocking, drains each ready socket) as an io_context does;
//                               T = 1 is the floor of one service thread
// p50/p99 counters are per iteration, in microseconds. server_cpu_us (16-client runs): CPU time of
// the serving threads (daemon control thread, its rdmad-ipc-* workers, or the echo threads) per
// pair, from /proc/self/task: what one pair costs the server whatever else loads the machine.
#include <benchmark/benchmark.h>
#include <prometheus/registry.h>
#include <pthread.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "support/doubles/soft_registrar.h"
#include "rdmad/config/config.h"
#include "rdmad/daemon/clients/client_service.h"
#include "rdmad/daemon/clients/unix_server.h"
#include "rdmad/daemon/nics/node_nics.h"
#include "rdmad/rdmad.h"
#include "rdmad/verbs/registry.h"

namespace {

using Clock = std::chrono::steady_clock;
constexpr uint32_t kRw = RDMAD_ACCESS_LOCAL_WRITE | RDMAD_ACCESS_REMOTE_WRITE | RDMAD_ACCESS_REMOTE_READ;

// The daemon side: UnixServer + a registrar, its control io_context on one thread and the
// connections on `workers` worker threads. soft_nics = 0: the registrar double (registers on no
// NIC); otherwise that many soft NICs on 127.0.0.1, opened and registered on as the daemon does
// (NodeNics, VerbsRegistrar).
class Daemon {
 public:
  explicit Daemon(uint32_t workers, uint32_t soft_nics = 0) {
    char tmpl[] = "/tmp/rdmad-bench-XXXXXX";
    dir_ = mkdtemp(tmpl);
    rdmad::clients::IpcConfig config;
    config.socket_path = dir_ + "/rdmad.sock";
    config.systemd_activation = false;
    config.default_quota = {uint64_t{64} << 30, 1 << 20};
    config.workers = workers;
    rdmad::clients::MemoryRegistrar* registrar = &registrar_;
    rdmad::clients::NicDirectory* inventory = &inventory_;
    if (soft_nics > 0) {
      rdmad::verbs::register_builtin_backends(backends_);
      for (uint32_t i = 0; i < soft_nics; ++i) {
        rdmad::config::NicSection nic;
        nic.name = "soft" + std::to_string(i);
        nic.backend = "soft";
        nic.address = "127.0.0.1";
        nic.udp_port = 0;
        daemon_config_.nics.push_back(nic);
      }
      nics_ = std::make_unique<rdmad::daemon::NodeNics>(backends_, daemon_config_);
      if (!nics_->open().ok()) std::abort();
      verbs_registrar_ = std::make_unique<rdmad::daemon::VerbsRegistrar>(nics_->slots(), backends_);
      if (!verbs_registrar_->start().ok()) std::abort();
      registrar = verbs_registrar_.get();
      inventory = nics_.get();
    }
    server_ = std::make_unique<rdmad::clients::UnixServer>(io_, config, *registrar, *inventory, registry_);
    if (!server_->start().ok()) std::abort();
    thread_ = std::thread([this] {
      pthread_setname_np(pthread_self(), "bench-daemon");
      io_.run();
    });
  }
  ~Daemon() {
    work_.reset();
    io_.stop();
    thread_.join();
    server_.reset();
    rmdir(dir_.c_str());
  }
  std::string path() const { return dir_ + "/rdmad.sock"; }

 private:
  std::string dir_;
  boost::asio::io_context io_;
  boost::asio::executor_work_guard<boost::asio::io_context::executor_type> work_{io_.get_executor()};
  prometheus::Registry registry_;
  rdmad::clients::StaticNicDirectory inventory_{
      {{"soft0", "soft", "", RDMAD_LINK_UP, 100000, 0}, {"soft1", "soft", "", RDMAD_LINK_UP, 100000, 0}}};
  rdmad::clients::SoftRegistrar registrar_{2};
  rdmad::verbs::BackendRegistry backends_;
  rdmad::config::Config daemon_config_;
  std::unique_ptr<rdmad::daemon::NodeNics> nics_;
  std::unique_ptr<rdmad::daemon::VerbsRegistrar> verbs_registrar_;
  std::unique_ptr<rdmad::clients::UnixServer> server_;
  std::thread thread_;
};

// CPU seconds used so far by this process's threads whose name starts with one of `prefixes`.
double serving_cpu_seconds() {
  static const long ticks = sysconf(_SC_CLK_TCK);
  double total = 0;
  for (const auto& task : std::filesystem::directory_iterator("/proc/self/task")) {
    std::ifstream comm_file(task.path() / "comm");
    std::string comm;
    std::getline(comm_file, comm);
    if (comm.rfind("bench-daemon", 0) != 0 && comm.rfind("bench-echo", 0) != 0 &&
        comm.rfind("rdmad-ipc", 0) != 0)
      continue;
    std::ifstream stat_file(task.path() / "stat");
    std::string stat((std::istreambuf_iterator<char>(stat_file)), std::istreambuf_iterator<char>());
    // Fields after the ")" that closes the name: state is field 3, utime 14, stime 15.
    std::istringstream rest(stat.substr(stat.rfind(')') + 2));
    std::string field;
    unsigned long utime = 0, stime = 0;
    for (int i = 3; i <= 15 && rest >> field; ++i) {
      if (i == 14) utime = std::stoul(field);
      if (i == 15) stime = std::stoul(field);
    }
    total += static_cast<double>(utime + stime) / static_cast<double>(ticks);
  }
  return total;
}

// Measures the serving threads' CPU over the timed loop of a multi-threaded benchmark (thread 0
// reads it; the start and stop barriers keep every other thread's iterations inside).
class ServingCpu {
 public:
  explicit ServingCpu(const benchmark::State& state) : first_(state.thread_index() == 0) {
    if (first_) start_ = serving_cpu_seconds();
  }
  void report(benchmark::State& state) const {
    if (!first_ || state.iterations() == 0) return;
    double pairs = static_cast<double>(state.iterations()) * state.threads();
    state.counters["server_cpu_us"] = (serving_cpu_seconds() - start_) * 1e6 / pairs;
  }

 private:
  bool first_;
  double start_ = 0;
};

// One T per thread count, made on first use (by whichever benchmark thread comes first).
template <class T>
T& one_per(uint32_t threads) {
  static std::mutex mu;
  static std::map<uint32_t, std::unique_ptr<T>> all;
  std::lock_guard lock(mu);
  auto& t = all[threads];
  if (!t) t = std::make_unique<T>(threads);
  return *t;
}

Daemon& daemon(uint32_t workers = 0) { return one_per<Daemon>(workers); }

// One daemon per soft-NIC count (default workers).
struct NicDaemon : Daemon {
  explicit NicDaemon(uint32_t soft_nics) : Daemon(0, soft_nics) {}
};
Daemon& nic_daemon(uint32_t soft_nics) { return one_per<NicDaemon>(soft_nics); }

void report_percentiles(benchmark::State& state, std::vector<double>& us) {
  if (us.empty()) return;
  std::sort(us.begin(), us.end());
  state.counters["p50_us"] = us[us.size() / 2];
  state.counters["p99_us"] = us[std::min(us.size() - 1, us.size() * 99 / 100)];
}

void BM_PingPongFloor(benchmark::State& state) {
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sv) != 0) std::abort();
  std::thread echo([fd = sv[1]] {
    char buf[64];
    for (;;) {
      ssize_t n = recv(fd, buf, sizeof(buf), 0);
      if (n <= 0 || send(fd, buf, static_cast<size_t>(n), MSG_NOSIGNAL) != n) return;
    }
  });
  char msg[64] = {};
  std::vector<double> us;
  us.reserve(1 << 20);
  for (auto _ : state) {
    auto t0 = Clock::now();
    for (int i = 0; i < 2; ++i) {
      send(sv[0], msg, sizeof(msg), MSG_NOSIGNAL);
      benchmark::DoNotOptimize(recv(sv[0], msg, sizeof(msg), 0));
    }
    us.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
  }
  close(sv[0]);
  echo.join();
  close(sv[1]);
  report_percentiles(state, us);
}
BENCHMARK(BM_PingPongFloor)->UseRealTime();

// Echo threads, each serving its share of SOCK_SEQPACKET connections through its own epoll.
class EpollEcho {
 public:
  explicit EpollEcho(uint32_t threads) {
    for (uint32_t i = 0; i < threads; ++i) {
      epfds_.push_back(epoll_create1(EPOLL_CLOEXEC));
      std::thread([fd = epfds_.back()] {
        pthread_setname_np(pthread_self(), "bench-echo");
        run(fd);
      }).detach();
    }
  }
  // Returns the client end of a new connection, served by the next echo thread in turn.
  int connect() {
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0) std::abort();
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.fd = sv[1];
    int epfd = epfds_[next_.fetch_add(1) % epfds_.size()];
    if (epoll_ctl(epfd, EPOLL_CTL_ADD, sv[1], &ev) != 0) std::abort();
    return sv[0];
  }

 private:
  [[noreturn]] static void run(int epfd) {
    epoll_event events[64];
    char buf[256];
    for (;;) {
      int n = epoll_wait(epfd, events, 64, -1);
      for (int i = 0; i < n; ++i) {
        int fd = events[i].data.fd;
        for (;;) {
          ssize_t got = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
          if (got > 0) {
            send(fd, buf, static_cast<size_t>(got), MSG_NOSIGNAL | MSG_DONTWAIT);
            continue;
          }
          if (got == 0 || errno != EAGAIN) {
            epoll_ctl(epfd, EPOLL_CTL_DEL, fd, nullptr);
            close(fd);
          }
          break;
        }
      }
    }
  }
  std::vector<int> epfds_;
  std::atomic<size_t> next_{0};
};

// Arg: echo threads (1 is the floor of the single-threaded service).
void BM_PingPongFloor16(benchmark::State& state) {
  // The echo threads are detached: they block in epoll_wait until the process exits.
  int fd = one_per<EpollEcho>(static_cast<uint32_t>(state.range(0))).connect();
  char msg[64] = {};
  ServingCpu cpu(state);
  for (auto _ : state) {
    for (int i = 0; i < 2; ++i) {
      send(fd, msg, sizeof(msg), MSG_NOSIGNAL);
      benchmark::DoNotOptimize(recv(fd, msg, sizeof(msg), 0));
    }
  }
  cpu.report(state);
  state.SetItemsProcessed(state.iterations());
  close(fd);
}
BENCHMARK(BM_PingPongFloor16)->Arg(1)->Arg(2)->Arg(4)->Threads(16)->UseRealTime();

void BM_RegisterDeregister(benchmark::State& state) {
  rdmad_client* c = nullptr;
  if (rdmad_connect(daemon().path().c_str(), &c) != RDMAD_OK) std::abort();
  rdmad_host_buffer buf;
  if (rdmad_alloc_host(static_cast<size_t>(state.range(0)), &buf) != RDMAD_OK) std::abort();
  std::vector<double> us;
  us.reserve(1 << 20);
  for (auto _ : state) {
    auto t0 = Clock::now();
    rdmad_mr* mr = nullptr;
    if (rdmad_register_host(c, buf.fd, 0, buf.length, kRw, 0, &mr) != RDMAD_OK ||
        rdmad_deregister(c, mr) != RDMAD_OK)
      state.SkipWithError(rdmad_last_error(c));
    us.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
  }
  report_percentiles(state, us);
  rdmad_free_host(&buf);
  rdmad_disconnect(c);
}
BENCHMARK(BM_RegisterDeregister)->Arg(4 << 10)->Arg(1 << 20)->Arg(1 << 30)->UseRealTime();

// 4 KiB pairs on one connection to `d` per benchmark thread; each registration must reach
// `nics` NICs.
void pairs_throughput(benchmark::State& state, Daemon& d, uint32_t nics) {
  rdmad_client* c = nullptr;
  if (rdmad_connect(d.path().c_str(), &c) != RDMAD_OK) std::abort();
  rdmad_host_buffer buf;
  if (rdmad_alloc_host(4096, &buf) != RDMAD_OK) std::abort();
  ServingCpu cpu(state);
  for (auto _ : state) {
    rdmad_mr* mr = nullptr;
    if (rdmad_register_host(c, buf.fd, 0, 4096, kRw, 0, &mr) != RDMAD_OK || rdmad_mr_nic_count(mr) != nics ||
        rdmad_deregister(c, mr) != RDMAD_OK)
      state.SkipWithError(rdmad_last_error(c));
  }
  cpu.report(state);
  state.SetItemsProcessed(state.iterations());
  rdmad_free_host(&buf);
  rdmad_disconnect(c);
}

void BM_PairsThroughput(benchmark::State& state) {
  pairs_throughput(state, daemon(static_cast<uint32_t>(state.range(0))), 2);
}
BENCHMARK(BM_PairsThroughput)->Arg(0)->Arg(1)->Arg(2)->Arg(4)->Threads(16)->UseRealTime();

// The same pair on the daemon's real path: NICs 0 (the double), 1 and 2 in one run, so the cost of
// registering on soft NICs is read against the no-NIC figure measured next to it.
void BM_NicPairs(benchmark::State& state) {
  const auto nics = static_cast<uint32_t>(state.range(0));
  pairs_throughput(state, nic_daemon(nics), nics == 0 ? 2 : nics);  // the double has 2 NICs
}
BENCHMARK(BM_NicPairs)->Arg(0)->Arg(1)->Arg(2)->Arg(0)->Threads(16)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
