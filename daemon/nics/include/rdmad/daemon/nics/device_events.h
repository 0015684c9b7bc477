#pragma once
// Device events on the control io_context: each NIC's asynchronous events (port up/down, QP fatal,
// device fatal) are logged once and counted as they arrive and handed to the flows (a port that
// went down or came back, a QP that failed); for NICs whose address selects a GID
// (Capabilities::address_selects_gid: hardware NICs) the kernel's address changes (the backend's
// watch_addresses: rtnetlink) and GID-table changes (IBV_EVENT_GID_CHANGE) make the daemon re-read
// each port's RoCEv2 GID (which the rdma_core backend re-selects on every use; GID indexes are never kept), and
// a GID that changed is handed on too: that NIC's QPs must be rebuilt with the new address.
#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>

#include "rdmad/daemon/nics/nic_slots.h"

namespace rdmad::daemon {

class DeviceEventMonitor {
 public:
  DeviceEventMonitor(boost::asio::io_context& io, const NicSlots& nics);
  ~DeviceEventMonitor();
  DeviceEventMonitor(const DeviceEventMonitor&) = delete;
  DeviceEventMonitor& operator=(const DeviceEventMonitor&) = delete;

  // Arms a wait on every NIC in service that has events, and on the backend's address watch when a
  // NIC whose address selects its GID is configured.
  void start();
  // A NIC came into service (NicSlots::retry): watch its events too.
  void nic_opened(size_t nic_index);
  // Events handled so far, by "<nic>/<kind>" (kind: port_active, port_down, ..., gid_changed).
  std::map<std::string, uint64_t> counts() const;
  // Told when a NIC's port goes down or comes back (index in NicSlots order); for flows.
  void set_port_sink(std::function<void(size_t nic_index, bool up)> sink) { port_sink_ = std::move(sink); }
  // Told when one of a NIC's QPs failed (IBV_EVENT_QP_FATAL and the QP error events).
  void set_qp_sink(std::function<void(size_t nic_index, uint32_t qp_num)> sink) { qp_sink_ = std::move(sink); }
  // Told when a NIC's selected source GID changed (an address change on its netdev).
  void set_gid_sink(std::function<void(size_t nic_index)> sink) { gid_sink_ = std::move(sink); }
  // Re-reads every hardware NIC's source GID and tells the sink about those that changed (what an
  // address change does; public for tests).
  void check_gids(const char* why);

 private:
  void arm(size_t watch);
  void arm_addresses();
  void watch(size_t nic_index);
  void handle(size_t nic_index, const verbs::DeviceEvent& e);

  boost::asio::io_context& io_;
  const NicSlots& nics_;
  struct Watch {
    size_t nic;
    std::unique_ptr<boost::asio::posix::stream_descriptor> fd;  // not owned: released, never closed
  };
  std::vector<Watch> watches_;
  std::unique_ptr<verbs::ChangeWatch> addresses_;
  std::unique_ptr<boost::asio::posix::stream_descriptor> address_fd_;
  std::map<std::string, uint64_t> counts_;
  std::map<size_t, verbs::Gid> gids_;  // by NIC index: the source GID last read (GIDs that follow addresses)
  std::function<void(size_t, bool)> port_sink_;
  std::function<void(size_t, uint32_t)> qp_sink_;
  std::function<void(size_t)> gid_sink_;
};

const char* to_string(verbs::DeviceEvent::Kind k);

}  // namespace rdmad::daemon
