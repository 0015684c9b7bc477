#include "rdmad/daemon/daemon.h"

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include <fmt/format.h>

#include "rdmad/base/log_fields.h"
#include "rdmad/config/loader.h"
#include "rdmad/daemon/nics/embedded_nics.h"
#include "rdmad/base/log.h"
#include "rdmad/metrics/daemon_metrics.h"
#include "rdmad/metrics/exporter.h"
#include "rdmad/metrics/process_collector.h"
#include "rdmad/version.h"

namespace rdmad::daemon {

Daemon::Daemon(config::Config config, std::string config_path, BackendHook backends)
    : config_(std::move(config)),
      config_path_(std::move(config_path)),
      signals_(io_, SIGTERM, SIGINT, SIGHUP),
      nic_poll_timer_(io_),
      dcqcn_sample_timer_(io_) {
  verbs::register_builtin_backends(backends_);
  if (backends) backends(backends_);
}

// ~Daemon is in daemon_reload.cc: it detaches a reload still reading.

bool Daemon::start() {
  auto log = log::get(log::Component::kDaemon);
  started_ = std::chrono::system_clock::now();
  started_steady_ = std::chrono::steady_clock::now();
  log->info("rdmad starting version={} commit={} config={}", kVersion, kCommit,
            base::q(config_path_.empty() ? std::string("embedded-default") : config_path_));
  if (test_hooks_)
    log->warn("test hooks enabled flag=--enable-test-hooks detail=\"rdmactl debug stall can stall the daemon's threads; "
              "never in production\"");

  std::error_code ec;
  std::filesystem::create_directories(config_.daemon.runtime_dir, ec);
  if (ec) {
    log->error("cannot create runtime directory path={} error={}", base::q(config_.daemon.runtime_dir),
               base::q(ec.message()));
    return false;
  }

  auto exporter = metrics::Exporter::start(config_.metrics.listen);
  if (!exporter.ok()) {
    log::get(log::Component::kMetrics)->error("cannot serve metrics error={}", base::q(exporter.status().message()));
    return false;
  }
  exporter_ = std::move(exporter).value();
  probes_ = std::make_unique<Probes>(io_, std::chrono::milliseconds(config_.metrics.probe_timeout_ms));
  probes_->attach(*exporter_);
  const double now_s =
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  metrics_ = std::make_unique<metrics::DaemonMetrics>(exporter_->registry(), kVersion, kCommit, now_s);
  metrics_->set_node_labels(config_.metrics.labels);
  process_collector_ = metrics::process_collector();
  exporter_->add_collectable(process_collector_);
  log::get(log::Component::kMetrics)->info("serving metrics url={}", base::q(exporter_->url()));

  log::get(log::Component::kCc)->info("dcqcn parameters profile={} params={}", base::q(config_.cc.source()),
                       base::q(cc::describe(config_.cc.params)));
  std::map<std::string, verbs::HostNics> discovered;  // the embedded default's scan, not made twice
  if (config_.nics.empty()) {
    auto embedded = embedded_nics(backends_, config_);
    if (!embedded.ok()) {
      log::get(log::Component::kVerbs)->error("cannot open nics error={}", base::q(embedded.status().message()));
      return false;
    }
    config_.nics = embedded.value().nics;
    discovered = std::move(embedded.value().discovered);
    embedded_nics_ = true;
    log::get(log::Component::kVerbs)
        ->info("no nic configured embedded_default=true nics={} detail={}", config_.nics.size(),
               base::q(embedded.value().why));
  }
  nics_ = std::make_unique<NodeNics>(backends_, config_, std::move(discovered));
  if (const base::Status st = nics_->open(); !st.ok()) {
    log::get(log::Component::kVerbs)->error("cannot open nics error={}", base::q(st.message()));
    return false;
  }
  nics_->add_metrics(*exporter_);
  device_events_ = std::make_unique<DeviceEventMonitor>(io_, nics_->slots());
  device_events_->start();
  return start_client_service();
}

namespace {

// The diagnose line about the peer channel's security; rdmactl status reads its first word after
// "peer channel: " (off, insecure, psk, certificates) and shows it (docs/protocol.md, Diagnose).
std::string peer_diagnosis(const config::Config& c) {
  const config::PeerSection& p = c.peer;
  if (!p.enabled) return "info peer channel: off ([peer] enabled = false)\n";
  const bool wildcard = p.listen_host == "0.0.0.0" || p.listen_host == "::";
  const std::string where = wildcard ? "; it listens on every address" : "";
  const std::string mode = p.security();
  if (mode == "insecure") {
    return fmt::format(
        "warn peer channel: insecure: plaintext and unauthenticated ([peer] insecure = true), anyone who reaches {} "
        "can claim a node id and receive its grants{}\n",
        p.listen_host, where);
  }
  const char* what = mode == "psk" ? "TLS 1.3 with the cluster's pre-shared key (any holder can claim any node id)"
                                   : "TLS 1.3 with mutual certificates, node ids bound to their SANs";
  return fmt::format("{} peer channel: {}: {}{}\n", wildcard ? "warn" : "ok", mode, what, where);
}

clients::IpcConfig ipc_config(const config::Config& c) {
  clients::IpcConfig ic;
  ic.socket_path = c.daemon.socket_path;
  ic.socket_mode = static_cast<uint32_t>(std::stoul(c.ipc.socket_mode, nullptr, 8));
  ic.socket_group = c.ipc.socket_group;
  ic.admin_socket_path = config::admin_socket_path(c);
  for (int64_t u : c.ipc.allowed_uids) ic.allowed_uids.push_back(static_cast<uid_t>(u));
  for (int64_t g : c.ipc.allowed_gids) ic.allowed_gids.push_back(static_cast<gid_t>(g));
  ic.max_clients = static_cast<uint32_t>(c.ipc.max_clients);
  ic.workers = static_cast<uint32_t>(c.ipc.workers);
  auto u32 = [](int64_t v) { return static_cast<uint32_t>(v); };
  ic.default_quota = {static_cast<uint64_t>(c.ipc.quota_pinned_bytes), u32(c.ipc.quota_registrations),
                      u32(c.ipc.quota_connections), u32(c.ipc.quota_flows), u32(c.ipc.quota_exports)};
  for (const auto& q : c.quotas) {
    const clients::Quota quota{static_cast<uint64_t>(q.pinned_bytes), u32(q.registrations), u32(q.connections),
                               u32(q.flows), u32(q.exports)};
    if (q.pod_uid.empty()) ic.quotas[static_cast<uid_t>(q.uid)] = quota;
    else ic.pod_quotas[q.pod_uid] = quota;
  }
  ic.proc_root = c.ipc.proc_root;
  ic.nic_table_share_percent = u32(c.ipc.nic_table_share_percent);
  ic.hello_timeout_ms = u32(c.ipc.hello_timeout_ms);
  ic.idle_timeout_ms = u32(c.ipc.idle_timeout_ms);
  ic.diagnose_root = c.daemon.sysfs_root;
  return ic;
}

}  // namespace

bool Daemon::start_client_service() {
  registrar_ = std::make_unique<VerbsRegistrar>(nics_->slots(), backends_);
  if (const base::Status st = registrar_->start(); !st.ok()) {
    log::get(log::Component::kIpc)->error("cannot start registrar error={}", base::q(st.message()));
    return false;
  }
  ipc_ = std::make_unique<clients::UnixServer>(io_, ipc_config(config_), *registrar_, *nics_, exporter_->registry());
  open_session_store();
  if (auto r = ipc_->start(); !r.ok()) {
    log::get(log::Component::kIpc)->error("cannot serve clients socket={} error={}", base::q(config_.daemon.socket_path),
                           base::q(r.error().message));
    return false;
  }
  // Before the first accept (the io_context is not running yet): a resuming client finds its session.
  if (restored_) restored_handles_ = ipc_->restore(*restored_, std::chrono::milliseconds(config_.ipc.resume_grace_ms));
  ipc_->set_diagnose_extra(
      [this] { return nics_->diagnosis() + peer_diagnosis(config_); });
  if (!start_flows()) return false;
  finish_restore();
  admin_ = std::make_unique<AdminService>(config_, *nics_, flows_.get(), [this] { return reload(); },
                                          DaemonFacts{config_path_.empty() ? "" : std::filesystem::absolute(config_path_).string(),
                                                      node_id_of(config_), started_, started_steady_},
                                          reloads_);
  ipc_->set_admin_handler(admin_.get());
  return true;
}

void Daemon::open_session_store() {
  auto log = log::get(log::Component::kIpc);
  auto passed = clients::passed_fds(clients::kStoredMemoryPrefix);
  // Sessions are kept only where something keeps their memory's descriptors across our exit.
  const bool keeper = std::getenv("NOTIFY_SOCKET") != nullptr;
  if (config_.ipc.resume_grace_ms == 0 || !keeper) {
    auto forget = keeper ? clients::systemd_fd_keeper() : nullptr;
    for (auto& [name, fd] : passed) {
      ::close(fd);
      if (forget) forget->forget(name);
    }
    if (!passed.empty()) log->info("previous sessions released descriptors={} reason={}", passed.size(),
                                   base::q(keeper ? "[ipc] resume_grace_ms = 0" : "no NOTIFY_SOCKET"));
    return;
  }
  restore_started_ = std::chrono::steady_clock::now();
  sessions_ = std::make_unique<clients::SessionStore>(config_.daemon.runtime_dir + "/sessions.state",
                                                      clients::systemd_fd_keeper());
  restored_ = sessions_->replay(std::move(passed));
  ipc_->set_session_store(sessions_.get());
}

void Daemon::finish_restore() {
  if (!restored_) return;
  size_t exports = 0;
  if (flows_) {
    flows_->set_session_store(sessions_.get());
    exports = flows_->restore_exports(restored_->sessions, restored_->exports);
  }
  for (auto& [seq, fd] : restored_->region_fds) ::close(fd);  // the keeper holds its own
  sessions_->compact();
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() -
                                                                         restore_started_).count();
  if (!restored_->sessions.empty() || restored_->handles_without_fd != 0 || restored_->torn_bytes != 0) {
    log::get(log::Component::kIpc)
        ->info("sessions restored sessions={} handles={} of={} exports={} of={} without_descriptor={} torn_bytes={} "
               "grace_ms={} ms={}",
               ipc_->detached_sessions(), restored_handles_, restored_->handles.size(), exports,
               restored_->exports.size(), restored_->handles_without_fd, restored_->torn_bytes,
               config_.ipc.resume_grace_ms, ms);
  }
  restored_.reset();
}

int Daemon::run() {
  if (!start()) {
    notifier_.status("start-up failed");
    return 1;
  }
  wait_for_signal();
  start_watchdog();
  probes_->serving([this] { return admin_->health_input(); }, [this] { return watchdog_->stalled(); });
  arm_nic_poll();
  arm_dcqcn_sample();
  notifier_.ready(fmt::format("serving metrics at {}", exporter_->url()));
  log::get(log::Component::kDaemon)->info("ready");
  io_.run();

  probes_->stopping();
  watchdog_->stop();  // the control thread no longer beats; systemd's stop timeout rules from here
  notifier_.stopping();
  log::get(log::Component::kDaemon)->info("stopping");
  // First, before anything slower: every client sees its connection close now (EOF), so its
  // library fails what it has in flight at once instead of waiting on a daemon that is leaving.
  // This also releases every client's registrations before the NICs go.
  if (ipc_) ipc_->stop();
  if (flows_) flows_->stop();
  // What is left in the state file (and the descriptor store) is what the next start restores.
  exporter_.reset();  // stops the HTTP server before the registry it serves goes away
  log::get(log::Component::kDaemon)->info("stopped");
  return 0;
}

void Daemon::wait_for_signal() {
  signals_.async_wait([this](const boost::system::error_code& ec, int sig) {
    if (ec) return;
    if (sig == SIGHUP) {
      reload_in_background();
      wait_for_signal();
      return;
    }
    log::get(log::Component::kDaemon)->info("shutting down signal={}", base::q(strsignal(sig)));
    io_.stop();
  });
}

void Daemon::start_watchdog() {
  const std::chrono::microseconds interval = notifier_.watchdog_interval();
  if (interval.count() > 0)
    log::get(log::Component::kDaemon)->info("systemd watchdog interval_ms={}", interval.count() / 1000);
  watchdog_ = std::make_unique<Watchdog>(io_, interval, [this] { notifier_.watchdog(); });
  // Every thread that does the node's work beside this one: a soft NIC's datapath, the flow
  // engine. rdma_core NICs have no thread of their own (their completions are polled by the flow
  // engine and the clients); the control thread is proven by the watchdog's own timer.
  // A NIC with several datapath threads has one watch each: datapath:rail0, datapath:rail0.1, ...
  for (const Nic& nic : nics_->slots().nics()) {
    if (!nic.in_service()) continue;
    verbs::Device* dev = nic.device.get();
    const std::vector<const base::Heartbeat*> beats = dev->datapath_heartbeats();
    for (size_t i = 0; i < beats.size(); ++i) {
      const std::string name = "datapath:" + nic.config.name + (i == 0 ? "" : "." + std::to_string(i));
      watchdog_->watch(name, beats[i], [dev, i](const std::function<void()>& fn) {
        (void)dev->run_on_datapath_thread_for_test(i, fn);
      });
    }
  }
  if (flows_ && flows_->engine_heartbeat() != nullptr) {
    flow::FlowService* flows = flows_.get();
    watchdog_->watch("flow-engine", flows_->engine_heartbeat(),
                     [flows](const std::function<void()>& fn) { flows->run_on_engine_for_test(fn); });
  }
  exporter_->add_collectable(watchdog_->collector());
  if (admin_ && test_hooks_) {
    admin_->set_stall_hook([this](const std::string& thread, uint32_t seconds) -> clients::Result<clients::Ok> {
      if (const base::Status st = watchdog_->stall_for_test(thread, seconds); !st.ok())
        return clients::Error{RDMAD_ERR_NOT_FOUND, st.message()};
      return clients::Ok{};
    });
  }
  watchdog_->start();
}

void Daemon::arm_nic_poll() {
  nic_poll_timer_.expires_after(std::chrono::milliseconds(config_.daemon.nic_poll_interval_ms));
  nic_poll_timer_.async_wait([this](const boost::system::error_code& ec) {
    if (ec) return;
    nics_->poll();
    retry_nics();
    arm_nic_poll();
  });
}

void Daemon::retry_nics() {
  for (size_t i : nics_->retry(NodeNics::Clock::now())) {
    // In service now: its events, client registrations and flows.
    const Nic& nic = nics_->slots().nics()[i];
    if (device_events_) device_events_->nic_opened(i);
    if (registrar_) {
      if (const base::Status st = registrar_->nic_opened(i); !st.ok())
        log::get(log::Component::kIpc)->error("cannot register on nic nic={} error={}", nic.config.name, base::q(st.message()));
    }
    if (flows_) {
      if (const base::Status st = flows_->nic_opened(i, nic.device.get()); !st.ok())
        log::get(log::Component::kFlow)->error("cannot carry flows on nic nic={} error={}", nic.config.name, base::q(st.message()));
    }
  }
}

void Daemon::arm_dcqcn_sample() {
  dcqcn_sample_timer_.expires_after(std::chrono::seconds(1));
  dcqcn_sample_timer_.async_wait([this](const boost::system::error_code& ec) {
    if (ec) return;
    nics_->sample_dcqcn();
    arm_dcqcn_sample();
  });
}

}  // namespace rdmad::daemon
