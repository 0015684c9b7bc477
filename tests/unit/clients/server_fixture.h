// Runs a UnixServer with the soft registrar on a real socket in a temporary directory, its
// io_context on a background thread; tests talk to it through librdmad or RawClient.
#pragma once

#include <dirent.h>
#include <prometheus/registry.h>
#include <sys/stat.h>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <chrono>
#include <filesystem>
#include <functional>
#include <future>
#include <memory>
#include <string>
#include <thread>

#include "support/doubles/soft_registrar.h"
#include "rdmad/daemon/clients/unix_server.h"

namespace rdmad::test {

class TempDir {
 public:
  TempDir() {
    char tmpl[] = "/tmp/rdmad-ipc-XXXXXX";
    path_ = mkdtemp(tmpl);
    chmod(path_.c_str(), 0755);  // tests also connect as nobody
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

inline size_t open_fd_count() {
  size_t n = 0;
  for (const auto& e : std::filesystem::directory_iterator("/proc/self/fd")) {
    (void)e;
    ++n;
  }
  return n;
}

// Polls `pred` until it holds or `timeout` passes; returns its last value.
inline bool eventually(const std::function<bool()>& pred,
                       std::chrono::milliseconds timeout = std::chrono::milliseconds(1000)) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!pred()) {
    if (std::chrono::steady_clock::now() >= deadline) return pred();
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return true;
}

inline clients::IpcConfig test_config(const std::string& dir) {
  clients::IpcConfig c;
  c.socket_path = dir + "/rdmad.sock";
  c.socket_mode = 0666;
  c.systemd_activation = false;
  return c;
}

inline std::vector<clients::NicDescriptor> soft_nics() {
  return {{"soft0", "soft", "", RDMAD_LINK_UP, 100000, 0}, {"soft1", "soft", "", RDMAD_LINK_UP, 100000, 1}};
}

class TestServer {
 public:
  explicit TestServer(std::function<void(clients::IpcConfig&)> tweak = {}) : config_(test_config(dir_.path())) {
    if (tweak) tweak(config_);
    start();
  }
  ~TestServer() { shutdown(); }

  // Stops the server (every connection drops) and starts a fresh one on the same path.
  void restart() {
    shutdown();
    start();
  }

  template <class F>
  auto on_server(F f) -> decltype(f()) {
    std::packaged_task<decltype(f())()> task(std::move(f));
    auto result = task.get_future();
    boost::asio::post(*io_, [&task] { task(); });
    return result.get();
  }

  // Value of a metric sample (first family `name` with all `labels`), -1 when absent.
  double metric(const std::string& name, const std::map<std::string, std::string>& labels = {}) {
    for (const auto& fam : registry_->Collect()) {
      if (fam.name != name) continue;
      for (const auto& m : fam.metric) {
        bool match = true;
        for (const auto& [k, v] : labels) {
          bool found = false;
          for (const auto& l : m.label) found = found || (l.name == k && l.value == v);
          match = match && found;
        }
        if (!match) continue;
        switch (fam.type) {
          case prometheus::MetricType::Counter:
            return m.counter.value;
          case prometheus::MetricType::Gauge:
            return m.gauge.value;
          case prometheus::MetricType::Histogram:
            return static_cast<double>(m.histogram.sample_count);
          default:
            return -1;
        }
      }
    }
    return -1;
  }

  size_t region_count() {
    return on_server([this] { return server_->service().region_count(); });
  }
  size_t handle_count() {
    return on_server([this] { return server_->service().handle_count(); });
  }
  size_t client_count() {
    return on_server([this] { return server_->client_count(); });
  }

  const std::string& path() const { return config_.socket_path; }
  const std::string& dir() const { return dir_.path(); }
  clients::UnixServer& server() { return *server_; }
  clients::SoftRegistrar& registrar() { return registrar_; }
  bool started() const { return started_; }
  std::string start_error() const { return start_error_; }

 private:
  void start() {
    io_ = std::make_unique<boost::asio::io_context>();
    registry_ = std::make_unique<prometheus::Registry>();
    server_ = std::make_unique<clients::UnixServer>(*io_, config_, registrar_, inventory_, *registry_);
    auto started = server_->start();
    started_ = started.ok();
    if (!started_) start_error_ = started.error().message;
    work_ = std::make_unique<boost::asio::executor_work_guard<boost::asio::io_context::executor_type>>(
        io_->get_executor());
    thread_ = std::thread([this] { io_->run(); });
  }
  void shutdown() {
    if (!thread_.joinable()) return;
    on_server([this] {
      server_.reset();
      return 0;
    });
    work_.reset();
    io_->stop();
    thread_.join();
    io_.reset();
  }

  TempDir dir_;
  clients::IpcConfig config_;
  clients::StaticNicDirectory inventory_{soft_nics()};
  clients::SoftRegistrar registrar_{2};
  std::unique_ptr<boost::asio::io_context> io_;
  std::unique_ptr<prometheus::Registry> registry_;
  std::unique_ptr<clients::UnixServer> server_;
  std::unique_ptr<boost::asio::executor_work_guard<boost::asio::io_context::executor_type>> work_;
  std::thread thread_;
  bool started_ = false;
  std::string start_error_;
};

}  // namespace rdmad::test
