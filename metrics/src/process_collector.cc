#include "rdmad/metrics/process_collector.h"

#include <sys/resource.h>
#include <unistd.h>

#include <charconv>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <vector>

#include "rdmad/metrics/family_set.h"

namespace rdmad::metrics {
namespace {

constexpr Metric kCpu{"process_cpu_seconds_total", "Total user and system CPU time spent in seconds.",
                      Kind::kCounter};
constexpr Metric kStart{"process_start_time_seconds", "Start time of the process since unix epoch in seconds.",
                        Kind::kGauge};
constexpr Metric kResident{"process_resident_memory_bytes", "Resident memory size in bytes.", Kind::kGauge};
constexpr Metric kVirtual{"process_virtual_memory_bytes", "Virtual memory size in bytes.", Kind::kGauge};
constexpr Metric kOpenFds{"process_open_fds", "Number of open file descriptors.", Kind::kGauge};
constexpr Metric kMaxFds{"process_max_fds", "Maximum number of open file descriptors.", Kind::kGauge};

std::string read_all(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

class ProcessCollector final : public prometheus::Collectable {
 public:
  explicit ProcessCollector(std::string proc) : proc_(std::move(proc)) {}

  std::vector<prometheus::MetricFamily> Collect() const override {
    FamilySet f;
    const auto boot = parse_boot_time(read_all(proc_ + "/stat"));
    const auto stats =
        parse_proc_stat(read_all(proc_ + "/self/stat"), sysconf(_SC_CLK_TCK), sysconf(_SC_PAGESIZE), boot.value_or(0));
    if (stats) {
      f.add(kCpu, {}, stats->cpu_seconds);
      if (boot) f.add(kStart, {}, stats->start_time_seconds);
      f.add(kResident, {}, stats->resident_bytes);
      f.add(kVirtual, {}, stats->virtual_bytes);
    }
    std::error_code ec;
    size_t fds = 0;
    for (std::filesystem::directory_iterator it(proc_ + "/self/fd", ec), end; !ec && it != end; it.increment(ec)) ++fds;
    if (!ec) f.add(kOpenFds, {}, static_cast<double>(fds));
    rlimit lim{};
    if (getrlimit(RLIMIT_NOFILE, &lim) == 0 && lim.rlim_cur != RLIM_INFINITY)
      f.add(kMaxFds, {}, static_cast<double>(lim.rlim_cur));
    return f.take();
  }

 private:
  std::string proc_;
};

}  // namespace

std::optional<ProcessStats> parse_proc_stat(std::string_view stat, long ticks_per_second, long page_size,
                                            double boot_time_seconds) {
  // "pid (comm) state ppid ...": comm may hold spaces and parentheses, so fields start after the
  // last ')'. Field 3 is state; utime and stime are 14 and 15, starttime 22, vsize 23, rss 24.
  const size_t close = stat.rfind(')');
  if (close == std::string_view::npos || ticks_per_second <= 0 || page_size <= 0) return std::nullopt;
  std::istringstream in(std::string(stat.substr(close + 1)));
  std::vector<std::string> fields;  // fields[0] is field 3
  for (std::string w; in >> w && fields.size() < 22;) fields.push_back(w);
  if (fields.size() < 22) return std::nullopt;
  auto number = [&](size_t field) -> std::optional<double> {
    const std::string& s = fields[field - 3];
    unsigned long long v = 0;
    auto [p, err] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (err != std::errc{} || p != s.data() + s.size()) return std::nullopt;
    return static_cast<double>(v);
  };
  const auto utime = number(14), stime = number(15), start = number(22), vsize = number(23), rss = number(24);
  if (!utime || !stime || !start || !vsize || !rss) return std::nullopt;
  ProcessStats s;
  const double hz = static_cast<double>(ticks_per_second);
  s.cpu_seconds = (*utime + *stime) / hz;
  s.start_time_seconds = boot_time_seconds + *start / hz;
  s.virtual_bytes = *vsize;
  s.resident_bytes = *rss * static_cast<double>(page_size);
  return s;
}

std::optional<double> parse_boot_time(std::string_view proc_stat) {
  std::istringstream in{std::string(proc_stat)};
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("btime ", 0) != 0) continue;
    double v = 0;
    auto [p, err] = std::from_chars(line.data() + 6, line.data() + line.size(), v);
    if (err == std::errc{}) return v;
  }
  return std::nullopt;
}

std::shared_ptr<prometheus::Collectable> process_collector(std::string proc) {
  return std::make_shared<ProcessCollector>(std::move(proc));
}

}  // namespace rdmad::metrics
