#pragma once
// The service: wiring and lifecycle. One Boost.Asio io_context runs the control plane (signals,
// reload, watchdog, and the subsystems later issues add); datapaths run on their own threads.
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>
#include <prometheus/collectable.h>

#include "rdmad/config/config.h"
#include "rdmad/config/loader.h"
#include "rdmad/daemon/admin_service.h"
#include "rdmad/daemon/clients/client_service.h"
#include "rdmad/daemon/nics/device_events.h"
#include "rdmad/daemon/clients/session_store.h"
#include "rdmad/daemon/clients/unix_server.h"
#include "rdmad/daemon/nics/node_nics.h"
#include "rdmad/daemon/notifier.h"
#include "rdmad/daemon/probes.h"
#include "rdmad/daemon/watchdog.h"
#include "rdmad/daemon/flow/flow_service.h"
#include "rdmad/verbs/registry.h"

namespace rdmad::metrics {
class Exporter;
class DaemonMetrics;
}  // namespace rdmad::metrics

namespace rdmad::daemon {

// This node's id on the peer channel: [peer] node_id, else the host name.
std::string node_id_of(const config::Config& config);
// What stops the flows from starting that the file alone does not show (the peers list this node
// by its host name); empty when nothing. Start-up and --check-config both ask.
std::string peer_start_problem(const config::Config& config);

class Daemon {
 public:
  // Changes the backend registry after the built-in backends are in it (adds or replaces one by
  // name). For test daemons that put a backend behind a wrapper; rdmad itself passes none.
  using BackendHook = std::function<void(verbs::BackendRegistry&)>;

  // `config_path` is re-read on SIGHUP; empty when running on the embedded default.
  Daemon(config::Config config, std::string config_path, BackendHook backends = {});
  ~Daemon();
  Daemon(const Daemon&) = delete;
  Daemon& operator=(const Daemon&) = delete;

  // Starts every subsystem, notifies READY=1 and runs until SIGTERM/SIGINT. Returns the process
  // exit code: 0 after a graceful stop, 1 when start-up failed (the reason is logged).
  int run();

  // Re-reads the configuration file and applies what can change live (what rdmactl reload does).
  // An error lists the file's problems; the daemon then keeps its configuration. The file is read
  // on the calling thread (the reply carries its errors), but never blocks on it: only a regular
  // file of at most config::kMaxConfigFileBytes is read (config::read_config_file).
  clients::Result<clients::Ok> reload();

  // --enable-test-hooks (before run()): rdmactl's hidden `debug stall` may make a watched thread
  // spin busy (Watchdog::stall_for_test). Logged as a warning at start; never on by default.
  void enable_test_hooks() { test_hooks_ = true; }

 private:
  struct ReloadMailbox;

  bool start();
  void wait_for_signal();
  // SIGHUP: reads and parses the file on a thread of its own and applies the result on the control
  // thread (finish_reload), so a slow or hostile file never stalls clients. A SIGHUP while a read
  // is in flight asks for one more read after it, however many arrive (coalesced).
  void reload_in_background();
  void finish_reload(uint64_t seq, config::LoadResult next);
  // Applies a loaded file (or reports its errors), counts it, and tells systemd.
  clients::Result<clients::Ok> apply_loaded(config::LoadResult next);
  void start_watchdog();
  void arm_nic_poll();
  // Opens the NICs out of service whose retry is due and brings each into the subsystems.
  void retry_nics();
  void arm_dcqcn_sample();
  void apply_live(const config::Config& next);
  bool start_client_service();
  bool start_flows();
  // Sessions of the previous run: the state file and the descriptors passed back (before the
  // client socket is served), then their exports once the flows run.
  void open_session_store();
  void finish_restore();

  config::Config config_;
  // The file has no [[nic]]: config_.nics is the embedded default (embedded_nics.h), not the file's.
  bool embedded_nics_ = false;
  std::string config_path_;
  boost::asio::io_context io_;
  boost::asio::signal_set signals_;
  boost::asio::steady_timer nic_poll_timer_;
  boost::asio::steady_timer dcqcn_sample_timer_;
  bool test_hooks_ = false;
  // Background reloads: the reading thread posts its result here while the daemon lives.
  std::shared_ptr<ReloadMailbox> reload_mailbox_;
  std::shared_ptr<prometheus::Collectable> process_collector_;  // process_* families
  bool reload_in_flight_ = false;
  bool reload_again_ = false;   // a SIGHUP came while one was in flight
  uint64_t reload_seq_ = 0;     // reloads started (background and rdmactl)
  uint64_t applied_seq_ = 0;    // the latest one applied: an older background read is stale
  ReloadRecord reloads_;  // for rdmactl status
  std::chrono::system_clock::time_point started_;
  std::chrono::steady_clock::time_point started_steady_;
  Notifier notifier_;
  verbs::BackendRegistry backends_;
  // Declared before the exporter: the HTTP server (which scrapes the NICs) stops first.
  std::unique_ptr<NodeNics> nics_;
  // /healthz and /readyz: outlive the HTTP server that calls them.
  std::unique_ptr<Probes> probes_;
  std::unique_ptr<metrics::Exporter> exporter_;
  std::unique_ptr<metrics::DaemonMetrics> metrics_;
  // The client service, after the NICs it registers memory on (so it goes first at shutdown).
  std::unique_ptr<VerbsRegistrar> registrar_;
  // Client sessions that outlive a restart ([ipc] resume_grace_ms, under a descriptor keeper);
  // before ipc_, which records into it. restored_: what this start found, until the flows took
  // their exports back.
  std::unique_ptr<clients::SessionStore> sessions_;
  std::optional<clients::RestoredState> restored_;
  size_t restored_handles_ = 0;
  std::chrono::steady_clock::time_point restore_started_;
  std::unique_ptr<clients::UnixServer> ipc_;
  std::unique_ptr<flow::FlowService> flows_;  // flows between nodes ([peer] enabled)
  std::unique_ptr<AdminService> admin_;        // rdmactl's requests
  std::unique_ptr<DeviceEventMonitor> device_events_;  // watches the NICs' descriptors: goes before them
  // Reads the NICs' and the flow engine's heartbeats: goes before them (a test stall in flight
  // is waited for while they still exist).
  std::unique_ptr<Watchdog> watchdog_;
};

}  // namespace rdmad::daemon
