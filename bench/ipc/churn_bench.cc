// A registration storm against a real rdmad: many clients (single-client processes, some of them
// SIGKILLed and restarted, and threads in a few processes), a share of them reconnecting every
// 2-5 s, each doing register + deregister pairs of mixed sizes back to back, and a probe that does
// one 4 KiB pair every 100 ms. Reports pairs/s, pair latency over every client's pairs, the
// probe's latency, Jain's index over the equal clients' pair rates (threads that neither reconnect
// nor are killed), the daemon's RSS and descriptors over the run, the CPU the daemon and the
// clients used (on a machine with few cores they share them), and, once every client is gone,
// that the daemon holds no registration (no memfd mapping) and no descriptor more than before.
//
//   churn_bench [--clients N] [--processes P] [--killed K] [--thread-processes T] [--seconds S]
//               [--nics M] [--rdmad PATH]
//
// Defaults: 1000 clients = 150 single-client processes (50 of them killed and restarted, one every
// 200 ms in turn) + 850 threads in 10 processes; 30% of the clients reconnect every 2-5 s; 30 s;
// a daemon with 2 soft NICs on 127.0.0.1. Sizes: 4 KiB (60%), 64 KiB (20%), 256 KiB (12%),
// 1 MiB (6%), 4 MiB (2%), at a random page-aligned offset of the client's 4 MiB buffer.
// Exit status 1 when a pair failed for a client that was not killed, or the daemon kept anything.
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "rdmad/rdmad.h"
#include "support/free_port.h"

namespace {

using Clock = std::chrono::steady_clock;
constexpr uint32_t kRw = RDMAD_ACCESS_LOCAL_WRITE | RDMAD_ACCESS_REMOTE_WRITE | RDMAD_ACCESS_REMOTE_READ;
constexpr uint64_t kBufferBytes = 4 << 20;
constexpr int kSubBuckets = 8;                 // per power of two
constexpr int kBuckets = kSubBuckets * 25;     // 1 µs .. 2^25 µs (33 s)

enum Kind : uint32_t { kEqual, kReconnecting, kKilled };

// One client's counters, in memory shared by every process (atomics: lock-free across processes).
struct Slot {
  std::atomic<uint64_t> pairs{0};
  std::atomic<uint64_t> errors{0};
  std::atomic<uint64_t> busy_ns{0};  // time spent in pairs (the rate's denominator is the run)
  std::atomic<uint64_t> hist[kBuckets];
  uint32_t kind = kEqual;
};

struct Shared {
  std::atomic<bool> stop{false};
  std::atomic<bool> measuring{false};  // after the warm-up: pairs are counted (and kills made)
  std::atomic<uint64_t> kills{0};
  std::atomic<uint64_t> connected{0};  // clients that have connected at least once
  Slot slots[1];                        // clients of them
};

int bucket_of(double us) {
  if (us < 1) return 0;
  return std::min(kBuckets - 1, static_cast<int>(std::log2(us) * kSubBuckets));
}
double bucket_upper_us(int b) { return std::exp2(static_cast<double>(b + 1) / kSubBuckets); }

struct Options {
  int clients = 1000;
  int processes = 150;
  int killed = 50;
  int thread_processes = 10;
  int seconds = 30;
  int nics = 2;
  double reconnecting_share = 0.3;
  std::string rdmad;
};

uint64_t draw_size(std::mt19937_64& rng) {
  const uint32_t p = static_cast<uint32_t>(rng() % 100);
  if (p < 60) return 4 << 10;
  if (p < 80) return 64 << 10;
  if (p < 92) return 256 << 10;
  if (p < 98) return 1 << 20;
  return 4 << 20;
}

rdmad_client* connect_until(const std::string& path, const Shared& sh) {
  rdmad_client* c = nullptr;
  while (!sh.stop.load()) {
    if (rdmad_connect(path.c_str(), &c) == RDMAD_OK) return c;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));  // a refused connect: back off, retry
  }
  return nullptr;
}

// One client: pairs back to back until told to stop.
void run_client(const std::string& path, Shared& sh, Slot& slot, uint64_t seed) {
  std::mt19937_64 rng(seed);
  rdmad_host_buffer buf;
  if (rdmad_alloc_host(kBufferBytes, &buf) != RDMAD_OK) {
    slot.errors.fetch_add(1);
    return;
  }
  rdmad_client* c = connect_until(path, sh);
  if (c != nullptr && slot.pairs.load() == 0 && slot.errors.load() == 0) sh.connected.fetch_add(1);
  auto next_reconnect = Clock::now() + std::chrono::milliseconds(2000 + rng() % 3000);
  while (c != nullptr && !sh.stop.load()) {
    const uint64_t size = draw_size(rng);
    const uint64_t offset = (rng() % ((kBufferBytes - size) / 4096 + 1)) * 4096;
    const auto t0 = Clock::now();
    rdmad_mr* mr = nullptr;
    const bool ok = rdmad_register_host(c, buf.fd, offset, size, kRw, 0, &mr) == RDMAD_OK &&
                    rdmad_deregister(c, mr) == RDMAD_OK;
    const auto ns = static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - t0).count());
    if (sh.stop.load()) break;
    if (!ok) {
      slot.errors.fetch_add(1);
      std::fprintf(stderr, "churn_bench: client pair failed: %s\n", rdmad_last_error(c));
    } else if (sh.measuring.load(std::memory_order_relaxed)) {
      slot.pairs.fetch_add(1, std::memory_order_relaxed);
      slot.busy_ns.fetch_add(ns, std::memory_order_relaxed);
      slot.hist[bucket_of(static_cast<double>(ns) / 1000)].fetch_add(1, std::memory_order_relaxed);
    }
    if (slot.kind == kReconnecting && Clock::now() >= next_reconnect) {
      rdmad_disconnect(c);
      c = connect_until(path, sh);
      next_reconnect = Clock::now() + std::chrono::milliseconds(2000 + rng() % 3000);
    }
  }
  if (c != nullptr) rdmad_disconnect(c);
  rdmad_free_host(&buf);
}

pid_t spawn(const std::function<void()>& body) {
  pid_t pid = fork();
  if (pid == 0) {
    body();
    _exit(0);
  }
  return pid;
}

struct DaemonSample {
  double t_s;
  uint64_t rss_kib, anon_kib, fds, memfd_maps;
};

uint64_t status_kib(pid_t pid, const char* key) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind(key, 0) == 0) return std::strtoull(line.c_str() + std::strlen(key), nullptr, 10);
  return 0;
}

uint64_t fd_count(pid_t pid) {
  uint64_t n = 0;
  std::error_code ec;
  for (auto it = std::filesystem::directory_iterator("/proc/" + std::to_string(pid) + "/fd", ec);
       !ec && it != std::filesystem::directory_iterator(); it.increment(ec))
    ++n;
  return n;
}

uint64_t memfd_maps(pid_t pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/maps");
  std::string line;
  uint64_t n = 0;
  while (std::getline(f, line)) n += line.find("/memfd:") != std::string::npos;
  return n;
}

DaemonSample sample(pid_t pid, Clock::time_point start) {
  return {std::chrono::duration<double>(Clock::now() - start).count(), status_kib(pid, "VmRSS:"),
          status_kib(pid, "RssAnon:"), fd_count(pid), memfd_maps(pid)};
}

double cpu_seconds(pid_t pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/stat");
  std::string stat((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  std::istringstream rest(stat.substr(stat.rfind(')') + 2));
  std::string field;
  unsigned long utime = 0, stime = 0;
  for (int i = 3; i <= 15 && rest >> field; ++i) {
    if (i == 14) utime = std::stoul(field);
    if (i == 15) stime = std::stoul(field);
  }
  return static_cast<double>(utime + stime) / static_cast<double>(sysconf(_SC_CLK_TCK));
}

// CPU time every core spent out of idle since boot (/proc/stat), in core-seconds.
double machine_busy_seconds() {
  std::ifstream f("/proc/stat");
  std::string cpu;
  uint64_t v[8] = {};
  f >> cpu;
  for (uint64_t& x : v) f >> x;
  const uint64_t busy = v[0] + v[1] + v[2] + v[5] + v[6] + v[7];  // user nice system irq softirq steal
  return static_cast<double>(busy) / static_cast<double>(sysconf(_SC_CLK_TCK));
}

double percentile(const std::vector<uint64_t>& hist, double q) {
  uint64_t total = 0;
  for (uint64_t n : hist) total += n;
  if (total == 0) return 0;
  const auto want = static_cast<uint64_t>(std::ceil(q * static_cast<double>(total)));
  uint64_t seen = 0;
  for (int b = 0; b < kBuckets; ++b) {
    seen += hist[b];
    if (seen >= want) return bucket_upper_us(b);
  }
  return bucket_upper_us(kBuckets - 1);
}

double exact_percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(q * static_cast<double>(v.size())))];
}

std::string default_rdmad() {
  std::error_code ec;
  auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
  return (self.parent_path() / "../../daemon/rdmad").lexically_normal().string();
}

bool parse(int argc, char** argv, Options& o) {
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&]() -> const char* { return i + 1 < argc ? argv[++i] : nullptr; };
    const char* v = nullptr;
    if (a == "--help" || a == "-h") return false;
    if ((a == "--clients" || a == "--processes" || a == "--killed" || a == "--thread-processes" ||
         a == "--seconds" || a == "--nics" || a == "--rdmad") &&
        (v = value()) == nullptr)
      return false;
    if (a == "--clients") o.clients = std::atoi(v);
    else if (a == "--processes") o.processes = std::atoi(v);
    else if (a == "--killed") o.killed = std::atoi(v);
    else if (a == "--thread-processes") o.thread_processes = std::atoi(v);
    else if (a == "--seconds") o.seconds = std::atoi(v);
    else if (a == "--nics") o.nics = std::atoi(v);
    else if (a == "--rdmad") o.rdmad = v;
    else return false;
  }
  return o.clients >= o.processes && o.processes >= o.killed && o.killed >= 0 && o.seconds >= 2 &&
         o.thread_processes >= 1 && o.nics >= 0;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  o.rdmad = default_rdmad();
  if (!parse(argc, argv, o)) {
    std::fprintf(stderr,
                 "usage: churn_bench [--clients N] [--processes P] [--killed K] [--thread-processes T]\n"
                 "                   [--seconds S] [--nics M] [--rdmad PATH]\n"
                 "  N clients: P single-client processes (K of them SIGKILLed and restarted in turn) and\n"
                 "  N-P threads in T processes; 30%% reconnect every 2-5 s; a probe pair every 100 ms.\n"
                 "  Defaults: 1000 150 50 10, 30 s, a daemon with 2 soft NICs (rdmad next to this build).\n");
    return 2;
  }
  // Every client holds a connection and a memfd; the probe, the daemon's child and slack on top.
  rlimit nofile{};
  getrlimit(RLIMIT_NOFILE, &nofile);
  nofile.rlim_cur = nofile.rlim_max;
  setrlimit(RLIMIT_NOFILE, &nofile);

  char tmpl[] = "/tmp/rdmad-churn-XXXXXX";
  const std::string dir = mkdtemp(tmpl);
  const std::string sock = dir + "/rdmad.sock";
  {
    std::ofstream cfg(dir + "/rdmad.toml");
    cfg << "[daemon]\nruntime_dir = \"" << dir << "\"\nsocket_path = \"" << sock << "\"\nlog_level = \"warn\"\n"
        << "[metrics]\nlisten = \"127.0.0.1:" << rdmad::test::free_port(SOCK_STREAM) << "\"\n"
        << "[ipc]\nsocket_mode = \"0666\"\nquota_connections = " << 2 * o.clients + 16 << "\n";
    for (int i = 0; i < o.nics; ++i)
      cfg << "[[nic]]\nname = \"soft" << i << "\"\nbackend = \"soft\"\naddress = \"127.0.0.1\"\nudp_port = 0\n";
  }
  const pid_t daemon = fork();
  if (daemon == 0) {
    execl(o.rdmad.c_str(), "rdmad", "--config", (dir + "/rdmad.toml").c_str(), nullptr);
    std::perror(("exec " + o.rdmad).c_str());
    _exit(127);
  }
  const auto start = Clock::now();
  {
    rdmad_client* c = nullptr;
    while (rdmad_connect(sock.c_str(), &c) != RDMAD_OK) {
      if (Clock::now() - start > std::chrono::seconds(30) || waitpid(daemon, nullptr, WNOHANG) == daemon) {
        std::fprintf(stderr, "churn_bench: the daemon did not come up (%s)\n", o.rdmad.c_str());
        kill(daemon, SIGKILL);
        return 1;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    rdmad_disconnect(c);
  }
  const DaemonSample before = sample(daemon, start);

  const size_t shared_bytes = sizeof(Shared) + sizeof(Slot) * static_cast<size_t>(o.clients);
  void* mem = mmap(nullptr, shared_bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (mem == MAP_FAILED) return 1;
  auto* sh = new (mem) Shared();
  for (int i = 0; i < o.clients; ++i) new (&sh->slots[i]) Slot();
  // Processes first (the killed ones lead), then the threads; reconnecting clients are spread
  // over both: every client whose index falls in the share by a fixed stride.
  const int reconnecting = static_cast<int>(o.reconnecting_share * o.clients);
  int marked = 0;
  for (int i = 0; i < o.clients; ++i) {
    Slot& s = sh->slots[i];
    if (i < o.killed) {
      s.kind = kKilled;
    } else if (marked < reconnecting && (i * reconnecting) / o.clients != ((i + 1) * reconnecting) / o.clients) {
      s.kind = kReconnecting;
      ++marked;
    }
  }

  // The single-client processes live under a supervisor (single-threaded, so that it may fork the
  // restarts) that kills one of the first `killed` every 200 ms once measuring and starts it again.
  const pid_t supervisor = spawn([&] {
    std::vector<pid_t> procs(static_cast<size_t>(o.processes));
    for (int i = 0; i < o.processes; ++i)
      procs[i] = spawn([&, i] { run_client(sock, *sh, sh->slots[i], 1000 + static_cast<uint64_t>(i)); });
    auto next_kill = Clock::now();
    while (!sh->stop.load()) {
      std::this_thread::sleep_until(next_kill += std::chrono::milliseconds(200));
      if (o.killed == 0 || !sh->measuring.load() || sh->stop.load()) continue;
      const uint64_t n = sh->kills.fetch_add(1);
      const auto victim = static_cast<size_t>(n % static_cast<uint64_t>(o.killed));
      kill(procs[victim], SIGKILL);
      waitpid(procs[victim], nullptr, 0);
      procs[victim] = spawn([&, victim, n] { run_client(sock, *sh, sh->slots[victim], 7919 * (n + 1) + victim); });
    }
    for (pid_t q : procs) waitpid(q, nullptr, 0);
  });
  const int threads = o.clients - o.processes;
  std::vector<pid_t> thread_procs;
  for (int p = 0; p < o.thread_processes; ++p) {
    const int first = o.processes + threads * p / o.thread_processes;
    const int last = o.processes + threads * (p + 1) / o.thread_processes;
    thread_procs.push_back(spawn([&, first, last] {
      std::vector<std::thread> ts;
      for (int i = first; i < last; ++i)
        ts.emplace_back([&, i] { run_client(sock, *sh, sh->slots[i], 1000 + static_cast<uint64_t>(i)); });
      for (auto& t : ts) t.join();
    }));
  }

  // The probe: one 4 KiB pair every 100 ms, on a connection of its own.
  std::vector<double> probe_ms;
  uint64_t probe_errors = 0;
  std::thread probe([&] {
    rdmad_host_buffer buf;
    rdmad_client* c = nullptr;
    if (rdmad_alloc_host(4096, &buf) != RDMAD_OK || rdmad_connect(sock.c_str(), &c) != RDMAD_OK) {
      ++probe_errors;
      return;
    }
    auto next = Clock::now();
    while (!sh->stop.load()) {
      next += std::chrono::milliseconds(100);
      std::this_thread::sleep_until(next);  // the probe's own pacing, not a wait for the daemon
      const auto t0 = Clock::now();
      rdmad_mr* mr = nullptr;
      const bool ok = rdmad_register_host(c, buf.fd, 0, 4096, kRw, 0, &mr) == RDMAD_OK && rdmad_deregister(c, mr) == RDMAD_OK;
      if (!ok) ++probe_errors;
      else if (sh->measuring.load()) probe_ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
    }
    rdmad_disconnect(c);
    rdmad_free_host(&buf);
  });

  // Warm-up (every client connected, then 2 s), then the measured run: a daemon sample every
  // second, a progress line every 5 s.
  for (auto deadline = Clock::now() + std::chrono::seconds(60);
       sh->connected.load() < static_cast<uint64_t>(o.clients) && Clock::now() < deadline;)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  std::fprintf(stderr, "churn_bench: %lu of %d clients connected after %.1f s; 2 s warm-up\n",
               static_cast<unsigned long>(sh->connected.load()), o.clients,
               std::chrono::duration<double>(Clock::now() - start).count());
  std::this_thread::sleep_for(std::chrono::seconds(2));
  const double cpu0 = cpu_seconds(daemon);
  const double busy0 = machine_busy_seconds();
  std::vector<DaemonSample> samples{sample(daemon, start)};
  sh->measuring.store(true);
  const auto t_measure = Clock::now();
  const auto end = t_measure + std::chrono::seconds(o.seconds);
  auto next_sample = t_measure + std::chrono::seconds(1);
  auto next_progress = t_measure + std::chrono::seconds(5);
  while (Clock::now() < end) {
    const auto now = Clock::now();
    if (now >= next_sample) {
      samples.push_back(sample(daemon, start));
      next_sample += std::chrono::seconds(1);
    }
    if (now >= next_progress) {
      uint64_t pairs = 0;
      for (int i = 0; i < o.clients; ++i) pairs += sh->slots[i].pairs.load();
      const double t = std::chrono::duration<double>(now - t_measure).count();
      std::fprintf(stderr, "churn_bench: %.0f/%d s, %.0f pairs/s, %lu kills, daemon rss %.0f MiB fds %lu\n", t,
                   o.seconds, static_cast<double>(pairs) / t, static_cast<unsigned long>(sh->kills.load()),
                   samples.back().rss_kib / 1024.0,
                   static_cast<unsigned long>(samples.back().fds));
      next_progress += std::chrono::seconds(5);
    }
    std::this_thread::sleep_until(std::min({next_sample, next_progress, end}));
  }
  sh->measuring.store(false);
  const double run_s = std::chrono::duration<double>(Clock::now() - t_measure).count();
  const double daemon_cpu = cpu_seconds(daemon) - cpu0;
  const double busy = machine_busy_seconds() - busy0;
  const uint64_t kills = sh->kills.load();
  samples.push_back(sample(daemon, start));

  sh->stop.store(true);
  probe.join();
  waitpid(supervisor, nullptr, 0);
  for (pid_t p : thread_procs) waitpid(p, nullptr, 0);
  // Every client is gone: the daemon releases what they held. Poll until it has (or 10 s).
  DaemonSample after = sample(daemon, start);
  for (auto deadline = Clock::now() + std::chrono::seconds(10);
       Clock::now() < deadline && (after.memfd_maps != 0 || after.fds > before.fds);) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    after = sample(daemon, start);
  }
  kill(daemon, SIGTERM);
  waitpid(daemon, nullptr, 0);
  std::filesystem::remove_all(dir);

  // Results.
  std::vector<uint64_t> hist(kBuckets, 0);
  uint64_t pairs = 0, errors_unkilled = 0, errors_killed = 0;
  std::vector<double> equal_rates;
  for (int i = 0; i < o.clients; ++i) {
    const Slot& s = sh->slots[i];
    pairs += s.pairs.load();
    (s.kind == kKilled ? errors_killed : errors_unkilled) += s.errors.load();
    for (int b = 0; b < kBuckets; ++b) hist[b] += s.hist[b].load();
    if (s.kind == kEqual && i >= o.processes) equal_rates.push_back(static_cast<double>(s.pairs.load()) / run_s);
  }
  double sum = 0, sum_sq = 0;
  for (double r : equal_rates) sum += r, sum_sq += r * r;
  const double jain = equal_rates.empty() || sum_sq == 0 ? 0 : sum * sum / (static_cast<double>(equal_rates.size()) * sum_sq);
  uint64_t rss_max = 0, anon_max = 0, fds_max = 0;
  for (const auto& s : samples) rss_max = std::max(rss_max, s.rss_kib), anon_max = std::max(anon_max, s.anon_kib), fds_max = std::max(fds_max, s.fds);
  const DaemonSample& first = samples.front();
  const DaemonSample& last = samples.back();

  std::printf("churn_bench: %d clients (%d processes, %d of them killed and restarted: %d kills; %d threads in %d "
              "processes), %d reconnecting every 2-5 s, %d s measured, daemon with %d soft NIC(s)\n",
              o.clients, o.processes, o.killed, static_cast<int>(kills), threads, o.thread_processes, marked, o.seconds, o.nics);
  std::printf("pairs: %lu (%.0f/s); failed pairs: %lu of clients never killed, %lu of killed ones\n",
              static_cast<unsigned long>(pairs), static_cast<double>(pairs) / run_s,
              static_cast<unsigned long>(errors_unkilled), static_cast<unsigned long>(errors_killed));
  std::printf("pair latency, every client's pairs (ms): p50 %.2f p99 %.2f p99.9 %.2f\n", percentile(hist, 0.5) / 1000,
              percentile(hist, 0.99) / 1000, percentile(hist, 0.999) / 1000);
  std::printf("probe (a 4 KiB pair every 100 ms), %zu pairs (ms): p50 %.2f p99 %.2f max %.2f; failed %lu\n",
              probe_ms.size(), exact_percentile(probe_ms, 0.5), exact_percentile(probe_ms, 0.99),
              probe_ms.empty() ? 0 : *std::max_element(probe_ms.begin(), probe_ms.end()),
              static_cast<unsigned long>(probe_errors));
  std::printf("jain over %zu equal clients' pair rates: %.3f (mean %.1f pairs/s)\n", equal_rates.size(), jain,
              equal_rates.empty() ? 0 : sum / static_cast<double>(equal_rates.size()));
  std::printf("daemon rss MiB: start %.1f max %.1f end %.1f (anonymous: %.1f %.1f %.1f); fds: start %lu max %lu end %lu\n",
              first.rss_kib / 1024.0, rss_max / 1024.0, last.rss_kib / 1024.0, first.anon_kib / 1024.0,
              anon_max / 1024.0, last.anon_kib / 1024.0, static_cast<unsigned long>(first.fds),
              static_cast<unsigned long>(fds_max), static_cast<unsigned long>(last.fds));
  std::printf("cpu over the run (%u cores x %.0f s = %.0f core-s): machine busy %.1f core-s, of it the daemon %.1f "
              "and the clients (and this program) %.1f\n",
              std::thread::hardware_concurrency(), run_s, std::thread::hardware_concurrency() * run_s, busy, daemon_cpu,
              busy - daemon_cpu);
  std::printf("after the clients: daemon memfd mappings %lu (before %lu), fds %lu (before %lu)\n",
              static_cast<unsigned long>(after.memfd_maps), static_cast<unsigned long>(before.memfd_maps),
              static_cast<unsigned long>(after.fds), static_cast<unsigned long>(before.fds));
  const bool leaked = after.memfd_maps > before.memfd_maps || after.fds > before.fds;
  return errors_unkilled > 0 || probe_errors > 0 || leaked ? 1 : 0;
}
