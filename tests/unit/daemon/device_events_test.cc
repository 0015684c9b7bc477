// DeviceEventMonitor with a device whose events arrive on a real eventfd (this machine has no RDMA
// device to raise real ones; the rdma_core backend hands out its context's async fd the same way).
#include "rdmad/daemon/device_events.h"

#include <sys/eventfd.h>
#include <unistd.h>

#include <chrono>
#include <deque>

#include <gtest/gtest.h>

#include "rdmad/daemon/logging.h"

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
    pi.gid = *verbs::Gid::from_ip("10.0.0.7");
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

 private:
  int fd_;
  verbs::DeviceInfo info_;
  std::deque<verbs::DeviceEvent> pending_;
};

TEST(DeviceEventMonitor, EventsAreReadFromTheDescriptorAndCountedOnce) {
  log::setup(spdlog::level::off);
  EventDevice* dev = nullptr;
  verbs::BackendRegistry registry;
  registry.add({"events", {}, [&dev](const verbs::DeviceConfig&) -> verbs::Result<std::unique_ptr<verbs::Device>> {
                  auto d = std::make_unique<EventDevice>();
                  dev = d.get();
                  return std::unique_ptr<verbs::Device>(std::move(d));
                },
                [] { return std::vector<std::string>{}; }});
  config::Config cfg;
  cfg.nics.push_back({});
  cfg.nics[0].name = "rail0";
  cfg.nics[0].backend = "events";
  NicInventory nics(registry);
  std::string error;
  ASSERT_TRUE(nics.open(cfg, error)) << error;
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

}  // namespace
}  // namespace rdmad::daemon
