#include "rdmad/base/log.h"
#include "rdmad/base/log_fields.h"

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

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

// Under journald each line is a native journal entry: its priority, component and one field per
// key=value, so `journalctl RDMAD_NIC=rail0` finds a NIC's lines; a journal that takes nothing
// leaves the line on stderr in the stream format.
TEST(BaseLog, UnderJournaldLinesCarryTheirFieldsAndFallBackToStderr) {
  const std::string path = "/tmp/rdmad-journal-test-" + std::to_string(::getpid());
  int fd = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::snprintf(addr.sun_path, sizeof(addr.sun_path), "%s", path.c_str());
  ::unlink(path.c_str());
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  timeval tv{5, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  set_journal_socket_for_test(path);
  setup(spdlog::level::info, true);
  testing::internal::CaptureStderr();
  get(Component::kVerbs)->error("nic down nic=rail0 peer={} error={}", base::q("node b"), base::q("line1\nline2"));
  EXPECT_EQ(testing::internal::GetCapturedStderr(), "");
  char buf[4096];
  const ssize_t n = ::recv(fd, buf, sizeof(buf), 0);
  ASSERT_GT(n, 0);
  const std::string got(buf, static_cast<size_t>(n));
  EXPECT_NE(got.find("MESSAGE=[verbs] nic down nic=rail0 peer=\"node b\" error=\"line1\\nline2\"\n"), std::string::npos)
      << got;
  EXPECT_NE(got.find("\nPRIORITY=3\n"), std::string::npos) << got;
  EXPECT_NE(got.find("\nRDMAD_COMPONENT=verbs\n"), std::string::npos) << got;
  EXPECT_NE(got.find("\nRDMAD_NIC=rail0\n"), std::string::npos) << got;
  EXPECT_NE(got.find("\nRDMAD_PEER=node b\n"), std::string::npos) << got;
  // A value with a newline goes in the binary form: KEY, newline, 64-bit length, value.
  const std::string binary = std::string("\nRDMAD_ERROR\n") + std::string("\x0b\0\0\0\0\0\0\0", 8) + "line1\nline2\n";
  EXPECT_NE(got.find(binary), std::string::npos) << got;
  ::close(fd);
  ::unlink(path.c_str());
  testing::internal::CaptureStderr();
  get(Component::kIpc)->warn("client refused uid=1000");  // nobody listens now
  EXPECT_EQ(testing::internal::GetCapturedStderr(), "<4>[ipc] client refused uid=1000\n");
  set_journal_socket_for_test("/run/systemd/journal/socket");
  setup(spdlog::level::info, false);
}

TEST(BaseLog, JournalFieldsAreTheLinesKeyValuePairsUnquoted) {
  const auto f = base::journal_fields("peer lost peer=b rails=2 error=\"x \\\"y\\\" \\x07\" odd-key=1 word=");
  ASSERT_EQ(f.size(), 4u);
  EXPECT_EQ(f[0], (std::pair<std::string, std::string>{"RDMAD_PEER", "b"}));
  EXPECT_EQ(f[1], (std::pair<std::string, std::string>{"RDMAD_RAILS", "2"}));
  EXPECT_EQ(f[2], (std::pair<std::string, std::string>{"RDMAD_ERROR", "x \"y\" \x07"}));
  EXPECT_EQ(f[3], (std::pair<std::string, std::string>{"RDMAD_WORD", ""}));
  EXPECT_TRUE(base::journal_fields("ready").empty());
}

TEST(BaseLog, LevelNames) {
  EXPECT_EQ(parse_level("debug"), spdlog::level::debug);
  EXPECT_EQ(parse_level("off"), spdlog::level::off);
  EXPECT_EQ(parse_level("loud"), std::nullopt);
}

}  // namespace
}  // namespace rdmad::log
