// The library's record of a flow's outstanding requests (client/src/outstanding.h).
#include "outstanding.h"

#include <gtest/gtest.h>

#include <vector>

namespace rdmad::client {
namespace {

constexpr uint8_t kWrite = 1, kRecv = 4;

TEST(Outstanding, OldestFirstAcrossBothQueues) {
  Outstanding o;
  o.reset(8, kRecv);
  o.add(kWrite, 1);
  o.add(kRecv, 2);
  o.add(kWrite, 3);
  o.complete(kWrite, 1);
  Outstanding::Entry e;
  ASSERT_TRUE(o.pop_oldest(&e));
  EXPECT_EQ(e.wr_id, 2u);
  EXPECT_EQ(e.op, kRecv);
  ASSERT_TRUE(o.pop_oldest(&e));
  EXPECT_EQ(e.wr_id, 3u);
  EXPECT_FALSE(o.pop_oldest(&e));
  EXPECT_EQ(o.size(), 0u);
}

TEST(Outstanding, RepeatedWrIdsCompleteOldestFirstAndUnknownOnesAreIgnored) {
  Outstanding o;
  o.reset(4, kRecv);
  o.add(kWrite, 0);
  o.add(kWrite, 0);
  o.add(kRecv, 0);
  o.complete(kWrite, 9);  // never posted
  o.complete(kRecv, 0);
  o.complete(kWrite, 0);
  EXPECT_EQ(o.size(), 1u);
  Outstanding::Entry e;
  ASSERT_TRUE(o.pop_oldest(&e));
  EXPECT_EQ(e.op, kWrite);
}

TEST(Outstanding, FullAtCapacity) {
  Outstanding o;
  o.reset(3, kRecv);
  for (uint64_t i = 0; i < 3; ++i) o.add(kWrite, i);
  EXPECT_TRUE(o.full());
  o.complete(kWrite, 1);
  EXPECT_FALSE(o.full());
}

// A receive that stays pending while many writes come and go: holes are compacted, the queue
// never runs out of room and the order is kept.
TEST(Outstanding, LongPendingReceiveWithStreamingWrites) {
  Outstanding o;
  o.reset(4, kRecv);
  o.add(kRecv, 1000);
  for (uint64_t i = 0; i < 10000; ++i) {
    o.add(kWrite, i);
    if (i % 3 == 2) {
      o.complete(kWrite, i - 2);
      o.complete(kWrite, i);  // out of order
      o.complete(kWrite, i - 1);
    }
    ASSERT_LE(o.size(), 4u);
  }
  // Live now: the receive and write 9999 (the last group of three was not completed). A hole in
  // the middle: a write completed out of order behind an older live one.
  o.add(kWrite, 1);
  o.add(kWrite, 2);
  EXPECT_TRUE(o.full());
  o.complete(kWrite, 1);
  Outstanding::Entry e;
  std::vector<uint64_t> left;
  while (o.pop_oldest(&e)) left.push_back(e.wr_id);
  EXPECT_EQ(left, (std::vector<uint64_t>{1000, 9999, 2}));
}

}  // namespace
}  // namespace rdmad::client
