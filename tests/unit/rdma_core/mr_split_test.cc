#include "mr_split.h"

#include <gtest/gtest.h>

namespace rdmad::verbs::rdma_core {
namespace {

constexpr uint64_t kGiB = 1ULL << 30;

TEST(RdmaCoreMrSplit, SmallRegistrationIsOneSlice) {
  EXPECT_EQ(plan_mr_slices(4096), (std::vector<MrSlice>{{0, 4096}}));
  EXPECT_EQ(plan_mr_slices(kMaxMrSliceBytes), (std::vector<MrSlice>{{0, kMaxMrSliceBytes}}));
  EXPECT_TRUE(plan_mr_slices(0).empty());
  EXPECT_EQ(kMaxMrSliceBytes % (64 * 1024), 0u);  // a multiple of 4 KiB and 64 KiB pages
}

TEST(RdmaCoreMrSplit, LargeRegistrationIsCutAtThreeAndAHalfGiB) {
  const auto plan = plan_mr_slices(8 * kGiB);
  ASSERT_EQ(plan.size(), 3u);
  EXPECT_EQ(plan[0], (MrSlice{0, kMaxMrSliceBytes}));
  EXPECT_EQ(plan[1], (MrSlice{kMaxMrSliceBytes, kMaxMrSliceBytes}));
  EXPECT_EQ(plan[2], (MrSlice{2 * kMaxMrSliceBytes, 1 * kGiB}));
  EXPECT_EQ(plan_mr_slices(kMaxMrSliceBytes + 1).size(), 2u);
  EXPECT_EQ(plan_mr_slices(80 * kGiB).size(), 23u);
}

TEST(RdmaCoreMrSplit, FindsTheSliceOfARange) {
  const auto plan = plan_mr_slices(8 * kGiB);
  EXPECT_EQ(find_slice(plan, 0, 4096), 0u);
  EXPECT_EQ(find_slice(plan, kMaxMrSliceBytes - 4096, 4096), 0u);
  EXPECT_EQ(find_slice(plan, kMaxMrSliceBytes, 1), 1u);
  EXPECT_EQ(find_slice(plan, 8 * kGiB - 1, 1), 2u);
  EXPECT_FALSE(find_slice(plan, kMaxMrSliceBytes - 1, 2));  // crosses a boundary
  EXPECT_FALSE(find_slice(plan, 8 * kGiB, 1));              // past the end
  EXPECT_FALSE(find_slice(plan, 0, 0));
  EXPECT_FALSE(find_slice(plan, UINT64_MAX, 2));  // no wrap-around
}

TEST(RdmaCoreMrSplit, SplitsARangeAtSliceBoundaries) {
  const auto plan = plan_mr_slices(8 * kGiB);
  const auto pieces = split_range(plan, kMaxMrSliceBytes - 100, kMaxMrSliceBytes + 200);
  ASSERT_EQ(pieces.size(), 3u);
  EXPECT_EQ(pieces[0], (MrPiece{0, kMaxMrSliceBytes - 100, 100}));
  EXPECT_EQ(pieces[1], (MrPiece{1, 0, kMaxMrSliceBytes}));
  EXPECT_EQ(pieces[2], (MrPiece{2, 0, 100}));
  EXPECT_EQ(split_range(plan, 5, 10), (std::vector<MrPiece>{{0, 5, 10}}));
  EXPECT_TRUE(split_range(plan, 8 * kGiB - 1, 2).empty());
  EXPECT_EQ(split_range(plan, 0, 8 * kGiB).size(), 3u);
}

}  // namespace
}  // namespace rdmad::verbs::rdma_core
