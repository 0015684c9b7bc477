// The client service's Unix socket: SOCK_SEQPACKET, mode and group from config (or adopted from
// systemd socket activation), peer credentials checked on accept on the control-plane io_context,
// each connection then served by one of config.workers threads of its own (the least loaded, no
// thread per client; fair turns between its connections, connection.h), large registrations by as
// many bulk threads. Flow, admin, NIC and diagnose requests, the flow and admin handlers and connection
// cleanup run on the control io_context. Not thread-safe: call it, and run that io_context, from
// one thread; stop() waits for the workers.
#pragma once

#include <boost/asio/io_context.hpp>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "rdmad/daemon/clients/admin_handler.h"
#include "rdmad/daemon/clients/fd_budget.h"
#include "rdmad/daemon/clients/flow_handler.h"
#include "rdmad/daemon/clients/ipc_config.h"
#include "rdmad/daemon/clients/memory_registrar.h"
#include "rdmad/daemon/nics/nic_directory.h"
#include "rdmad/daemon/clients/registration_service.h"
#include "rdmad/daemon/clients/result.h"
#include "rdmad/daemon/clients/session_store.h"

namespace prometheus {
class Registry;
}

namespace rdmad::clients {

class UnixServer {
 public:
  UnixServer(boost::asio::io_context& io, IpcConfig config, MemoryRegistrar& registrar,
             NicDirectory& inventory, prometheus::Registry& registry);
  ~UnixServer();
  UnixServer(const UnixServer&) = delete;
  UnixServer& operator=(const UnixServer&) = delete;

  // Binds (or adopts the systemd-passed socket for config.socket_path) and starts accepting.
  Result<Ok> start();
  // Records sessions in `store` (protocol version 2 connections) so that the next run can serve
  // them again. Before start().
  void set_session_store(SessionStore* store);
  // Registers the previous run's handles again (their regions' descriptors: seq → fd, left open)
  // under their numbers and connection ids; each session then waits for its client's kResume for
  // `grace` (counted from start()), after which what is left is released. Before start(). Returns
  // how many handles were restored; failures are logged and dropped.
  size_t restore(const RestoredState& state, std::chrono::milliseconds grace);
  size_t detached_sessions() const;
  // Stops accepting, drops every connection (releasing its registrations) and removes the socket
  // file it created. Idempotent.
  void stop();

  bool socket_activated() const;
  size_t client_count() const;
  const RegistrationService& service() const;
  RegistrationService& registrations();
  // Serves the flow requests (open, close, export, import, revoke); without one they are refused
  // as not supported. The handler must outlive the server or be reset to nullptr first.
  void set_flow_handler(FlowHandler* handler);
  // More diagnose lines (the daemon's congestion-control checks), appended to the GPUDirect ones.
  void set_diagnose_extra(std::function<std::string()> extra);
  // Serves the operator's requests (flows, cc show/set, reload); without one they are refused as
  // not supported (the node-wide registration list needs none). Same lifetime rule as above.
  void set_admin_handler(AdminHandler* handler);
  const IpcConfig& config() const;
  // The descriptors clients may make the daemon hold (flows take theirs from it too).
  FdBudget& fd_budget();

  class Core;

 private:
  std::shared_ptr<Core> core_;
};

}  // namespace rdmad::clients
