// What each [[nic]] is opened with (device_config_for). The slots themselves: nic_slots_test.cc.
#include "rdmad/daemon/nics/nic_inventory.h"

#include <gtest/gtest.h>

#include "support/doubles/nic_backends.h"

namespace rdmad::daemon {
namespace {

using Backend = test::NicBackends;
using test::rdma_nic;

TEST(NicInventory, EachNicIsOpenedWithItsDscpSlCnpDscpAndAddress) {
  config::Config cfg;
  cfg.cc.params.cnp_dscp = 48;
  config::NicSection n = rdma_nic("rail0", "mlx5_0");
  n.address = "10.1.0.7";
  n.gid_match = "10.1.0.0/16";
  n.dscp = 46;
  n.sl = 3;
  n.cnp_dscp = 40;
  Backend b;
  const verbs::BackendInfo* hw = b.registry.find("rdma_core");
  verbs::DeviceConfig dc = device_config_for(n, cfg, hw);
  EXPECT_EQ(dc.name, "mlx5_0");
  EXPECT_EQ(dc.dscp, 46);
  EXPECT_EQ(dc.sl, 3);
  EXPECT_EQ(dc.dcqcn.cnp_dscp, 40);
  EXPECT_EQ(dc.gid_cidr, "10.1.0.7/32") << "the address names exactly its GID";
  EXPECT_FALSE(dc.gid_ipv6);
  n.address = "fd00::7";
  n.gid_match.clear();
  n.cnp_dscp = -1;
  dc = device_config_for(n, cfg, hw);
  EXPECT_EQ(dc.gid_cidr, "fd00::7/128");
  EXPECT_TRUE(dc.gid_ipv6);
  EXPECT_EQ(dc.dcqcn.cnp_dscp, 48) << "-1 takes [cc] cnp_dscp";
  n.address.clear();
  n.gid_match = "10.2.0.0/16";
  EXPECT_EQ(device_config_for(n, cfg, hw).gid_cidr, "10.2.0.0/16");
  // A soft NIC's address is its own (not a GID rule); its CNPs carry the NIC's cnp_dscp too.
  config::NicSection s;
  s.name = "soft0";
  s.backend = "soft";
  s.address = "127.0.0.2";
  s.cnp_dscp = 10;
  dc = device_config_for(s, cfg, b.registry.find("soft"));
  EXPECT_EQ(dc.name, "soft0");
  EXPECT_EQ(dc.address, "127.0.0.2");
  EXPECT_TRUE(dc.gid_cidr.empty());
  EXPECT_EQ(dc.dcqcn.cnp_dscp, 10);
}

}  // namespace
}  // namespace rdmad::daemon
