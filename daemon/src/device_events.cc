#include "rdmad/daemon/device_events.h"

#include "rdmad/daemon/logging.h"
#include "rdmad/verbs/rdma_core/address_watcher.h"

namespace rdmad::daemon {

const char* to_string(verbs::DeviceEvent::Kind k) {
  using K = verbs::DeviceEvent::Kind;
  switch (k) {
    case K::kPortActive: return "port_active";
    case K::kPortDown: return "port_down";
    case K::kPortChanged: return "port_changed";
    case K::kQpFatal: return "qp_fatal";
    case K::kCqError: return "cq_error";
    case K::kDeviceFatal: return "device_fatal";
    case K::kOther: return "other";
  }
  return "other";
}

DeviceEventMonitor::DeviceEventMonitor(boost::asio::io_context& io, const NicInventory& nics) : io_(io), nics_(nics) {}

DeviceEventMonitor::~DeviceEventMonitor() {
  // The devices own their descriptors: stop watching without closing them.
  for (auto& w : watches_) {
    boost::system::error_code ec;
    w.fd->cancel(ec);
    (void)w.fd->release();
  }
  if (address_fd_) {
    boost::system::error_code ec;
    address_fd_->cancel(ec);
    (void)address_fd_->release();
  }
}

void DeviceEventMonitor::start() {
  bool hardware = false;
  for (const Nic& nic : nics_.nics()) {
    hardware |= nic.config.backend == "rdma_core";
    const int fd = nic.device->event_fd();
    if (fd < 0) continue;
    watches_.push_back({&nic, std::make_unique<boost::asio::posix::stream_descriptor>(io_, fd)});
    arm(watches_.size() - 1);
  }
  if (!hardware) return;
  auto w = verbs::rdma_core::AddressWatcher::open();
  if (!w) {
    log::get("verbs")->warn("cannot watch address changes ({}); RoCEv2 GIDs are re-read only when QPs connect",
                            w.error().message());
    return;
  }
  addresses_ = std::make_unique<verbs::rdma_core::AddressWatcher>(std::move(w.value()));
  address_fd_ = std::make_unique<boost::asio::posix::stream_descriptor>(io_, addresses_->fd());
  arm_addresses();
}

void DeviceEventMonitor::arm(size_t i) {
  watches_[i].fd->async_wait(boost::asio::posix::stream_descriptor::wait_read,
                             [this, i](const boost::system::error_code& ec) {
                               if (ec) return;
                               const Nic& nic = *watches_[i].nic;
                               for (const auto& e : nic.device->read_events()) handle(nic, e);
                               arm(i);
                             });
}

void DeviceEventMonitor::handle(const Nic& nic, const verbs::DeviceEvent& e) {
  using K = verbs::DeviceEvent::Kind;
  auto log = log::get("verbs");
  ++counts_[nic.config.name + "/" + to_string(e.kind)];
  if (port_sink_ && (e.kind == verbs::DeviceEvent::Kind::kPortActive || e.kind == verbs::DeviceEvent::Kind::kPortDown)) {
    const size_t index = static_cast<size_t>(&nic - nics_.nics().data());
    port_sink_(index, e.kind == verbs::DeviceEvent::Kind::kPortActive);
  }
  switch (e.kind) {
    case K::kPortActive: log->info("nic {}: port {} is ACTIVE ({})", nic.config.name, e.port, e.text); break;
    case K::kPortDown: log->warn("nic {}: port {} went DOWN ({})", nic.config.name, e.port, e.text); break;
    case K::kPortChanged: {
      const auto p = nic.device->query_port(e.port == 0 ? 1 : e.port);
      log->info("nic {}: port {} changed ({}); gid now {}", nic.config.name, e.port, e.text,
                p.is_ok() ? p.value().gid.to_ip_string() : p.status().message());
      break;
    }
    case K::kQpFatal: log->warn("nic {}: qp 0x{:x} failed ({})", nic.config.name, e.qp_num, e.text); break;
    case K::kCqError: log->warn("nic {}: completion queue error ({})", nic.config.name, e.text); break;
    case K::kDeviceFatal:
      log->error("nic {}: device lost ({}); its queue pairs and registrations are gone", nic.config.name, e.text);
      break;
    case K::kOther: log->debug("nic {}: event {}", nic.config.name, e.text); break;
  }
}

void DeviceEventMonitor::arm_addresses() {
  address_fd_->async_wait(boost::asio::posix::stream_descriptor::wait_read, [this](const boost::system::error_code& ec) {
    if (ec) return;
    if (addresses_->drain().any()) {
      for (const Nic& nic : nics_.nics()) {
        if (nic.config.backend != "rdma_core") continue;
        const auto p = nic.device->query_port(static_cast<uint8_t>(nic.config.port));
        log::get("verbs")->info("nic {}: addresses changed; RoCEv2 gid now {}", nic.config.name,
                                p.is_ok() ? p.value().gid.to_ip_string() : p.status().message());
      }
    }
    arm_addresses();
  });
}

std::map<std::string, uint64_t> DeviceEventMonitor::counts() const { return counts_; }

}  // namespace rdmad::daemon
