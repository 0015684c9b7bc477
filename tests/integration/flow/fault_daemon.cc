// rdmad with one difference, for the tests of what the daemon does on an asynchronous QP fatal
// event, which neither the soft backend nor rxe raises on demand: its "soft" backend opens soft
// devices behind a wrapper with async events (Device::event_fd/read_events, as the rdma_core
// backend has them). On SIGUSR1 the wrapper of the device named by $RDMAD_FAULT_DEVICE raises one
// DeviceEvent::kQpFatal for every queue pair created on it, as a NIC does for a QP it lost (the
// event alone: the QP is not moved to ERR, as when a NIC can no longer report its completions).
// Everything else is rdmad's: the same configuration file, subsystems and event monitor.
//
//   RDMAD_FAULT_DEVICE=<soft nic name> rdmad_fault_daemon --config FILE
#include <pthread.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "rdmad/config/loader.h"
#include "rdmad/daemon/daemon.h"
#include "rdmad/base/log.h"
#include "rdmad/verbs/device.h"
#include "rdmad/verbs/registry.h"

namespace {

using namespace rdmad;

// What a device and its protection domains share: the QPNs created, the events not yet read.
struct FaultState {
  std::mutex mu;
  std::vector<uint32_t> qps;
  std::vector<verbs::DeviceEvent> pending;
  int efd = -1;
};

class FaultPd final : public verbs::ProtectionDomain {
 public:
  FaultPd(std::unique_ptr<verbs::ProtectionDomain> inner, std::shared_ptr<FaultState> state)
      : inner_(std::move(inner)), state_(std::move(state)) {}
  verbs::Result<std::unique_ptr<verbs::MemoryRegion>> reg_mr(void* addr, size_t length, uint32_t access) override {
    return inner_->reg_mr(addr, length, access);
  }
  verbs::Result<std::unique_ptr<verbs::MemoryRegion>> reg_dmabuf_mr(int fd, uint64_t offset, size_t length,
                                                                    uint64_t iova, uint32_t access) override {
    return inner_->reg_dmabuf_mr(fd, offset, length, iova, access);
  }
  verbs::Result<std::unique_ptr<verbs::QueuePair>> create_qp(const verbs::QpInitAttr& attr) override {
    auto qp = inner_->create_qp(attr);
    if (qp.ok()) {
      std::lock_guard<std::mutex> lock(state_->mu);
      state_->qps.push_back(qp.value()->qp_num());
    }
    return qp;
  }

 private:
  std::unique_ptr<verbs::ProtectionDomain> inner_;
  std::shared_ptr<FaultState> state_;
};

class FaultDevice;
std::mutex g_devices_mu;
std::vector<FaultDevice*> g_devices;

class FaultDevice final : public verbs::Device {
 public:
  explicit FaultDevice(std::unique_ptr<verbs::Device> inner)
      : inner_(std::move(inner)), state_(std::make_shared<FaultState>()) {
    state_->efd = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    std::lock_guard<std::mutex> lock(g_devices_mu);
    g_devices.push_back(this);
  }
  ~FaultDevice() override {
    {
      std::lock_guard<std::mutex> lock(g_devices_mu);
      g_devices.erase(std::remove(g_devices.begin(), g_devices.end(), this), g_devices.end());
    }
    ::close(state_->efd);
  }

  const verbs::DeviceInfo& info() const override { return inner_->info(); }
  verbs::Result<verbs::PortInfo> query_port(uint8_t port_num) const override { return inner_->query_port(port_num); }
  verbs::Result<std::unique_ptr<verbs::ProtectionDomain>> alloc_pd() override {
    auto pd = inner_->alloc_pd();
    if (!pd.ok()) return pd.status();
    return std::unique_ptr<verbs::ProtectionDomain>(std::make_unique<FaultPd>(std::move(pd.value()), state_));
  }
  verbs::Result<std::unique_ptr<verbs::CompletionQueue>> create_cq(uint32_t depth) override {
    return inner_->create_cq(depth);
  }
  verbs::NicCounters counters() const override { return inner_->counters(); }
  std::vector<verbs::DcqcnSample> dcqcn_samples() const override { return inner_->dcqcn_samples(); }
  int event_fd() const override { return state_->efd; }
  std::vector<verbs::DeviceEvent> read_events() override {
    uint64_t n = 0;
    (void)!::read(state_->efd, &n, sizeof n);
    std::lock_guard<std::mutex> lock(state_->mu);
    std::vector<verbs::DeviceEvent> out;
    out.swap(state_->pending);
    return out;
  }
  std::optional<cc::DcqcnParams> dcqcn_params() const override { return inner_->dcqcn_params(); }
  verbs::Status set_dcqcn_params(const cc::DcqcnParams& params) override { return inner_->set_dcqcn_params(params); }

  // One QP fatal event per QP created here (the daemon ignores those it no longer uses).
  void raise_qp_fatal() {
    {
      std::lock_guard<std::mutex> lock(state_->mu);
      for (uint32_t q : state_->qps) state_->pending.push_back({verbs::DeviceEvent::Kind::kQpFatal, 0, q, "injected"});
    }
    const uint64_t one = 1;
    (void)!::write(state_->efd, &one, sizeof one);
  }

 private:
  std::unique_ptr<verbs::Device> inner_;
  std::shared_ptr<FaultState> state_;
};

void raise_on(const std::string& name) {
  std::lock_guard<std::mutex> lock(g_devices_mu);
  for (FaultDevice* d : g_devices)
    if (d->info().name == name) d->raise_qp_fatal();
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3 || std::string(argv[1]) != "--config") {
    std::fprintf(stderr, "usage: RDMAD_FAULT_DEVICE=NIC rdmad_fault_daemon --config FILE\n");
    return 2;
  }
  const char* target = std::getenv("RDMAD_FAULT_DEVICE");
  // Blocked before the daemon starts its threads, so that only the waiter below takes SIGUSR1.
  sigset_t usr1;
  sigemptyset(&usr1);
  sigaddset(&usr1, SIGUSR1);
  pthread_sigmask(SIG_BLOCK, &usr1, nullptr);
  config::LoadResult loaded = config::load_file(argv[2]);
  if (!loaded.ok()) {
    for (const auto& e : loaded.errors) std::fprintf(stderr, "%s\n", e.to_string().c_str());
    return 1;
  }
  log::setup(*log::parse_level(loaded.config.daemon.log_level));
  std::thread([usr1, name = std::string(target ? target : "")] {
    int sig = 0;
    while (sigwait(&usr1, &sig) == 0) raise_on(name);
  }).detach();
  daemon::Daemon d(std::move(loaded.config), argv[2], [](verbs::BackendRegistry& registry) {
    verbs::BackendInfo wrapped = *registry.find("soft");
    wrapped.open = [open = wrapped.open](const verbs::DeviceConfig& c) -> verbs::Result<std::unique_ptr<verbs::Device>> {
      auto dev = open(c);
      if (!dev.ok()) return dev;
      return std::unique_ptr<verbs::Device>(std::make_unique<FaultDevice>(std::move(dev.value())));
    };
    registry.add(std::move(wrapped));
  });
  return d.run();
}
