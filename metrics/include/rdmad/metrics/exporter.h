#pragma once
// The Prometheus endpoint: one registry shared by every subsystem, served over HTTP at /metrics by
// prometheus-cpp's Exposer. Subsystems add families to registry() (or register their own
// Collectable that reads counters at scrape time). Other plain-text paths (the probes /healthz and
// /readyz) are served by the same CivetWeb server through its begin_request callback, which the
// Exposer passes on: one port, one bounded server (kHttpThreads threads, a bounded accept queue,
// request size and time limits).
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <prometheus/registry.h>

#include "rdmad/base/result.h"

namespace prometheus {
class Exposer;
}

namespace rdmad::metrics {

// What a handler answers: an HTTP status and a plain-text body.
struct HttpAnswer {
  int status = 200;
  std::string body;
};

class Exporter {
 public:
  // Requests served at once (a scrape and the kubelet's two probes); a further connection waits in
  // CivetWeb's accept queue (kHttpQueue), beyond which the kernel's backlog holds it.
  static constexpr int kHttpThreads = 3;
  static constexpr int kHttpQueue = 16;
  // A request must arrive whole, and a reply be taken, within this time; larger requests are refused.
  static constexpr int kHttpRequestTimeoutMs = 5000;
  static constexpr int kHttpMaxRequestBytes = 8192;

  using Handler = std::function<HttpAnswer()>;

  ~Exporter();
  Exporter(const Exporter&) = delete;
  Exporter& operator=(const Exporter&) = delete;

  // Starts serving /metrics on `listen` ("127.0.0.1:9842", "[::1]:0"; port 0 picks a free port).
  // On failure (bad address, port in use) an error whose message names the address and the cause.
  static base::Result<std::unique_ptr<Exporter>> start(const std::string& listen);

  prometheus::Registry& registry() { return *registry_; }
  // Registers another collectable (e.g. a collector that reads datapath counters at scrape time).
  void add_collectable(const std::weak_ptr<prometheus::Collectable>& c);
  // Serves GET and HEAD of `path` (exact match, query ignored) with `handler`, on a CivetWeb thread:
  // the handler must be thread-safe and bounded in time. Replaces an earlier handler of `path`.
  void add_handler(const std::string& path, Handler handler);
  // The port actually bound (useful with port 0).
  int port() const;
  // "http://127.0.0.1:9842/metrics"
  std::string url() const;

 private:
  Exporter() = default;
  friend struct ExporterAccess;
  std::string host_;
  std::shared_ptr<prometheus::Registry> registry_;
  std::mutex handlers_mu_;
  std::map<std::string, std::shared_ptr<const Handler>, std::less<>> handlers_;
  std::unique_ptr<prometheus::Exposer> exposer_;
};

}  // namespace rdmad::metrics
