#include "rdmad/metrics/exporter.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <thread>

#include <CivetServer.h>
#include <civetweb.h>
#include <fmt/format.h>
#include <prometheus/exposer.h>

namespace rdmad::metrics {

// The begin_request side of Exporter: CivetWeb's callbacks are plain functions, so the server a
// request arrives on is found by its context, which init_context announces while the Exposer is
// being built on the constructing thread (kStarting).
struct ExporterAccess {
  static int serve(Exporter& e, mg_connection* conn, const mg_request_info& ri);
};

namespace {

std::mutex servers_mu;
std::map<const mg_context*, Exporter*> servers;  // under servers_mu
thread_local Exporter* starting = nullptr;       // the Exporter whose server this thread builds

void on_init_context(const mg_context* ctx) {
  if (starting == nullptr) return;
  std::lock_guard lock(servers_mu);
  servers[ctx] = starting;
}

void on_exit_context(const mg_context* ctx) {
  std::lock_guard lock(servers_mu);
  servers.erase(ctx);
}

void forget(const Exporter* e) {
  std::lock_guard lock(servers_mu);
  std::erase_if(servers, [e](const auto& kv) { return kv.second == e; });
}

int on_begin_request(mg_connection* conn) {
  const mg_request_info* ri = mg_get_request_info(conn);
  Exporter* e = nullptr;
  {
    std::lock_guard lock(servers_mu);
    auto it = servers.find(mg_get_context(conn));
    if (it != servers.end()) e = it->second;
  }
  return e != nullptr && ri != nullptr ? ExporterAccess::serve(*e, conn, *ri) : 0;
}

const char* reason_phrase(int status) {
  switch (status) {
    case 200: return "OK";
    case 405: return "Method Not Allowed";
    case 503: return "Service Unavailable";
    default: return status < 400 ? "OK" : "Error";
  }
}

void reply(mg_connection* conn, int status, const std::string& body, bool head) {
  const std::string header = fmt::format(
      "HTTP/1.1 {} {}\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: {}\r\nCache-Control: no-store\r\n"
      "Connection: close\r\n\r\n",
      status, reason_phrase(status), body.size());
  mg_write(conn, header.data(), header.size());
  if (!head) mg_write(conn, body.data(), body.size());
}

// Opens and closes a TCP connection to host:port (host may be "[v6]"); errors are irrelevant.
void wake(const std::string& host, int port) {
  std::string h = host;
  if (!h.empty() && h.front() == '[') h = h.substr(1, h.size() - 2);
  sockaddr_storage ss{};
  socklen_t len = 0;
  auto* v4 = reinterpret_cast<sockaddr_in*>(&ss);
  auto* v6 = reinterpret_cast<sockaddr_in6*>(&ss);
  if (inet_pton(AF_INET, h.c_str(), &v4->sin_addr) == 1) {
    v4->sin_family = AF_INET;
    v4->sin_port = htons(static_cast<uint16_t>(port));
    len = sizeof *v4;
  } else if (inet_pton(AF_INET6, h.c_str(), &v6->sin6_addr) == 1) {
    v6->sin6_family = AF_INET6;
    v6->sin6_port = htons(static_cast<uint16_t>(port));
    len = sizeof *v6;
  } else {
    return;
  }
  const int fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return;
  connect(fd, reinterpret_cast<sockaddr*>(&ss), len);
  close(fd);
}

}  // namespace

int ExporterAccess::serve(Exporter& e, mg_connection* conn, const mg_request_info& ri) {
  std::shared_ptr<const Exporter::Handler> handler;
  {
    std::lock_guard lock(e.handlers_mu_);
    auto it = e.handlers_.find(std::string_view(ri.local_uri != nullptr ? ri.local_uri : ""));
    if (it == e.handlers_.end()) return 0;  // /metrics and everything else: CivetWeb's own handlers
    handler = it->second;
  }
  const bool head = std::strcmp(ri.request_method, "HEAD") == 0;
  if (!head && std::strcmp(ri.request_method, "GET") != 0) {
    reply(conn, 405, "only GET and HEAD\n", false);
    return 405;
  }
  const HttpAnswer a = (*handler)();
  reply(conn, a.status, a.body, head);
  return a.status;
}

Exporter::~Exporter() {
  if (!exposer_) return;
  // CivetWeb's accept loop polls with a 2 s quantum and checks its stop flag only between polls,
  // so a plain shutdown takes up to 2 s. Stop it on a helper thread and wake the loop with
  // connections to our own port until it is down: shutdown then takes milliseconds.
  const int port = this->port();
  std::atomic<bool> done{false};
  std::thread stopper([this, &done] {
    exposer_.reset();
    done = true;
  });
  while (!done.load()) {
    wake(host_, port);
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  stopper.join();
  forget(this);  // the server is gone; no request reaches this object any more
}

base::Result<std::unique_ptr<Exporter>> Exporter::start(const std::string& listen) {
  std::unique_ptr<Exporter> e(new Exporter());
  e->registry_ = std::make_shared<prometheus::Registry>();
  const auto colon = listen.rfind(':');
  e->host_ = colon == std::string::npos ? listen : listen.substr(0, colon);
  // Bounded: a few threads, a short accept queue, whole requests within a deadline and a size.
  std::vector<std::string> options{"listening_ports",    listen,
                                   "num_threads",        std::to_string(kHttpThreads),
                                   "connection_queue",   std::to_string(kHttpQueue),
                                   "listen_backlog",     std::to_string(kHttpQueue),
                                   "request_timeout_ms", std::to_string(kHttpRequestTimeoutMs),
                                   "max_request_size",   std::to_string(kHttpMaxRequestBytes)};
  static const CivetCallbacks callbacks = [] {
    CivetCallbacks c;
    c.begin_request = on_begin_request;
    c.init_context = on_init_context;
    c.exit_context = on_exit_context;
    return c;
  }();
  starting = e.get();
  try {
    // CivetWeb throws when the address cannot be bound.
    e->exposer_ = std::make_unique<prometheus::Exposer>(std::move(options), &callbacks);
  } catch (const std::exception& ex) {
    starting = nullptr;
    forget(e.get());
    return base::Status::error(
        fmt::format("cannot serve metrics on {}: {} (is the address local and the port free?)", listen, ex.what()));
  }
  starting = nullptr;
  if (e->exposer_->GetListeningPorts().empty()) {
    return base::Status::error(fmt::format("cannot serve metrics on {}: nothing is listening", listen));
  }
  e->exposer_->RegisterCollectable(e->registry_);
  return e;
}

void Exporter::add_handler(const std::string& path, Handler handler) {
  std::lock_guard lock(handlers_mu_);
  handlers_[path] = std::make_shared<const Handler>(std::move(handler));
}

void Exporter::add_collectable(const std::weak_ptr<prometheus::Collectable>& c) { exposer_->RegisterCollectable(c); }

int Exporter::port() const {
  const auto ports = exposer_->GetListeningPorts();
  return ports.empty() ? 0 : ports.front();
}

std::string Exporter::url() const { return fmt::format("http://{}:{}/metrics", host_, port()); }

}  // namespace rdmad::metrics
