#pragma once
// Device events on the control io_context: each NIC's asynchronous events (port up/down, QP fatal,
// device fatal) are logged once and counted as they arrive, and for hardware NICs the kernel's
// address changes (rtnetlink) make the daemon re-read each port's RoCEv2 GID (which the rdma_core
// backend re-selects on every use; GID indexes are never kept).
#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>

#include "rdmad/daemon/nic_inventory.h"

namespace rdmad::verbs::rdma_core {
class AddressWatcher;
}

namespace rdmad::daemon {

class DeviceEventMonitor {
 public:
  DeviceEventMonitor(boost::asio::io_context& io, const NicInventory& nics);
  ~DeviceEventMonitor();
  DeviceEventMonitor(const DeviceEventMonitor&) = delete;
  DeviceEventMonitor& operator=(const DeviceEventMonitor&) = delete;

  // Arms a wait on every NIC that has events, and on rtnetlink when a hardware NIC is configured.
  void start();
  // Events handled so far, by "<nic>/<kind>" (kind: port_active, port_down, ...).
  std::map<std::string, uint64_t> counts() const;
  // Told when a NIC's port goes down or comes back (index in NicInventory order); for flows.
  void set_port_sink(std::function<void(size_t nic_index, bool up)> sink) { port_sink_ = std::move(sink); }

 private:
  void arm(size_t watch);
  void arm_addresses();
  void handle(const Nic& nic, const verbs::DeviceEvent& e);

  boost::asio::io_context& io_;
  const NicInventory& nics_;
  struct Watch {
    const Nic* nic;
    std::unique_ptr<boost::asio::posix::stream_descriptor> fd;  // not owned: released, never closed
  };
  std::vector<Watch> watches_;
  std::unique_ptr<verbs::rdma_core::AddressWatcher> addresses_;
  std::unique_ptr<boost::asio::posix::stream_descriptor> address_fd_;
  std::map<std::string, uint64_t> counts_;
  std::function<void(size_t, bool)> port_sink_;
};

const char* to_string(verbs::DeviceEvent::Kind k);

}  // namespace rdmad::daemon
