#include "rdmad/nic_cc/cc_health.h"

#include <gtest/gtest.h>

#include "unit/nic_cc/sysfs_fixture.h"

namespace rdmad::nic_cc {
namespace {

using rdmad::testing::sysfs_fixture;
using rdmad::testing::WritableFixture;

HwCounters hw(uint64_t ignored) {
  HwCounters h;
  h.values["rp_cnp_ignored"] = ignored;
  h.values["rp_cnp_handled"] = 10;
  return h;
}

CcPriorityEnable all_on() {
  CcPriorityEnable e;
  e.rp.fill(true);
  e.np.fill(true);
  return e;
}

TEST(NicCcEnable, ReadsTheVendorSwitchesPerPriority) {
  const auto e = read_cc_enable(SysfsRoot(sysfs_fixture("procfs")), "eth0");
  ASSERT_TRUE(e.ok()) << e.error().message();
  const std::array<bool, 8> rp = {true, true, false, true, true, false, true, false};
  const std::array<bool, 8> np = {true, true, false, true, true, false, true, true};
  for (int p = 0; p < kNumPriorities; ++p) {
    EXPECT_EQ(e->rp[p], rp[p]) << p;
    EXPECT_EQ(e->np[p], np[p]) << p;
  }
  EXPECT_FALSE(read_cc_enable(SysfsRoot(sysfs_fixture("roce-cx6dx")), "enp59s0f0np0").ok());
}

TEST(NicCcEnable, SetsOneSwitchAndReadsItBack) {
  WritableFixture fx("procfs");
  const SysfsRoot root(fx.path());
  auto r = set_cc_enable(root, "eth0", cc::KnobSide::kReactionPoint, 5, true);
  ASSERT_TRUE(r.ok()) << r.error().message();
  EXPECT_TRUE(*r);
  EXPECT_EQ(read_cc_enable(root, "eth0")->rp[5], true);
  EXPECT_EQ(read_cc_enable(root, "eth0")->np[5], false);
  EXPECT_FALSE(set_cc_enable(root, "eth0", cc::KnobSide::kNotificationPoint, 8, true).ok());
}

TEST(NicCcHealth, HealthyPortHasNoFindings) {
  const auto a = hw(7), b = hw(7);
  EXPECT_TRUE(check_cc_health({"mlx5_0", 1, 3, &a, &b, all_on()}).empty());
  EXPECT_TRUE(check_cc_health({"mlx5_0", 1, 3, nullptr, &b, std::nullopt}).empty());
}

TEST(NicCcHealth, CnpIgnoredRisingIsAFinding) {
  const auto a = hw(100), b = hw(160);
  const auto f = check_cc_health({"mlx5_0", 1, 3, &a, &b, std::nullopt});
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].kind, CcFindingKind::kCnpIgnoredRising);
  EXPECT_NE(f[0].text.find("rose by 60"), std::string::npos) << f[0].text;
  EXPECT_NE(f[0].text.find("mlx5_0 port 1"), std::string::npos);
}

TEST(NicCcHealth, CounterResetIsReportedAsSuch) {
  const auto a = hw(100), b = hw(3);
  const auto f = check_cc_health({"mlx5_0", 1, 3, &a, &b, std::nullopt});
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].kind, CcFindingKind::kCounterWentBackwards);
}

TEST(NicCcHealth, DisabledOnTheRocePriorityIsAFinding) {
  auto e = all_on();
  e.rp[3] = false;
  e.np[5] = false;  // not the RoCE priority: no finding
  const auto f = check_cc_health({"mlx5_0", 1, 3, nullptr, nullptr, e});
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].kind, CcFindingKind::kRpDisabledOnRocePrio);
  EXPECT_NE(f[0].text.find("priority 3"), std::string::npos);
  const auto g = check_cc_health({"mlx5_0", 1, 5, nullptr, nullptr, e});
  ASSERT_EQ(g.size(), 1u);
  EXPECT_EQ(g[0].kind, CcFindingKind::kNpDisabledOnRocePrio);
}

// End to end on the vendor-driver host: RoCE on priority 5, where the fixture has both sides off,
// and rp_cnp_ignored climbing between two samples.
TEST(NicCcHealth, VendorHostWithCcOffOnItsRocePriority) {
  WritableFixture fx("roce-vendor-ecn");
  const SysfsRoot root(fx.path());
  const auto first = read_hw_counters(root, "mlx5_0", 1);
  ASSERT_TRUE(first.ok());
  ASSERT_TRUE(root.write("/sys/class/infiniband/mlx5_0/ports/1/hw_counters/rp_cnp_ignored", "5100").ok());
  const auto second = read_hw_counters(root, "mlx5_0", 1);
  const auto enable = read_cc_enable(root, "eth0");
  ASSERT_TRUE(enable.ok());
  const auto f = check_cc_health({"mlx5_0", 1, 5, &*first, &*second, *enable});
  ASSERT_EQ(f.size(), 3u);
  EXPECT_EQ(f[0].kind, CcFindingKind::kRpDisabledOnRocePrio);
  EXPECT_EQ(f[1].kind, CcFindingKind::kNpDisabledOnRocePrio);
  EXPECT_EQ(f[2].kind, CcFindingKind::kCnpIgnoredRising);
  EXPECT_NE(f[2].text.find("rose by 78 (to 5100)"), std::string::npos) << f[2].text;
}

}  // namespace
}  // namespace rdmad::nic_cc
