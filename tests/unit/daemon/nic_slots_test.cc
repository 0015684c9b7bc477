// NicSlots: every [[nic]] keeps its slot (its index) whether it opened or not; a hardware NIC
// that failed to open is out of service with the reason and opened again on a later poll, with
// back-off; a soft NIC that cannot open is a start-up error.
#include "rdmad/daemon/nics/nic_slots.h"

#include <gtest/gtest.h>

#include "rdmad/base/log.h"
#include "support/doubles/nic_backends.h"

namespace rdmad::daemon {
namespace {

using namespace std::chrono_literals;
using Backend = test::NicBackends;
using test::rdma_nic;

TEST(NicSlots, ANicThatFailedToOpenKeepsItsSlotAndIsRetriedWithBackoff) {
  log::setup(spdlog::level::off);
  Backend b;
  b.present = {"mlx5_1"};
  config::Config cfg;
  cfg.nics = {rdma_nic("rail0", "mlx5_0"), rdma_nic("rail1", "mlx5_1")};
  NicSlots nics(b.registry);
  const base::Status st = nics.open(cfg);
  ASSERT_TRUE(st.ok()) << st.message();
  ASSERT_EQ(nics.nics().size(), 2u) << "the missing NIC keeps its slot";
  EXPECT_FALSE(nics.nics()[0].in_service());
  EXPECT_EQ(nics.nics()[0].out_of_service, "no RDMA device named 'mlx5_0'");
  EXPECT_TRUE(nics.nics()[1].in_service());
  EXPECT_EQ(nics.nics()[1].config.name, "rail1") << "rail1 is NIC 1, not NIC 0";
  EXPECT_NE(nics.diagnosis().find("warn nic rail0: out of service (device mlx5_0): no RDMA device named"),
            std::string::npos)
      << nics.diagnosis();

  // The next poll retries at once, then the delays double: 1 s, 2 s, 4 s, ...
  auto t = NicSlots::Clock::now();
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

TEST(NicSlots, BackoffStopsGrowingAtItsMaximum) {
  log::setup(spdlog::level::off);
  Backend b;
  config::Config cfg;
  cfg.nics = {rdma_nic("rail0", "mlx5_0")};
  NicSlots nics(b.registry);
  ASSERT_TRUE(nics.open(cfg).ok());
  auto t = NicSlots::Clock::now();
  for (int i = 0; i < 20; ++i) {
    nics.retry(t);
    t = nics.nics()[0].next_retry;
  }
  EXPECT_EQ(nics.nics()[0].retry_backoff, NicSlots::kRetryBackoffMax);
}

TEST(NicSlots, ASoftNicThatCannotOpenIsAStartupError) {
  log::setup(spdlog::level::off);
  Backend b;
  config::Config cfg;
  config::NicSection n;
  n.name = "soft0";
  n.backend = "soft";
  n.address = "192.0.2.1";
  cfg.nics = {n};
  NicSlots nics(b.registry);
  const base::Status opened = nics.open(cfg);
  EXPECT_FALSE(opened.ok());
  EXPECT_EQ(opened.message(), "nic soft0: cannot open with backend soft: address not local");
}

// What a NIC's backend advertises decides how it is treated, not the backend's name: a hardware
// backend of another name is kept out of service and retried, opened by its device and port, and
// its address names a GID.
TEST(NicSlots, TreatmentFollowsTheBackendsCapabilitiesNotItsName) {
  log::setup(spdlog::level::off);
  Backend b("other_hw");
  config::Config cfg;
  config::NicSection n = rdma_nic("rail0", "mlx5_0");
  n.backend = "other_hw";
  n.port = 2;
  n.address = "10.1.0.7";
  cfg.nics = {n};
  NicSlots nics(b.registry);
  const base::Status opened = nics.open(cfg);
  ASSERT_TRUE(opened.ok()) << opened.message();
  ASSERT_EQ(nics.nics().size(), 1u);
  EXPECT_FALSE(nics.nics()[0].in_service()) << "out of service, not a start-up error";
  EXPECT_EQ(nics.nics()[0].port(), 2);
  EXPECT_EQ(nics.nics()[0].device_config.name, "mlx5_0");
  EXPECT_EQ(nics.nics()[0].device_config.backend_options.at("gid_cidr"), verbs::OptionValue{"10.1.0.7/32"});
  b.present = {"mlx5_0"};
  EXPECT_EQ(nics.retry(NicSlots::Clock::now()), std::vector<size_t>{0});
}

}  // namespace
}  // namespace rdmad::daemon
