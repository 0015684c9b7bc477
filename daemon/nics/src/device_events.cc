#include "rdmad/daemon/nics/device_events.h"

#include "rdmad/base/log.h"
#include "rdmad/base/log_fields.h"

namespace rdmad::daemon {
namespace {

// The NIC's source GID follows the host's addresses (re-selected by the backend at every use).
bool gid_follows_addresses(const Nic& nic) { return nic.backend != nullptr && nic.backend->caps.address_selects_gid; }

}  // namespace

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

DeviceEventMonitor::DeviceEventMonitor(boost::asio::io_context& io, const NicSlots& nics) : io_(io), nics_(nics) {}

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
  const verbs::BackendInfo* watcher = nullptr;  // address changes are host-wide: one watch serves all
  const auto& nics = nics_.nics();
  for (size_t i = 0; i < nics.size(); ++i) {
    if (watcher == nullptr && gid_follows_addresses(nics[i]) && nics[i].backend->watch_addresses)
      watcher = nics[i].backend;
    if (nics[i].in_service()) watch(i);
  }
  if (watcher == nullptr) return;
  auto w = watcher->watch_addresses();
  if (!w.ok()) {
    log::get(log::Component::kVerbs)->warn("cannot watch address changes error={} gids=reread_at_connect",
                            base::q(w.status().message()));
    return;
  }
  addresses_ = std::move(w.value());
  address_fd_ = std::make_unique<boost::asio::posix::stream_descriptor>(io_, addresses_->fd());
  arm_addresses();
}

void DeviceEventMonitor::nic_opened(size_t nic_index) {
  if (nic_index < nics_.nics().size() && nics_.nics()[nic_index].in_service()) watch(nic_index);
}

void DeviceEventMonitor::watch(size_t i) {
  const Nic& nic = nics_.nics()[i];
  if (gid_follows_addresses(nic)) {
    const auto p = nic.device->query_port(nic.port());
    if (p.ok()) gids_[i] = p.value().gid;
  }
  const int fd = nic.device->event_fd();
  if (fd < 0) return;
  watches_.push_back({i, std::make_unique<boost::asio::posix::stream_descriptor>(io_, fd)});
  arm(watches_.size() - 1);
}

void DeviceEventMonitor::arm(size_t w) {
  watches_[w].fd->async_wait(boost::asio::posix::stream_descriptor::wait_read,
                             [this, w](const boost::system::error_code& ec) {
                               if (ec) return;
                               const size_t i = watches_[w].nic;
                               for (const auto& e : nics_.nics()[i].device->read_events()) handle(i, e);
                               arm(w);
                             });
}

void DeviceEventMonitor::handle(size_t index, const verbs::DeviceEvent& e) {
  using K = verbs::DeviceEvent::Kind;
  const Nic& nic = nics_.nics()[index];
  auto log = log::get(log::Component::kVerbs);
  ++counts_[nic.config.name + "/" + to_string(e.kind)];
  // Port events of the device's other ports are not this NIC's (an rdma_core NIC uses one port).
  const bool our_port = e.port == 0 || e.port == nic.port();
  switch (e.kind) {
    case K::kPortActive:
      log->info("port active nic={} port={} event={}", nic.config.name, e.port, base::q(e.text));
      if (our_port) check_gids("port active");
      if (our_port && port_sink_) port_sink_(index, true);
      break;
    case K::kPortDown:
      log->warn("port down nic={} port={} event={}", nic.config.name, e.port, base::q(e.text));
      if (our_port && port_sink_) port_sink_(index, false);
      break;
    case K::kPortChanged:
      log->info("port changed nic={} port={} event={}", nic.config.name, e.port, base::q(e.text));
      if (our_port) check_gids(e.text.c_str());
      break;
    case K::kQpFatal:
      log->warn("qp failed nic={} qpn=0x{:x} event={}", nic.config.name, e.qp_num, base::q(e.text));
      if (qp_sink_ && e.qp_num != 0) qp_sink_(index, e.qp_num);
      break;
    case K::kCqError: log->warn("completion queue error nic={} event={}", nic.config.name, base::q(e.text)); break;
    case K::kDeviceFatal:
      log->error("device lost nic={} event={} lost=qps,registrations", nic.config.name, base::q(e.text));
      break;
    case K::kOther:
      if (e.qp_num != 0) {
        log->info("qp event nic={} qpn=0x{:x} event={}", nic.config.name, e.qp_num, base::q(e.text));
      } else {
        log->debug("device event nic={} event={}", nic.config.name, base::q(e.text));
      }
      break;
  }
}

void DeviceEventMonitor::check_gids(const char* why) {
  const auto& nics = nics_.nics();
  for (size_t i = 0; i < nics.size(); ++i) {
    const Nic& nic = nics[i];
    if (!gid_follows_addresses(nic) || !nic.in_service()) continue;
    const auto p = nic.device->query_port(nic.port());
    if (!p.ok()) continue;
    const verbs::Gid now = p.value().gid;
    auto it = gids_.find(i);
    if (it != gids_.end() && it->second == now) continue;
    const std::string before = it == gids_.end() ? std::string("none") : it->second.to_ip_string();
    gids_[i] = now;
    ++counts_[nic.config.name + "/gid_changed"];
    // The kernel updates GID tables after the address change it announces (ib_core's work queue),
    // so the same change may be seen here twice: once by rtnetlink, once by IBV_EVENT_GID_CHANGE.
    log::get(log::Component::kVerbs)->info("source gid changed nic={} from={} to={} cause={}", nic.config.name, before,
                            now == verbs::Gid{} ? std::string("none") : now.to_ip_string(), base::q(why));
    if (gid_sink_) gid_sink_(i);
  }
}

void DeviceEventMonitor::arm_addresses() {
  address_fd_->async_wait(boost::asio::posix::stream_descriptor::wait_read, [this](const boost::system::error_code& ec) {
    if (ec) return;
    if (addresses_->drain()) check_gids("addresses changed");
    arm_addresses();
  });
}

std::map<std::string, uint64_t> DeviceEventMonitor::counts() const { return counts_; }

}  // namespace rdmad::daemon
