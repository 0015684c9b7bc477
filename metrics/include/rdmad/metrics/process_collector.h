#pragma once
// The standard process_* families (as Prometheus' client libraries export them), read from
// /proc at scrape time: process_cpu_seconds_total, process_start_time_seconds,
// process_resident_memory_bytes, process_virtual_memory_bytes, process_open_fds, process_max_fds.
// A restart shows as process_start_time_seconds changing (alert RdmadRestartLoop uses the
// daemon's own rdmad_start_time_seconds, which is the same instant).
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include <prometheus/collectable.h>

namespace rdmad::metrics {

struct ProcessStats {
  double cpu_seconds = 0;          // user + system
  double start_time_seconds = 0;   // since the Unix epoch
  double resident_bytes = 0;
  double virtual_bytes = 0;
};

/// Parses the text of /proc/<pid>/stat (proc(5)); nullopt when it is malformed. `boot_time_seconds`
/// is /proc/stat's btime.
std::optional<ProcessStats> parse_proc_stat(std::string_view stat, long ticks_per_second, long page_size,
                                            double boot_time_seconds);

/// /proc/stat's btime, or nullopt.
std::optional<double> parse_boot_time(std::string_view proc_stat);

/// The collector of this process's process_* families, from `proc` (a fixture tree in tests).
std::shared_ptr<prometheus::Collectable> process_collector(std::string proc = "/proc");

}  // namespace rdmad::metrics
