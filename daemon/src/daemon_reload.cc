// Configuration reload: SIGHUP reads the file on a thread of its own and applies the result on the
// control thread; rdmactl reload reads it in place (its reply carries the file's errors), which the
// bounded, non-blocking read of config::read_config_file keeps short.
#include <pthread.h>

#include <boost/asio/post.hpp>
#include <exception>
#include <memory>
#include <mutex>
#include <system_error>
#include <thread>

#include <fmt/format.h>

#include "rdmad/base/log_fields.h"
#include "rdmad/config/loader.h"
#include "rdmad/daemon/daemon.h"
#include "rdmad/base/log.h"
#include "rdmad/metrics/daemon_metrics.h"
#include "rdmad/metrics/exporter.h"

namespace rdmad::daemon {
namespace {

// A file with thousands of errors must not write thousands of lines per reload: the first ones
// name file:line and key, the rest are counted.
constexpr size_t kErrorsLogged = 50;

config::LoadResult load_with_environment(const std::string& path) {
  config::LoadResult next;
  try {
    next = config::load_file(path);
  } catch (const std::exception& e) {  // out of memory: the reading thread must not terminate the daemon
    next.errors.push_back(config::Error{path, 0, 0, "", fmt::format("cannot read file: {}", e.what())});
    return next;
  }
  if (next.ok()) config::apply_environment(next);
  return next;
}

}  // namespace

// Where the reading thread delivers its result. The thread holds it by shared_ptr and posts to
// `io` only while the daemon lives (the destructor clears it under the lock), so a read that
// outlives the daemon (a file on a hung network mount) touches nothing that is gone.
struct Daemon::ReloadMailbox {
  std::mutex mu;
  boost::asio::io_context* io = nullptr;
};

Daemon::~Daemon() {
  if (reload_mailbox_) {
    std::lock_guard lock(reload_mailbox_->mu);
    reload_mailbox_->io = nullptr;
  }
}

void Daemon::reload_in_background() {
  auto log = log::get(log::Component::kDaemon);
  if (config_path_.empty()) {
    (void)reload();  // nothing to read: says so and counts it
    return;
  }
  if (reload_in_flight_) {
    if (!reload_again_) log->info("reload queued reason=in_progress");
    reload_again_ = true;
    return;
  }
  if (!reload_mailbox_) {
    reload_mailbox_ = std::make_shared<ReloadMailbox>();
    reload_mailbox_->io = &io_;
  }
  notifier_.reloading();
  log->info("reloading config={}", base::q(config_path_));
  const uint64_t seq = ++reload_seq_;
  reload_in_flight_ = true;
  try {
    std::thread([box = reload_mailbox_, path = config_path_, seq, this] {
      pthread_setname_np(pthread_self(), "rdmad-reload");
      auto next = std::make_shared<config::LoadResult>(load_with_environment(path));
      std::lock_guard lock(box->mu);
      if (box->io == nullptr) return;  // the daemon is gone
      boost::asio::post(*box->io, [this, seq, next] { finish_reload(seq, std::move(*next)); });
    }).detach();
  } catch (const std::system_error& e) {
    reload_in_flight_ = false;
    config::LoadResult failed;
    failed.errors.push_back(
        config::Error{config_path_, 0, 0, "", fmt::format("cannot start a thread to read it: {}", e.what())});
    (void)apply_loaded(std::move(failed));
  }
}

void Daemon::finish_reload(uint64_t seq, config::LoadResult next) {
  reload_in_flight_ = false;
  if (seq < applied_seq_) {
    // rdmactl reload read the file after this read began and applied it already.
    log::get(log::Component::kDaemon)->info("reload ignored reason=superseded");
    notifier_.ready(fmt::format("serving metrics at {}", exporter_->url()));
  } else {
    applied_seq_ = seq;
    (void)apply_loaded(std::move(next));
  }
  if (reload_again_) {
    reload_again_ = false;
    reload_in_background();
  }
}

clients::Result<clients::Ok> Daemon::reload() {
  auto log = log::get(log::Component::kDaemon);
  if (config_path_.empty()) {
    log->warn("reload skipped reason=embedded_default_config");
    metrics_->reload_succeeded();
    reloads_.ok++;
    return clients::Ok{};
  }
  notifier_.reloading();
  log->info("reloading config={}", base::q(config_path_));
  applied_seq_ = ++reload_seq_;
  return apply_loaded(load_with_environment(config_path_));
}

clients::Result<clients::Ok> Daemon::apply_loaded(config::LoadResult next) {
  auto log = log::get(log::Component::kDaemon);
  if (!next.ok()) {
    auto config_log = log::get(log::Component::kConfig);
    for (size_t i = 0; i < next.errors.size() && i < kErrorsLogged; ++i)
      config_log->error("config error error={}", base::q(next.errors[i].to_string()));
    if (next.errors.size() > kErrorsLogged)
      config_log->error("config errors not shown count={} config={}", next.errors.size() - kErrorsLogged,
                        base::q(config_path_));
    log->error("reload failed errors={} running=previous_config", next.errors.size());
    metrics_->reload_failed();
    notifier_.ready("reload failed; running on the previous configuration");
    std::string text =
        fmt::format("{} error(s), still running on the previous configuration:", next.errors.size());
    for (const auto& e : next.errors) text += " " + e.to_string() + ";";
    reloads_.failed++;
    reloads_.last_error = text;
    return clients::Error{RDMAD_ERR_INVALID_ARGUMENT, text};
  }
  config::log_warnings(next);
  apply_live(next.config);
  metrics_->reload_succeeded();
  reloads_.ok++;
  reloads_.last_error.clear();
  notifier_.ready(fmt::format("serving metrics at {}", exporter_->url()));
  return clients::Ok{};
}

void Daemon::apply_live(const config::Config& next) {
  auto log = log::get(log::Component::kDaemon);
  if (next.daemon.log_level != config_.daemon.log_level) {
    log->info("log level changed from={} to={}", config_.daemon.log_level, next.daemon.log_level);
    log::set_level(*log::parse_level(next.daemon.log_level));
  }
  if (next.metrics.labels != config_.metrics.labels) {
    metrics_->set_node_labels(next.metrics.labels);
    log->info("metrics labels updated");
  }
  if (next.metrics.probe_timeout_ms != config_.metrics.probe_timeout_ms) {
    probes_->set_deadline(std::chrono::milliseconds(next.metrics.probe_timeout_ms));
    log->info("probe timeout changed from_ms={} to_ms={}", config_.metrics.probe_timeout_ms,
              next.metrics.probe_timeout_ms);
  }
  // Keys that need a restart: say so once instead of half-applying them.
  auto restart_needed = [&](const char* key, bool changed) {
    if (changed) log->warn("restart needed key={}", key);
  };
  restart_needed("metrics.listen", next.metrics.listen != config_.metrics.listen);
  restart_needed("daemon.socket_path", next.daemon.socket_path != config_.daemon.socket_path);
  restart_needed("ipc.admin_socket_path", config::admin_socket_path(next) != config::admin_socket_path(config_));
  restart_needed("daemon.runtime_dir", next.daemon.runtime_dir != config_.daemon.runtime_dir);
  restart_needed("cc", next.cc.params != config_.cc.params);
  restart_needed("nic", next.nics != (embedded_nics_ ? std::vector<config::NicSection>{} : config_.nics));
  restart_needed("peer", next.peer != config_.peer || next.peers != config_.peers);
  restart_needed("flow", next.flow != config_.flow);
  restart_needed("ipc", next.ipc.allowed_uids != config_.ipc.allowed_uids ||
                            next.ipc.allowed_gids != config_.ipc.allowed_gids ||
                            next.ipc.quota_pinned_bytes != config_.ipc.quota_pinned_bytes ||
                            next.ipc.quota_registrations != config_.ipc.quota_registrations ||
                            next.ipc.quota_connections != config_.ipc.quota_connections ||
                            next.ipc.quota_flows != config_.ipc.quota_flows ||
                            next.ipc.quota_exports != config_.ipc.quota_exports ||
                            next.ipc.nic_table_share_percent != config_.ipc.nic_table_share_percent ||
                            next.ipc.hello_timeout_ms != config_.ipc.hello_timeout_ms ||
                            next.ipc.idle_timeout_ms != config_.ipc.idle_timeout_ms ||
                            next.ipc.workers != config_.ipc.workers ||
                            next.ipc.proc_root != config_.ipc.proc_root ||
                            next.ipc.socket_group != config_.ipc.socket_group ||
                            next.quotas != config_.quotas);
  // Live keys are taken; restart-only keys keep their running values until the restart.
  config_.daemon.log_level = next.daemon.log_level;
  config_.metrics.labels = next.metrics.labels;
  config_.metrics.probe_timeout_ms = next.metrics.probe_timeout_ms;
  log->info("reload done");
}

}  // namespace rdmad::daemon
