// The embedded default (a configuration without [[nic]]): every discovered RDMA port, else one
// soft NIC.
#include "rdmad/daemon/nics/embedded_nics.h"

#include <gtest/gtest.h>

#include "rdmad/base/log.h"
#include "rdmad/daemon/nics/node_nics.h"
#include "support/doubles/nic_backends.h"
#include "support/temp_dir.h"

namespace rdmad::daemon {
namespace {

verbs::HostNic port(const std::string& device, unsigned p) {
  verbs::HostNic h;
  h.device = device;
  h.port = p;
  return h;
}

TEST(EmbeddedNics, EveryDiscoveredPortIsANicNamedAfterItsDevice) {
  test::NicBackends b;
  b.host_ports = {port("mlx5_0", 1), port("mlx5_1", 1), port("mlx5_1", 2)};
  config::Config cfg;
  auto e = embedded_nics(b.registry, cfg);
  ASSERT_TRUE(e.ok()) << e.status().message();
  ASSERT_EQ(e.value().nics.size(), 3u);
  EXPECT_EQ(e.value().nics[0].name, "mlx5_0");
  EXPECT_EQ(e.value().nics[0].backend, "rdma_core");
  EXPECT_EQ(e.value().nics[0].device, "mlx5_0");
  EXPECT_EQ(e.value().nics[2].name, "mlx5_1-2");
  EXPECT_EQ(e.value().nics[2].device, "mlx5_1");
  EXPECT_EQ(e.value().nics[2].port, 2);
  EXPECT_NE(e.value().why.find("mlx5_1 port 2"), std::string::npos) << e.value().why;
}

// Start-up scans the host once: the NICs open on the embedded default's discovery, not a second one.
TEST(EmbeddedNics, TheHostIsScannedOnceAtStart) {
  log::setup(spdlog::level::off);
  test::NicBackends b;
  b.host_ports = {port("mlx5_0", 1), port("mlx5_1", 1)};
  b.present = {"mlx5_0", "mlx5_1"};
  ::rdmad::test::TempDir sysfs;
  config::Config cfg;
  cfg.daemon.sysfs_root = sysfs.path();
  auto e = embedded_nics(b.registry, cfg);
  ASSERT_TRUE(e.ok()) << e.status().message();
  EXPECT_EQ(b.discoveries, 1);
  cfg.nics = e.value().nics;
  NodeNics nics(b.registry, cfg, e.value().discovered);
  ASSERT_TRUE(nics.open().ok());
  EXPECT_EQ(b.discoveries, 1) << "NodeNics scanned the host again";
  ASSERT_EQ(nics.slots().nics().size(), 2u);
  EXPECT_TRUE(nics.slots().nics()[1].in_service());
  ASSERT_NE(nics.host_port("mlx5_1", 1), nullptr) << "the ports of the first scan are the hardware view";
}

TEST(EmbeddedNics, WithoutRdmaDevicesOneSoftNicOnLoopbackWithAFreePort) {
  test::NicBackends b;
  config::Config cfg;
  auto e = embedded_nics(b.registry, cfg);
  ASSERT_TRUE(e.ok()) << e.status().message();
  ASSERT_EQ(e.value().nics.size(), 1u);
  const config::NicSection& n = e.value().nics[0];
  EXPECT_EQ(n.name, "soft0");
  EXPECT_EQ(n.backend, "soft");
  EXPECT_EQ(n.address, "127.0.0.1");
  EXPECT_EQ(n.udp_port, 0) << "several daemons on one host must not collide on loopback";
  cfg.daemon.embedded_nic_address = "10.9.0.4";
  auto at = embedded_nics(b.registry, cfg);
  ASSERT_TRUE(at.ok());
  EXPECT_EQ(at.value().nics[0].address, "10.9.0.4");
  EXPECT_EQ(at.value().nics[0].udp_port, 4791) << "reachable by peers: the RoCEv2 port";
}

TEST(EmbeddedNics, PrimaryTakesANonLoopbackAddressOrSaysWhyNot) {
  test::NicBackends b;
  config::Config cfg;
  cfg.daemon.embedded_nic_address = "primary";
  auto e = embedded_nics(b.registry, cfg);
  const std::string primary = primary_ipv4_address();
  if (primary.empty()) {
    ASSERT_FALSE(e.ok());
    EXPECT_NE(e.status().message().find("embedded_nic_address"), std::string::npos) << e.status().message();
    return;
  }
  ASSERT_TRUE(e.ok()) << e.status().message();
  EXPECT_EQ(e.value().nics[0].address, primary);
  EXPECT_NE(primary.rfind("127.", 0), 0u) << "not loopback";
}

TEST(EmbeddedNics, NoSoftwareBackendIsAnError) {
  verbs::BackendRegistry empty;
  auto e = embedded_nics(empty, config::Config{});
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.status().message().find("no software backend"), std::string::npos) << e.status().message();
}

}  // namespace
}  // namespace rdmad::daemon
