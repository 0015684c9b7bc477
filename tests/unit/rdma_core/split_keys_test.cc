// Keys of a registration split into several MRs: SGE translation onto slices and the lock-free table.
#include "split_keys.h"

#include <gtest/gtest.h>

namespace rdmad::verbs::rdma_core {
namespace {

constexpr uint64_t kBase = 0x7f0000000000;

SplitKeys three_slices() {  // 10 GiB: 3.5 + 3.5 + 3 GiB
  SplitKeys k;
  k.addr = kBase;
  k.length = 10ULL << 30;
  k.count = 3;
  k.lkeys[0] = 0x100;
  k.lkeys[1] = 0x200;
  k.lkeys[2] = 0x300;
  k.rkeys[0] = 0x1100;
  k.rkeys[1] = 0x1200;
  k.rkeys[2] = 0x1300;
  return k;
}

TEST(RdmaCoreSplitKeys, InsideOneSliceUsesThatSlicesLkey) {
  const auto k = three_slices();
  ibv_sge out[kMaxSgePieces];
  ASSERT_EQ(translate_sge(k, kBase + 16, 4096, out), 1u);
  EXPECT_EQ(out[0].addr, kBase + 16);
  EXPECT_EQ(out[0].length, 4096u);
  EXPECT_EQ(out[0].lkey, 0x100u);
  ASSERT_EQ(translate_sge(k, kBase + kMaxMrSliceBytes * 2 + 5, 100, out), 1u);
  EXPECT_EQ(out[0].lkey, 0x300u);
  EXPECT_EQ(out[0].addr, kBase + kMaxMrSliceBytes * 2 + 5);
}

TEST(RdmaCoreSplitKeys, CrossingABoundaryBecomesTwoSges) {
  const auto k = three_slices();
  ibv_sge out[kMaxSgePieces];
  const uint64_t start = kBase + kMaxMrSliceBytes - 1000;
  ASSERT_EQ(translate_sge(k, start, 5000, out), 2u);
  EXPECT_EQ(out[0].addr, start);
  EXPECT_EQ(out[0].length, 1000u);
  EXPECT_EQ(out[0].lkey, 0x100u);
  EXPECT_EQ(out[1].addr, kBase + kMaxMrSliceBytes);
  EXPECT_EQ(out[1].length, 4000u);
  EXPECT_EQ(out[1].lkey, 0x200u);
}

TEST(RdmaCoreSplitKeys, FourGibSgeSpansThreeSlices) {
  auto k = three_slices();
  ibv_sge out[kMaxSgePieces];
  const uint64_t start = kBase + kMaxMrSliceBytes - 4096;
  const uint32_t len = 0xffffffffu;
  ASSERT_LE(uint64_t{len}, k.length - (start - kBase));
  // 4096 in slice 0, all of slice 1 (3.5 GiB), the rest in slice 2.
  ASSERT_EQ(translate_sge(k, start, len, out), 3u);
  EXPECT_EQ(out[0].length, 4096u);
  EXPECT_EQ(out[1].length, kMaxMrSliceBytes);
  EXPECT_EQ(out[2].length, len - 4096 - kMaxMrSliceBytes);
  EXPECT_EQ(out[2].lkey, 0x300u);
  EXPECT_EQ(out[2].addr, kBase + 2 * kMaxMrSliceBytes);
}

TEST(RdmaCoreSplitKeys, OutsideTheRegionIsNotTranslated) {
  const auto k = three_slices();
  ibv_sge out[kMaxSgePieces];
  EXPECT_EQ(translate_sge(k, kBase - 1, 10, out), 0u);
  EXPECT_EQ(translate_sge(k, kBase + k.length - 10, 11, out), 0u);
  EXPECT_EQ(translate_sge(k, kBase + k.length, 1, out), 0u);
  EXPECT_EQ(translate_sge(k, kBase + k.length - 10, 10, out), 1u);
}

TEST(RdmaCoreSplitKeyTable, FindsBySliceZeroLkeyUntilRemoved) {
  SplitKeyTable t;
  EXPECT_EQ(t.find(0x100), nullptr);
  ASSERT_TRUE(t.add(three_slices()));
  const SplitKeys* k = t.find(0x100);
  ASSERT_NE(k, nullptr);
  EXPECT_EQ(k->lkeys[2], 0x300u);
  EXPECT_EQ(t.find(0x200), nullptr) << "only the handle's lkey (slice 0) is looked up";
  t.remove(0x100);
  EXPECT_EQ(t.find(0x100), nullptr);
}

TEST(RdmaCoreSplitKeyTable, ZeroLkeyIsAValidKeyAndTheTableHasACapacity) {
  SplitKeyTable t;
  auto k = three_slices();
  k.lkeys[0] = 0;
  ASSERT_TRUE(t.add(k));
  EXPECT_NE(t.find(0), nullptr);
  for (size_t i = 1; i < SplitKeyTable::kCapacity; ++i) {
    k.lkeys[0] = static_cast<uint32_t>(i);
    ASSERT_TRUE(t.add(k));
  }
  k.lkeys[0] = 999;
  EXPECT_FALSE(t.add(k));
  t.remove(5);
  EXPECT_TRUE(t.add(k)) << "a freed slot is reused";
  EXPECT_NE(t.find(999), nullptr);
}

}  // namespace
}  // namespace rdmad::verbs::rdma_core
