#include "rdmad/nic_cc/port_counters.h"

#include <gtest/gtest.h>

#include "unit/nic_cc/sysfs_fixture.h"

namespace rdmad::nic_cc {
namespace {

using rdmad::testing::sysfs_fixture;

struct Expected {
  const char* device;
  unsigned port;
  uint64_t rcv_bytes, xmit_bytes, rcv_packets, xmit_packets;
};

// Byte values from procfs's own test (words × 4).
TEST(NicCcPortCounters, DataCountersAreFourByteWords) {
  const SysfsRoot root(sysfs_fixture("procfs"));
  const Expected cases[] = {
      {"hfi1_0", 1, 1380366808104ULL, 1094233306172ULL, 638036947, 568318856},
      {"mlx4_0", 1, 8884894436ULL, 106036453180ULL, 87169372, 85734114},
      {"mlx4_0", 2, 9841747136ULL, 106161427560ULL, 89332064, 88622850},
      {"mlx5_0", 1, 72505381512ULL, 11523046035392ULL, 541889824, 10907922116ULL},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(std::string(c.device) + "/" + std::to_string(c.port));
    const auto pc = read_port_counters(root, c.device, c.port);
    ASSERT_TRUE(pc.ok()) << pc.error().message();
    EXPECT_EQ(pc->rcv_bytes, c.rcv_bytes);
    EXPECT_EQ(pc->xmit_bytes, c.xmit_bytes);
    EXPECT_EQ(pc->rcv_packets, c.rcv_packets);
    EXPECT_EQ(pc->xmit_packets, c.xmit_packets);
  }
}

TEST(NicCcPortCounters, KeepsEveryRawCounter) {
  const SysfsRoot root(sysfs_fixture("procfs"));
  const auto hfi = read_port_counters(root, "hfi1_0", 1);
  ASSERT_TRUE(hfi.ok());
  EXPECT_EQ(hfi->raw.size(), 17u);
  const auto mlx5 = read_port_counters(root, "mlx5_0", 1);
  ASSERT_TRUE(mlx5.ok());
  EXPECT_EQ(mlx5->raw.size(), 21u);
  EXPECT_EQ(mlx5->get("port_xmit_data"), 2880761508848ULL);  // raw stays in words
  EXPECT_EQ(mlx5->get("unicast_xmit_packets"), 10907922116ULL);
  EXPECT_EQ(read_port_counters(root, "mlx4_0", 1)->get("port_xmit_wait"), 3599u);
  EXPECT_FALSE(read_port_counters(root, "mlx4_0", 3).ok());
}

TEST(NicCcHwCounters, SkipsLifespanWhichIsASetting) {
  const SysfsRoot root(sysfs_fixture("procfs"));
  const auto hw = read_hw_counters(root, "mlx5_0", 1);
  ASSERT_TRUE(hw.ok()) << hw.error().message();
  EXPECT_EQ(hw->values.size(), 24u);
  EXPECT_FALSE(hw->get("lifespan"));
  EXPECT_EQ(hw->get("rx_read_requests"), 175528982u);
  EXPECT_EQ(hw->get("resp_cqe_error"), 8109u);
  const auto dc = dcqcn_counters(*hw);
  EXPECT_EQ(dc.local_ack_timeout_err, 131u);
  EXPECT_EQ(dc.out_of_sequence, 1u);
  EXPECT_EQ(dc.packet_seq_err, 1u);
  EXPECT_FALSE(dc.rp_cnp_ignored);  // this fixture has no DCQCN counters
  EXPECT_FALSE(dc.np_cnp_sent);
}

TEST(NicCcHwCounters, MissingDirectoryIsAnError) {
  const SysfsRoot root(sysfs_fixture("procfs"));
  const auto hw = read_hw_counters(root, "hfi1_0", 1);
  ASSERT_FALSE(hw.ok());
  EXPECT_EQ(hw.error().err, ENOENT);
}

TEST(NicCcHwCounters, ReadsDcqcnCountersOfARoceHost) {
  const SysfsRoot root(sysfs_fixture("roce-cx6dx"));
  const auto hw = read_hw_counters(root, "mlx5_0", 1);
  ASSERT_TRUE(hw.ok());
  const auto dc = dcqcn_counters(*hw);
  EXPECT_EQ(dc.np_cnp_sent, 120554u);
  EXPECT_EQ(dc.np_ecn_marked_roce_packets, 120990u);
  EXPECT_EQ(dc.rp_cnp_handled, 98812u);
  EXPECT_EQ(dc.rp_cnp_ignored, 0u);
  const auto pc = read_port_counters(root, "mlx5_0", 1);
  ASSERT_TRUE(pc.ok());
  EXPECT_EQ(pc->xmit_bytes, 3530287420123ULL * 4);
}

}  // namespace
}  // namespace rdmad::nic_cc
