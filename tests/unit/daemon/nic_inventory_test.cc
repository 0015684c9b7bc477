// NicInventory: every [[nic]] keeps its slot (its index) whether it opened or not; a hardware NIC
// that failed to open is out of service with the reason and opened again on a later poll, with
// back-off; a soft NIC that cannot open is a start-up error. And what each [[nic]] is opened with.
#include "rdmad/daemon/nics/nic_inventory.h"

#include <gtest/gtest.h>

#include <set>

#include "rdmad/base/log.h"
#include "stub_device.h"

namespace rdmad::daemon {
namespace {

using namespace std::chrono_literals;

// What the daemon's handling of a hardware NIC rests on (as the rdma_core backend advertises).
verbs::Capabilities hardware_caps() {
  verbs::Capabilities c;
  c.registration_faults_in_pages = true;
  c.sysfs_ports = true;
  c.opens_named_device = true;
  c.address_selects_gid = true;
  c.retries_failed_open = true;
  return c;
}

// `hardware` here: a backend whose devices open only once `present` names them.
struct Backend {
  std::set<std::string> present;
  std::vector<std::string> opened;  // every attempt, by device name
  std::vector<verbs::DeviceConfig> configs;
  verbs::BackendRegistry registry;
  explicit Backend(const std::string& hardware = "rdma_core") {
    registry.add({hardware, hardware_caps(), [this](const verbs::DeviceConfig& c) -> verbs::Result<std::unique_ptr<verbs::Device>> {
                    opened.push_back(c.name);
                    configs.push_back(c);
                    if (!present.count(c.name)) return verbs::Status::error("no RDMA device named '" + c.name + "'");
                    return std::unique_ptr<verbs::Device>(new StubDevice(c.name));
                  },
                  [] { return std::vector<std::string>{}; }, nullptr, nullptr});
    verbs::Capabilities soft;
    soft.needs_address = true;
    soft.software_cc = true;
    registry.add({"soft", soft, [](const verbs::DeviceConfig&) -> verbs::Result<std::unique_ptr<verbs::Device>> {
                    return verbs::Status::error("address not local");
                  },
                  [] { return std::vector<std::string>{}; }, nullptr, nullptr});
  }
};

config::NicSection rdma_nic(const std::string& name, const std::string& device) {
  config::NicSection n;
  n.name = name;
  n.backend = "rdma_core";
  n.device = device;
  return n;
}

TEST(NicInventory, ANicThatFailedToOpenKeepsItsSlotAndIsRetriedWithBackoff) {
  log::setup(spdlog::level::off);
  Backend b;
  b.present = {"mlx5_1"};
  config::Config cfg;
  cfg.nics = {rdma_nic("rail0", "mlx5_0"), rdma_nic("rail1", "mlx5_1")};
  NicInventory nics(b.registry);
  std::string error;
  ASSERT_TRUE(nics.open(cfg, error)) << error;
  ASSERT_EQ(nics.nics().size(), 2u) << "the missing NIC keeps its slot";
  EXPECT_FALSE(nics.nics()[0].in_service());
  EXPECT_EQ(nics.nics()[0].out_of_service, "no RDMA device named 'mlx5_0'");
  EXPECT_TRUE(nics.nics()[1].in_service());
  EXPECT_EQ(nics.nics()[1].config.name, "rail1") << "rail1 is NIC 1, not NIC 0";
  EXPECT_NE(nics.diagnosis().find("warn nic rail0: out of service (device mlx5_0): no RDMA device named"),
            std::string::npos)
      << nics.diagnosis();

  // The next poll retries at once, then the delays double: 1 s, 2 s, 4 s, ...
  auto t = NicInventory::Clock::now();
  b.opened.clear();
  EXPECT_TRUE(nics.retry(t).empty());
  EXPECT_EQ(b.opened.size(), 1u) << "retried on the next poll";
  EXPECT_TRUE(nics.retry(t + 999ms).empty());
  EXPECT_EQ(b.opened.size(), 1u) << "not before its back-off";
  EXPECT_TRUE(nics.retry(t + 1000ms).empty());
  EXPECT_EQ(b.opened.size(), 2u);
  t += 1000ms;
  EXPECT_TRUE(nics.retry(t + 1999ms).empty());
  EXPECT_EQ(b.opened.size(), 2u);
  EXPECT_TRUE(nics.retry(t + 2000ms).empty());
  EXPECT_EQ(b.opened.size(), 3u);
  EXPECT_EQ(b.opened.back(), "mlx5_0") << "only the NIC out of service is retried";
  t += 2000ms;

  // The driver came: it opens in its own slot.
  b.present.insert("mlx5_0");
  const auto opened = nics.retry(t + 4000ms);
  ASSERT_EQ(opened, std::vector<size_t>{0});
  EXPECT_TRUE(nics.nics()[0].in_service());
  EXPECT_EQ(nics.nics()[0].device->info().name, "mlx5_0");
  EXPECT_TRUE(nics.nics()[0].out_of_service.empty());
  EXPECT_TRUE(nics.diagnosis().empty());
  EXPECT_TRUE(nics.retry(t + 1h).empty()) << "nothing left to open";
}

TEST(NicInventory, BackoffStopsGrowingAtItsMaximum) {
  log::setup(spdlog::level::off);
  Backend b;
  config::Config cfg;
  cfg.nics = {rdma_nic("rail0", "mlx5_0")};
  NicInventory nics(b.registry);
  std::string error;
  ASSERT_TRUE(nics.open(cfg, error));
  auto t = NicInventory::Clock::now();
  for (int i = 0; i < 20; ++i) {
    nics.retry(t);
    t = nics.nics()[0].next_retry;
  }
  EXPECT_EQ(nics.nics()[0].retry_backoff, NicInventory::kRetryBackoffMax);
}

TEST(NicInventory, ASoftNicThatCannotOpenIsAStartupError) {
  log::setup(spdlog::level::off);
  Backend b;
  config::Config cfg;
  config::NicSection n;
  n.name = "soft0";
  n.backend = "soft";
  n.address = "192.0.2.1";
  cfg.nics = {n};
  NicInventory nics(b.registry);
  std::string error;
  EXPECT_FALSE(nics.open(cfg, error));
  EXPECT_EQ(error, "nic soft0: cannot open with backend soft: address not local");
}

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

// What a NIC's backend advertises decides how it is treated, not the backend's name: a hardware
// backend of another name is kept out of service and retried, opened by its device and port, and
// its address names a GID.
TEST(NicInventory, TreatmentFollowsTheBackendsCapabilitiesNotItsName) {
  log::setup(spdlog::level::off);
  Backend b("other_hw");
  config::Config cfg;
  config::NicSection n = rdma_nic("rail0", "mlx5_0");
  n.backend = "other_hw";
  n.port = 2;
  n.address = "10.1.0.7";
  cfg.nics = {n};
  NicInventory nics(b.registry);
  std::string error;
  ASSERT_TRUE(nics.open(cfg, error)) << error;
  ASSERT_EQ(nics.nics().size(), 1u);
  EXPECT_FALSE(nics.nics()[0].in_service()) << "out of service, not a start-up error";
  EXPECT_EQ(nics.nics()[0].port(), 2);
  EXPECT_EQ(nics.nics()[0].device_config.name, "mlx5_0");
  EXPECT_EQ(nics.nics()[0].device_config.gid_cidr, "10.1.0.7/32");
  b.present = {"mlx5_0"};
  EXPECT_EQ(nics.retry(NicInventory::Clock::now()), std::vector<size_t>{0});
}

}  // namespace
}  // namespace rdmad::daemon
