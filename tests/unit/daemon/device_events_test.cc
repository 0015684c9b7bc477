// DeviceEventMonitor with a device whose events arrive on a real eventfd (this machine has no RDMA
// device to raise real ones; the rdma_core backend hands out its context's async fd the same way).
#include "rdmad/daemon/nics/device_events.h"

#include <sys/eventfd.h>
#include <unistd.h>

#include <chrono>
#include <deque>

#include <gtest/gtest.h>

#include "rdmad/base/log.h"

namespace rdmad::daemon {
namespace {

using namespace std::chrono_literals;

class EventDevice final : public verbs::Device {
 public:
  EventDevice() : fd_(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) { info_.name = "ev0"; info_.backend = "events"; }
  ~EventDevice() override { close(fd_); }
  const verbs::DeviceInfo& info() const override { return info_; }
  verbs::Result<verbs::PortInfo> query_port(uint8_t p) const override {
    verbs::PortInfo pi;
    pi.port_num = p;
    pi.gid = gid;
    return pi;
  }
  verbs::Result<std::unique_ptr<verbs::ProtectionDomain>> alloc_pd() override {
    return verbs::Status::not_supported("no PD");
  }
  verbs::Result<std::unique_ptr<verbs::CompletionQueue>> create_cq(uint32_t) override {
    return verbs::Status::not_supported("no CQ");
  }
  verbs::NicCounters counters() const override { return {}; }
  int event_fd() const override { return fd_; }
  std::vector<verbs::DeviceEvent> read_events() override {
    uint64_t n = 0;
    if (read(fd_, &n, sizeof n) != sizeof n) return {};
    std::vector<verbs::DeviceEvent> out(pending_.begin(), pending_.end());
    pending_.clear();
    ++reads;
    return out;
  }
  void raise(verbs::DeviceEvent e) {
    pending_.push_back(std::move(e));
    const uint64_t one = 1;
    ASSERT_EQ(write(fd_, &one, sizeof one), static_cast<ssize_t>(sizeof one));
  }
  int reads = 0;
  verbs::Gid gid = *verbs::Gid::from_ip("10.0.0.7");  // what query_port reports (the source GID)

 private:
  int fd_;
  verbs::DeviceInfo info_;
  std::deque<verbs::DeviceEvent> pending_;
};

// Registers backend `name`, whose devices are EventDevices; *last is the one opened last.
void add_event_backend(verbs::BackendRegistry& registry, const std::string& name, EventDevice** last,
                       verbs::Capabilities caps = {}) {
  registry.add({name, caps, {}, [last](const verbs::DeviceConfig&) -> verbs::Result<std::unique_ptr<verbs::Device>> {
                  auto d = std::make_unique<EventDevice>();
                  if (last != nullptr) *last = d.get();
                  return std::unique_ptr<verbs::Device>(std::move(d));
                },
                [] { return std::vector<std::string>{}; }, nullptr, nullptr});
}

TEST(DeviceEventMonitor, EventsAreReadFromTheDescriptorAndCountedOnce) {
  log::setup(spdlog::level::off);
  EventDevice* dev = nullptr;
  verbs::BackendRegistry registry;
  add_event_backend(registry, "events", &dev);
  config::Config cfg;
  cfg.nics.push_back({});
  cfg.nics[0].name = "rail0";
  cfg.nics[0].backend = "events";
  NicSlots nics(registry);
  const base::Status opened = nics.open(cfg);
  ASSERT_TRUE(opened.ok()) << opened.message();
  ASSERT_NE(dev, nullptr);

  boost::asio::io_context io;
  {
    DeviceEventMonitor monitor(io, nics);
    monitor.start();
    dev->raise({verbs::DeviceEvent::Kind::kPortDown, 1, 0, "port error"});
    dev->raise({verbs::DeviceEvent::Kind::kQpFatal, 0, 0x12, "qp fatal"});
    const auto deadline = std::chrono::steady_clock::now() + 5s;
    while (monitor.counts().size() < 2 && std::chrono::steady_clock::now() < deadline) io.run_for(10ms);
    const auto c = monitor.counts();
    EXPECT_EQ(c.at("rail0/port_down"), 1u);
    EXPECT_EQ(c.at("rail0/qp_fatal"), 1u);
    dev->raise({verbs::DeviceEvent::Kind::kPortActive, 1, 0, "port active"});
    while (monitor.counts().size() < 3 && std::chrono::steady_clock::now() < deadline) io.run_for(10ms);
    EXPECT_EQ(monitor.counts().at("rail0/port_active"), 1u);
  }
  // The monitor released the device's descriptor without closing it.
  const uint64_t one = 1;
  EXPECT_EQ(write(dev->event_fd(), &one, sizeof one), static_cast<ssize_t>(sizeof one));
}

// What the monitor hands to the flows: a port down or up of the NIC's own port (not of the device's
// other ports), the QP a fatal event names, and a source GID that changed (re-read on a port change;
// one that did not change is not handed on).
TEST(DeviceEventMonitor, PortQpAndGidChangesReachTheSinksWithTheNicIndex) {
  log::setup(spdlog::level::off);
  EventDevice* dev = nullptr;
  verbs::BackendRegistry registry;
  // A backend whose address selects the GID (as rdma_core's): the monitor re-reads only such GIDs.
  verbs::Capabilities hardware;
  hardware.opens_named_device = true;
  hardware.address_selects_gid = true;
  add_event_backend(registry, "hardware", &dev, hardware);
  add_event_backend(registry, "soft", nullptr);
  config::Config cfg;
  cfg.nics.resize(2);
  cfg.nics[0].name = "soft0";
  cfg.nics[0].backend = "soft";
  cfg.nics[1].name = "rail1";
  cfg.nics[1].backend = "hardware";
  cfg.nics[1].device = "ev0";
  cfg.nics[1].port = 1;
  NicSlots nics(registry);
  const base::Status opened = nics.open(cfg);
  ASSERT_TRUE(opened.ok()) << opened.message();
  ASSERT_NE(dev, nullptr);

  boost::asio::io_context io;
  DeviceEventMonitor monitor(io, nics);
  std::vector<std::pair<size_t, bool>> ports;
  std::vector<std::pair<size_t, uint32_t>> qps;
  std::vector<size_t> gids;
  monitor.set_port_sink([&](size_t nic, bool up) { ports.emplace_back(nic, up); });
  monitor.set_qp_sink([&](size_t nic, uint32_t qpn) { qps.emplace_back(nic, qpn); });
  monitor.set_gid_sink([&](size_t nic) { gids.push_back(nic); });
  monitor.start();
  const auto deadline = std::chrono::steady_clock::now() + 5s;
  const auto run_until = [&](const std::string& key, uint64_t n) {
    while (std::chrono::steady_clock::now() < deadline) {
      const auto c = monitor.counts();
      if (auto it = c.find(key); it != c.end() && it->second >= n) return true;
      io.run_for(10ms);
    }
    return false;
  };
  dev->raise({verbs::DeviceEvent::Kind::kPortDown, 2, 0, "port error"});  // another port of the device
  dev->raise({verbs::DeviceEvent::Kind::kPortDown, 1, 0, "port error"});
  ASSERT_TRUE(run_until("rail1/port_down", 2));
  EXPECT_EQ(ports, (std::vector<std::pair<size_t, bool>>{{1, false}}));
  dev->raise({verbs::DeviceEvent::Kind::kQpFatal, 0, 0x12, "qp fatal"});
  ASSERT_TRUE(run_until("rail1/qp_fatal", 1));
  EXPECT_EQ(qps, (std::vector<std::pair<size_t, uint32_t>>{{1, 0x12}}));

  dev->raise({verbs::DeviceEvent::Kind::kPortChanged, 1, 0, "GID table change"});  // the same GID
  ASSERT_TRUE(run_until("rail1/port_changed", 1));
  EXPECT_TRUE(gids.empty());
  dev->gid = *verbs::Gid::from_ip("10.0.0.8");
  dev->raise({verbs::DeviceEvent::Kind::kPortChanged, 1, 0, "GID table change"});
  ASSERT_TRUE(run_until("rail1/gid_changed", 1));
  EXPECT_EQ(gids, std::vector<size_t>{1});
  dev->raise({verbs::DeviceEvent::Kind::kPortActive, 1, 0, "port active"});
  ASSERT_TRUE(run_until("rail1/port_active", 1));
  EXPECT_EQ(ports.back(), (std::pair<size_t, bool>{1, true}));
  EXPECT_EQ(gids.size(), 1u) << "the GID did not change again";
  EXPECT_EQ(monitor.counts().at("rail1/gid_changed"), 1u);
}

}  // namespace
}  // namespace rdmad::daemon
