// Memory-region keys and QP numbers of the soft backend are unguessable: no fixed step between
// them, every bit outside the table index random, 0 and the special QPNs never handed out, and an
// entry freed and taken again gets another value (a late packet for the old one must miss).
#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "verbs_test_util.h"

namespace rdmad::verbs::test {
namespace {

constexpr uint32_t kMrTable = 1u << 16;  // soft backend: entry 0 unused, so 65535 regions
constexpr uint32_t kQpTable = 1024;

std::unique_ptr<Device> soft_device(uint32_t max_qps = kQpTable) {
  std::string skip;
  DeviceConfig c = soft_config();
  c.backend_options["max_qps"] = int64_t{max_qps};
  auto dev = open_device("soft", c, &skip);
  EXPECT_TRUE(dev) << skip;
  return dev;
}

TEST(SoftIds, KeysHaveNoFixedStepAndRandomHighBits) {
  auto dev = soft_device();
  ASSERT_TRUE(dev);
  auto pd = std::move(dev->alloc_pd().value());
  std::vector<uint8_t> buf(4096);
  std::vector<std::unique_ptr<MemoryRegion>> mrs;
  std::set<uint32_t> keys, high;
  for (int i = 0; i < 256; ++i) {
    mrs.push_back(std::move(pd->reg_mr(buf.data(), buf.size(), kAccessRemoteWrite).value()));
    const uint32_t k = mrs.back()->rkey();
    EXPECT_NE(k, 0u);
    EXPECT_EQ(mrs.back()->lkey(), k);
    keys.insert(k);
    high.insert(k >> 16);
  }
  EXPECT_EQ(keys.size(), 256u);
  EXPECT_GE(high.size(), 250u) << "the bits above the table index are drawn at random";
  // The old layout (index << 8 | generation) put the next region at +0x101: keys must not sit that
  // close to each other (random 32-bit keys: 0.015 such pairs expected among 256).
  std::vector<uint32_t> sorted(keys.begin(), keys.end());
  int close = 0;
  for (size_t i = 1; i < sorted.size(); ++i) close += sorted[i] - sorted[i - 1] < (1u << 10);
  EXPECT_LE(close, 1);
}

TEST(SoftIds, AFreedEntryTakenAgainGetsAnotherKey) {
  auto dev = soft_device();
  ASSERT_TRUE(dev);
  auto pd = std::move(dev->alloc_pd().value());
  std::vector<uint8_t> buf(64);
  std::vector<std::unique_ptr<MemoryRegion>> mrs;
  for (uint32_t i = 1; i < kMrTable; ++i) mrs.push_back(std::move(pd->reg_mr(buf.data(), buf.size(), 0).value()));
  ASSERT_FALSE(pd->reg_mr(buf.data(), buf.size(), 0).ok()) << "table full";
  // One free entry: every registration takes it, and never with the key it had just before.
  uint32_t previous = mrs.back()->rkey();
  std::set<uint32_t> seen{previous};
  for (int round = 0; round < 200; ++round) {
    mrs.pop_back();
    mrs.push_back(std::move(pd->reg_mr(buf.data(), buf.size(), 0).value()));
    const uint32_t k = mrs.back()->rkey();
    EXPECT_EQ(k & (kMrTable - 1), previous & (kMrTable - 1)) << "the one free entry";
    EXPECT_NE(k, previous);
    seen.insert(k);
    previous = k;
  }
  EXPECT_GE(seen.size(), 195u) << "keys of one entry repeat only by chance (16 random bits)";
}

TEST(SoftIds, QpNumbersAreRandom24BitAndNeverSpecial) {
  auto dev = soft_device();
  ASSERT_TRUE(dev);
  auto pd = std::move(dev->alloc_pd().value());
  auto cq = std::move(dev->create_cq(64).value());
  QpInitAttr ia;
  ia.send_cq = ia.recv_cq = cq.get();
  ia.max_send_wr = ia.max_recv_wr = 1;
  std::vector<std::unique_ptr<QueuePair>> qps;
  std::set<uint32_t> qpns;
  for (uint32_t i = 0; i < kQpTable; ++i) {
    qps.push_back(std::move(pd->create_qp(ia).value()));
    const uint32_t q = qps.back()->qp_num();
    EXPECT_LE(q, 0xFFFFFEu);
    EXPECT_GT(q, 1u);
    qpns.insert(q);
  }
  EXPECT_EQ(qpns.size(), kQpTable);
  ASSERT_FALSE(pd->create_qp(ia).ok()) << "table full";
  // Sequential numbering from 0x100 is gone: at most a few of the old numbers by chance.
  int old_numbers = 0;
  for (uint32_t q = 0x100; q < 0x100 + kQpTable; ++q) old_numbers += qpns.count(q);
  EXPECT_LE(old_numbers, 2);
  // A freed entry taken again: another number each time.
  uint32_t previous = qps.back()->qp_num();
  for (int round = 0; round < 100; ++round) {
    qps.pop_back();
    qps.push_back(std::move(pd->create_qp(ia).value()));
    const uint32_t q = qps.back()->qp_num();
    EXPECT_EQ(q & (kQpTable - 1), previous & (kQpTable - 1));
    EXPECT_NE(q, previous);
    previous = q;
  }
}

}  // namespace
}  // namespace rdmad::verbs::test
