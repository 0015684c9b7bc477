#include "rdmad/nic_cc/cc_port_status.h"

#include <gtest/gtest.h>

#include "unit/nic_cc/sysfs_fixture.h"

namespace rdmad::nic_cc {
namespace {

using rdmad::testing::sysfs_fixture;

TEST(NicCcPortStatus, VendorHostReportsParamsAndSwitches) {
  const auto st = inspect_cc(SysfsRoot(sysfs_fixture("roce-vendor-ecn")), "eth0", "0000:5e:00.0");
  ASSERT_TRUE(st.location);
  ASSERT_TRUE(st.readout);
  ASSERT_TRUE(st.enable);
  EXPECT_EQ(st.readout->params.rate_on_first_cnp_mbps, 10u);
  const auto s = st.summary();
  EXPECT_NE(s.find("vendor sysfs /sys/class/net/eth0/ecn"), std::string::npos) << s;
  EXPECT_NE(s.find("(19/19 knobs)"), std::string::npos) << s;
  EXPECT_NE(s.find("rp=11011010 np=11011011"), std::string::npos) << s;
}

TEST(NicCcPortStatus, UpstreamHostHasNoSwitches) {
  const auto st = inspect_cc(SysfsRoot(sysfs_fixture("roce-cx6dx")), "enp59s0f1np1", "0000:3b:00.1");
  ASSERT_TRUE(st.readout);
  EXPECT_FALSE(st.enable);
  EXPECT_EQ(st.readout->params.increase_timer_us, 55u);
  EXPECT_NE(st.summary().find("debugfs /sys/kernel/debug/mlx5/0000:3b:00.1/cc_params"), std::string::npos);
}

TEST(NicCcPortStatus, InfinibandHostHasNothingToManage) {
  const auto st = inspect_cc(SysfsRoot(sysfs_fixture("ib-hdr")), "", "0000:81:00.0");
  EXPECT_FALSE(st.location);
  EXPECT_NE(st.summary().find("not reachable"), std::string::npos);
}

}  // namespace
}  // namespace rdmad::nic_cc
