#include "rdmad/base/log.h"

#include <gtest/gtest.h>
#include <spdlog/sinks/ostream_sink.h>

#include <regex>
#include <sstream>

namespace rdmad::log {
namespace {

TEST(BaseLog, EveryComponentHasOneLoggerNamedAfterIt) {
  EXPECT_EQ(get(Component::kIpc)->name(), "ipc");
  EXPECT_EQ(get(Component::kFlow)->name(), "flow");
  EXPECT_EQ(get(Component::kVerbs).get(), get(Component::kVerbs).get());  // one logger, not one per call
  EXPECT_EQ(name(Component::kPeer), "peer");
}

TEST(BaseLog, SetupRebuildsTheLoggersAtTheLevelAsked) {
  setup(spdlog::level::warn, false);
  EXPECT_EQ(get(Component::kDaemon)->level(), spdlog::level::warn);
  set_level(spdlog::level::debug);
  EXPECT_EQ(get(Component::kCc)->level(), spdlog::level::debug);
  setup(spdlog::level::info, false);
}

TEST(BaseLog, ReplaceForTestCapturesAComponentAndGivesItBack) {
  std::ostringstream out;
  auto capture = std::make_shared<spdlog::logger>("verbs", std::make_shared<spdlog::sinks::ostream_sink_mt>(out));
  auto previous = replace_for_test(Component::kVerbs, capture);
  get(Component::kVerbs)->warn("event device=x");
  replace_for_test(Component::kVerbs, previous);
  EXPECT_NE(out.str().find("event device=x"), std::string::npos);
  EXPECT_EQ(get(Component::kVerbs).get(), previous.get());
}

// Outside the journal: an RFC 3339 timestamp with its offset, so lines from nodes in different
// zones sort and compare; under journald: the syslog priority and no timestamp (journald adds it).
TEST(BaseLog, OneFormatterWithRfc3339TimestampsOrJournalPriorities) {
  setup(spdlog::level::info, false);
  testing::internal::CaptureStderr();
  get(Component::kDaemon)->info("ready sockets=2");
  std::string line = testing::internal::GetCapturedStderr();
  EXPECT_TRUE(std::regex_match(
      line, std::regex(R"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}[+-]\d\d:\d\d info  \[daemon\] ready sockets=2\n)")))
      << line;
  setup(spdlog::level::info, true);
  testing::internal::CaptureStderr();
  get(Component::kIpc)->warn("client refused uid=1000");
  line = testing::internal::GetCapturedStderr();
  EXPECT_EQ(line, "<4>[ipc] client refused uid=1000\n");
  setup(spdlog::level::info, false);
}

TEST(BaseLog, LevelNames) {
  EXPECT_EQ(parse_level("debug"), spdlog::level::debug);
  EXPECT_EQ(parse_level("off"), spdlog::level::off);
  EXPECT_EQ(parse_level("loud"), std::nullopt);
}

}  // namespace
}  // namespace rdmad::log
