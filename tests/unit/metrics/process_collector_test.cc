// process_* families: /proc/<pid>/stat parsed field by field (a comm with spaces and parentheses
// included), and the collector on this process's own /proc.
#include "rdmad/metrics/process_collector.h"

#include <unistd.h>

#include <chrono>

#include <gtest/gtest.h>
#include <prometheus/metric_family.h>

namespace rdmad::metrics {
namespace {

// Fields 3..24 of proc(5): state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt
// utime(14) stime(15) cutime cstime priority nice threads itrealvalue starttime(22) vsize(23) rss(24).
constexpr const char* kStat =
    "4242 (rdmad (soft) x) S 1 4242 4242 0 -1 4194560 100 0 0 0 250 150 7 9 20 0 5 0 12000 104857600 2560 "
    "18446744073709551615 1 1 0 0 0 0 0 4096 0 0 0 0 17 1 0 0 0 0 0";

TEST(ProcessStat, FieldsAfterTheCommandNameGiveCpuStartAndMemory) {
  const auto s = parse_proc_stat(kStat, 100, 4096, 1'700'000'000);
  ASSERT_TRUE(s.has_value());
  EXPECT_DOUBLE_EQ(s->cpu_seconds, 4.0);                    // (250 + 150) ticks / 100 Hz
  EXPECT_DOUBLE_EQ(s->start_time_seconds, 1'700'000'120.0);  // btime + 12000 / 100
  EXPECT_DOUBLE_EQ(s->virtual_bytes, 104857600.0);
  EXPECT_DOUBLE_EQ(s->resident_bytes, 2560.0 * 4096);
}

TEST(ProcessStat, MalformedTextIsRefused) {
  EXPECT_FALSE(parse_proc_stat("", 100, 4096, 0));
  EXPECT_FALSE(parse_proc_stat("4242 (rdmad) S 1 2 3", 100, 4096, 0)) << "too few fields";
  EXPECT_FALSE(parse_proc_stat("4242 (rdmad) S 1 4242 4242 0 -1 4194560 100 0 0 0 x 150 7 9 20 0 5 0 12000 1 2",
                               100, 4096, 0))
      << "utime is not a number";
  EXPECT_FALSE(parse_boot_time("cpu 1 2 3\n"));
  EXPECT_EQ(parse_boot_time("cpu 1 2 3\nbtime 1700000000\nprocesses 9\n"), 1700000000.0);
}

double value_of(const std::vector<prometheus::MetricFamily>& families, const std::string& name) {
  for (const auto& f : families) {
    if (f.name != name || f.metric.empty()) continue;
    return f.type == prometheus::MetricType::Counter ? f.metric[0].counter.value : f.metric[0].gauge.value;
  }
  ADD_FAILURE() << "no family " << name;
  return -1;
}

TEST(ProcessCollector, ThisProcessStartedRecentlyAndHoldsDescriptors) {
  const auto c = process_collector();
  const auto families = c->Collect();
  const double now =
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  const double start = value_of(families, "process_start_time_seconds");
  EXPECT_LE(start, now + 1);
  EXPECT_GT(start, now - 3600) << "this test binary started within the hour";
  EXPECT_GE(value_of(families, "process_open_fds"), 3) << "stdin, stdout, stderr";
  EXPECT_GT(value_of(families, "process_max_fds"), 0);
  EXPECT_GT(value_of(families, "process_resident_memory_bytes"), 1 << 20);
  EXPECT_GE(value_of(families, "process_cpu_seconds_total"), 0);
}

}  // namespace
}  // namespace rdmad::metrics
