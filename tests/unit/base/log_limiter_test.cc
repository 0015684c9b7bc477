#include "rdmad/base/log_limiter.h"

#include <gtest/gtest.h>
#include <spdlog/sinks/ostream_sink.h>

#include <sstream>
#include <thread>

namespace rdmad::base {
namespace {

using namespace std::chrono_literals;
using Clock = LogLimiter::Clock;

TEST(LogLimiter, AllowsABurstPerIntervalAndCountsTheRest) {
  LogLimiter limiter(10s, 3);
  const Clock::time_point t0{};
  uint64_t suppressed = 99;
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(limiter.allow(t0 + std::chrono::milliseconds(i), &suppressed));
    EXPECT_EQ(suppressed, 0u);
  }
  for (int i = 0; i < 1000; ++i) EXPECT_FALSE(limiter.allow(t0 + 5s, &suppressed));
  EXPECT_EQ(limiter.suppressed_total(), 1000u);
  // Still inside the interval that began at t0.
  EXPECT_FALSE(limiter.allow(t0 + 9999ms, &suppressed));
  // A new interval: the first line reports everything left out before it.
  ASSERT_TRUE(limiter.allow(t0 + 10s, &suppressed));
  EXPECT_EQ(suppressed, 1001u);
  ASSERT_TRUE(limiter.allow(t0 + 10s, &suppressed));
  EXPECT_EQ(suppressed, 0u);
}

TEST(LogLimiter, AFloodWritesABoundedNumberOfLinesWithTheSuppressedCount) {
  std::ostringstream out;
  auto sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(out);
  spdlog::logger log("test", sink);
  log.set_pattern("%v");
  LogLimiter limiter(1h, 2);
  int written = 0;
  for (int i = 0; i < 100000; ++i)
    written += log_limited(log, limiter, spdlog::level::warn, "refused peer {}", i) ? 1 : 0;
  EXPECT_EQ(written, 2);
  EXPECT_EQ(out.str(), "refused peer 0\nrefused peer 1\n");
  EXPECT_EQ(limiter.suppressed_total(), 99998u);
}

TEST(LogLimiter, TheNextLineWrittenCarriesTheSuppressedCountAsAField) {
  std::ostringstream out;
  spdlog::logger log("test", std::make_shared<spdlog::sinks::ostream_sink_mt>(out));
  log.set_pattern("%v");
  LogLimiter limiter(50ms, 1);
  for (int i = 0; i < 3; ++i) log_limited(log, limiter, spdlog::level::warn, "peer refused peer={}", i);
  std::this_thread::sleep_for(60ms);  // the next interval
  EXPECT_TRUE(log_limited(log, limiter, spdlog::level::warn, "peer refused peer={}", 3));
  // The count is one more key=value field, so the line keeps the shape of docs/operations.md.
  EXPECT_EQ(out.str(), "peer refused peer=0\npeer refused peer=3 suppressed=2\n");
}

TEST(LogLimiter, LinesBelowTheLoggersLevelAreNotCounted) {
  std::ostringstream out;
  spdlog::logger log("test", std::make_shared<spdlog::sinks::ostream_sink_mt>(out));
  log.set_level(spdlog::level::err);
  LogLimiter limiter(1h, 1);
  EXPECT_FALSE(log_limited(log, limiter, spdlog::level::info, "quiet {}", 1));
  EXPECT_TRUE(log_limited(log, limiter, spdlog::level::err, "loud {}", 2));
  EXPECT_EQ(limiter.suppressed_total(), 0u);
}

}  // namespace
}  // namespace rdmad::base
