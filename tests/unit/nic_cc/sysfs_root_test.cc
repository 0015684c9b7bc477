#include "rdmad/nic_cc/sysfs_root.h"

#include <gtest/gtest.h>

#include "unit/nic_cc/sysfs_fixture.h"

namespace rdmad::nic_cc {
namespace {

using rdmad::testing::sysfs_fixture;
using rdmad::testing::WritableFixture;

TEST(NicCcSysfsRoot, MapsHostPathsUnderTheRoot) {
  const SysfsRoot root("/tmp/fx");
  EXPECT_EQ(root.map("/sys/class/net/eth0/mtu"), std::filesystem::path("/tmp/fx/sys/class/net/eth0/mtu"));
  EXPECT_EQ(root.map("sys/x"), std::filesystem::path("/tmp/fx/sys/x"));
  EXPECT_TRUE(SysfsRoot().is_host());
  EXPECT_EQ(SysfsRoot().map("/sys/class"), std::filesystem::path("/sys/class"));
}

TEST(NicCcSysfsRoot, TrimsTheFixturesByteExactQuirks) {
  const SysfsRoot root(sysfs_fixture("procfs"));
  // node_guid has no final newline; mlx4_0 port 2 link_layer has an extra empty line.
  EXPECT_EQ(root.read("/sys/class/infiniband/mlx5_0/node_guid").value(), "0a7f:bc12:45ef:d23b");
  EXPECT_EQ(root.read("/sys/class/infiniband/mlx4_0/ports/2/link_layer").value(), "InfiniBand\n\n");
  EXPECT_EQ(root.read_trimmed("/sys/class/infiniband/mlx4_0/ports/2/link_layer").value(), "InfiniBand");
}

TEST(NicCcSysfsRoot, ReadsSixtyFourBitValues) {
  const SysfsRoot root(sysfs_fixture("procfs"));
  EXPECT_EQ(root.read_u64("/sys/class/infiniband/mlx5_0/ports/1/counters/port_xmit_data").value(),
            2880761508848ULL);
  const auto bad = root.read_u64("/sys/class/infiniband/mlx5_0/ports/1/state");  // "4: ACTIVE"
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().err, EINVAL);
  const auto missing = root.read_u64("/sys/class/infiniband/mlx5_0/nope");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().err, ENOENT);
  EXPECT_NE(missing.error().message().find("/sys/class/infiniband/mlx5_0/nope"), std::string::npos);
}

TEST(NicCcSysfsRoot, ParsesUnsignedNumbers) {
  EXPECT_EQ(parse_u64(" 42\n"), 42u);
  EXPECT_EQ(parse_u64("0x1f"), 31u);
  EXPECT_EQ(parse_u64("18446744073709551615"), UINT64_MAX);
  EXPECT_FALSE(parse_u64("18446744073709551616"));
  EXPECT_FALSE(parse_u64("-1"));
  EXPECT_FALSE(parse_u64("12 34"));
  EXPECT_FALSE(parse_u64(""));
}

TEST(NicCcSysfsRoot, ResolvesSymlinksInsideTheRoot) {
  const SysfsRoot root(sysfs_fixture("roce-cx6dx"));
  EXPECT_EQ(root.resolve("/sys/class/infiniband/mlx5_1/device").value(),
            "/sys/devices/pci0000:3a/0000:3a:00.0/0000:3b:00.1");
  EXPECT_EQ(root.resolve("/sys/class/net/enp59s0f0np0.100").value(),
            "/sys/devices/virtual/net/enp59s0f0np0.100");
  EXPECT_FALSE(root.resolve("/sys/class/infiniband/mlx9_0").ok());
}

TEST(NicCcSysfsRoot, ListsDirectoriesSorted) {
  const SysfsRoot root(sysfs_fixture("procfs"));
  EXPECT_EQ(root.list("/sys/class/infiniband"), (std::vector<std::string>{"hfi1_0", "mlx4_0", "mlx5_0"}));
  EXPECT_TRUE(root.list("/sys/class/nothing").empty());
}

TEST(NicCcSysfsRoot, WritesExistingAttributesOnly) {
  WritableFixture fx("procfs");
  const SysfsRoot root(fx.path());
  const std::string knob = "/sys/class/net/eth0/ecn/roce_rp/rpg_ai_rate";
  ASSERT_TRUE(root.write(knob, "17").ok());
  EXPECT_EQ(root.read(knob).value(), "17\n");
  const auto created = root.write("/sys/class/net/eth0/ecn/roce_rp/no_such_knob", "1");
  ASSERT_FALSE(created.ok());
  EXPECT_EQ(created.error().err, ENOENT);
  EXPECT_FALSE(root.exists("/sys/class/net/eth0/ecn/roce_rp/no_such_knob"));
}

TEST(NicCcSysfsRoot, WriteFilterModelsADeviceThatQuantizesOrRejects) {
  WritableFixture fx("procfs");
  SysfsRoot root(fx.path());
  root.set_write_filter_for_test(
      [](std::string_view path, std::string_view value) -> std::optional<std::string> {
        if (path.ends_with("rpg_min_rate")) return std::nullopt;
        return std::string(value) + "0";
      });
  ASSERT_TRUE(root.write("/sys/class/net/eth0/ecn/roce_rp/rpg_ai_rate", "7").ok());
  EXPECT_EQ(root.read_u64("/sys/class/net/eth0/ecn/roce_rp/rpg_ai_rate").value(), 70u);
  const auto rejected = root.write("/sys/class/net/eth0/ecn/roce_rp/rpg_min_rate", "2");
  ASSERT_FALSE(rejected.ok());
  EXPECT_EQ(rejected.error().err, EINVAL);
  EXPECT_EQ(root.read_u64("/sys/class/net/eth0/ecn/roce_rp/rpg_min_rate").value(), 1u);
}

}  // namespace
}  // namespace rdmad::nic_cc
