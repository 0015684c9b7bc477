// The latency trace points: every point has its own name, what is recorded comes back in the file
// with each thread's id and in clock order, and a build without RDMAD_TRACE_POINTS records nothing
// (mark is free on the hot paths it sits in).
#include "rdmad/base/trace_points.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <thread>
#include <vector>

#include "support/temp_dir.h"

namespace rdmad::base::trace {
namespace {

TEST(TracePoints, EveryPointHasItsOwnName) {
  std::set<std::string_view> names;
  for (int i = 0; i < static_cast<int>(Point::kCount); ++i) {
    const std::string_view n = name(static_cast<Point>(i));
    EXPECT_NE(n, "unknown") << "point " << i;
    EXPECT_EQ(n.find(' '), std::string_view::npos) << n;  // one field of the file's lines
    EXPECT_TRUE(names.insert(n).second) << "two points named " << n;
  }
  EXPECT_EQ(name(Point::kCount), "unknown");
  EXPECT_EQ(name(Point::kBenchStart), "bench_start");  // the report splits iterations on it
}

TEST(TracePoints, MarkRecordsOnlyInATracingBuild) {
  const uint64_t before = recorded();
  mark(Point::kChunkPosted);
  EXPECT_EQ(recorded() - before, kEnabled ? 1u : 0u);
}

struct Line {
  long long ns;
  int pid;
  int tid;
  std::string point;
  unsigned long long arg;
};

std::vector<Line> read_lines(const std::string& path) {
  std::vector<Line> out;
  std::ifstream in(path);
  std::string text;
  while (std::getline(in, text)) {
    std::istringstream fields(text);
    Line l;
    fields >> l.ns >> l.pid >> l.tid >> l.point >> l.arg;
    EXPECT_FALSE(fields.fail()) << "line: " << text;
    out.push_back(l);
  }
  return out;
}

TEST(TracePoints, TheFileHoldsEveryThreadsPointsInClockOrder) {
  const uint64_t before = recorded();
  record(Point::kBenchStart, 7);
  std::thread other([] {
    for (uint64_t i = 0; i < 100; ++i) record(Point::kPacketsSent, i);
  });
  other.join();
  record(Point::kBenchRecvSeen, 8);
  ASSERT_EQ(recorded() - before, 102u);

  test::TempDir dir;
  const std::string path = dir.path() + "/trace.test";
  ASSERT_TRUE(write_file(path));
  const std::vector<Line> all = read_lines(path);
  ASSERT_EQ(all.size(), recorded());
  const std::vector<Line> lines(all.end() - 102, all.end());  // this test's, after any earlier test's
  EXPECT_EQ(lines.front().point, "bench_start");
  EXPECT_EQ(lines.front().arg, 7u);
  EXPECT_EQ(lines.back().point, "bench_recv_seen");
  EXPECT_EQ(lines.back().arg, 8u);
  EXPECT_EQ(lines.front().tid, lines.back().tid);
  std::map<int, long long> last_ns;
  for (size_t i = 0; i < lines.size(); ++i) {
    const Line& l = lines[i];
    EXPECT_EQ(l.pid, ::getpid());
    if (i > 0 && i < 101) {
      EXPECT_EQ(l.point, "packets_sent");
      EXPECT_EQ(l.arg, i - 1);
      EXPECT_NE(l.tid, lines.front().tid) << "the other thread's points carry its own id";
    }
    // The clock never goes back, within a thread or across the join.
    EXPECT_GE(l.ns, i > 0 ? lines[i - 1].ns : 0) << "line " << i;
  }
}

TEST(TracePoints, AFileThatCannotBeWrittenIsReported) {
  record(Point::kEngineWakes);
  EXPECT_FALSE(write_file("/nonexistent-directory/trace.1"));
}

}  // namespace
}  // namespace rdmad::base::trace
