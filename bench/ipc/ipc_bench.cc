// Client service latency and throughput on the soft backend, against a bare SOCK_SEQPACKET
// ping-pong floor measured in the same run.
//
//   BM_PingPongFloor            two bare 64-byte round trips per iteration (same message count as
//                               one register + deregister pair), echo thread blocking in recv
//   BM_RegisterDeregister/N     rdmad_register_host + rdmad_deregister of an N-byte memfd range
//   BM_PairsThroughput          the same pair from 16 client threads, one connection each
// p50/p99 counters are per iteration, in microseconds.
#include <benchmark/benchmark.h>
#include <prometheus/registry.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <chrono>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "rdmad/ipc/soft_registrar.h"
#include "rdmad/ipc/unix_server.h"
#include "rdmad/rdmad.h"

namespace {

using Clock = std::chrono::steady_clock;
constexpr uint32_t kRw = RDMAD_ACCESS_LOCAL_WRITE | RDMAD_ACCESS_REMOTE_WRITE | RDMAD_ACCESS_REMOTE_READ;

// The daemon side: UnixServer + soft registrar, its io_context on one thread.
class Daemon {
 public:
  Daemon() {
    char tmpl[] = "/tmp/rdmad-bench-XXXXXX";
    dir_ = mkdtemp(tmpl);
    rdmad::ipc::IpcConfig config;
    config.socket_path = dir_ + "/rdmad.sock";
    config.systemd_activation = false;
    config.default_quota = {uint64_t{64} << 30, 1 << 20};
    server_ = std::make_unique<rdmad::ipc::UnixServer>(io_, config, registrar_, inventory_, registry_);
    if (!server_->start().ok()) std::abort();
    thread_ = std::thread([this] { io_.run(); });
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
  rdmad::ipc::StaticNicInventory inventory_{
      {{"soft0", "soft", "", RDMAD_LINK_UP, 100000, 0}, {"soft1", "soft", "", RDMAD_LINK_UP, 100000, 0}}};
  rdmad::ipc::SoftRegistrar registrar_{2};
  std::unique_ptr<rdmad::ipc::UnixServer> server_;
  std::thread thread_;
};

Daemon& daemon() {
  static Daemon d;
  return d;
}

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

void BM_PairsThroughput(benchmark::State& state) {
  rdmad_client* c = nullptr;
  if (rdmad_connect(daemon().path().c_str(), &c) != RDMAD_OK) std::abort();
  rdmad_host_buffer buf;
  if (rdmad_alloc_host(4096, &buf) != RDMAD_OK) std::abort();
  for (auto _ : state) {
    rdmad_mr* mr = nullptr;
    if (rdmad_register_host(c, buf.fd, 0, 4096, kRw, 0, &mr) != RDMAD_OK ||
        rdmad_deregister(c, mr) != RDMAD_OK)
      state.SkipWithError(rdmad_last_error(c));
  }
  state.SetItemsProcessed(state.iterations());
  rdmad_free_host(&buf);
  rdmad_disconnect(c);
}
BENCHMARK(BM_PairsThroughput)->Threads(16)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
