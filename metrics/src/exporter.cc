#include "rdmad/metrics/exporter.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <thread>

#include <fmt/format.h>
#include <prometheus/exposer.h>

namespace rdmad::metrics {

namespace {

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
}

base::Result<std::unique_ptr<Exporter>> Exporter::start(const std::string& listen) {
  std::unique_ptr<Exporter> e(new Exporter());
  e->registry_ = std::make_shared<prometheus::Registry>();
  const auto colon = listen.rfind(':');
  e->host_ = colon == std::string::npos ? listen : listen.substr(0, colon);
  try {
    // One serving thread is plenty for a scrape every few seconds; CivetWeb throws when the
    // address cannot be bound.
    e->exposer_ = std::make_unique<prometheus::Exposer>(listen, 1);
  } catch (const std::exception& ex) {
    return base::Status::error(
        fmt::format("cannot serve metrics on {}: {} (is the address local and the port free?)", listen, ex.what()));
  }
  if (e->exposer_->GetListeningPorts().empty()) {
    return base::Status::error(fmt::format("cannot serve metrics on {}: nothing is listening", listen));
  }
  e->exposer_->RegisterCollectable(e->registry_);
  return e;
}

void Exporter::add_collectable(const std::weak_ptr<prometheus::Collectable>& c) { exposer_->RegisterCollectable(c); }

int Exporter::port() const {
  const auto ports = exposer_->GetListeningPorts();
  return ports.empty() ? 0 : ports.front();
}

std::string Exporter::url() const { return fmt::format("http://{}:{}/metrics", host_, port()); }

}  // namespace rdmad::metrics
