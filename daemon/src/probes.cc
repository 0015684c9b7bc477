#include "rdmad/daemon/probes.h"

#include <condition_variable>
#include <mutex>

#include <boost/asio/post.hpp>
#include <fmt/format.h>

namespace rdmad::daemon {
namespace {

std::string joined(const std::vector<std::string>& reasons) {
  std::string out;
  for (const auto& r : reasons) out += (out.empty() ? "" : "; ") + r;
  return out;
}

}  // namespace

Probes::Probes(boost::asio::io_context& io, std::chrono::milliseconds deadline)
    : io_(io), deadline_ms_(deadline.count()) {}

void Probes::attach(metrics::Exporter& exporter) {
  exporter.add_handler("/healthz", [this] { return liveness(); });
  exporter.add_handler("/readyz", [this] { return readiness(); });
}

void Probes::serving(Input input, Stalled stalled) {
  input_ = std::move(input);
  stalled_ = std::move(stalled);
  phase_.store(kServing, std::memory_order_release);
}

std::optional<metrics::HttpAnswer> Probes::not_serving() const {
  switch (phase_.load(std::memory_order_acquire)) {
    case kStarting: return metrics::HttpAnswer{503, "starting: the control loop does not run yet\n"};
    case kStopping: return metrics::HttpAnswer{503, "stopping\n"};
    default: return std::nullopt;
  }
}

metrics::HttpAnswer Probes::on_control(std::function<metrics::HttpAnswer()> fn) {
  // Shared with the posted command, which may run after this probe gave up on it.
  struct Wait {
    std::mutex mu;
    std::condition_variable cv;
    std::optional<metrics::HttpAnswer> answer;
  };
  if (pending_.fetch_add(1) >= kMaxPending) {
    const int pending = pending_.fetch_sub(1) - 1;
    return {503, fmt::format("control loop not answering: {} probes still wait for it\n", pending)};
  }
  auto wait = std::make_shared<Wait>();
  boost::asio::post(io_, [this, wait, fn = std::move(fn)] {
    metrics::HttpAnswer a = fn();
    pending_.fetch_sub(1);
    {
      std::lock_guard lock(wait->mu);
      wait->answer = std::move(a);
    }
    wait->cv.notify_all();
  });
  const auto deadline = std::chrono::milliseconds(deadline_ms_.load(std::memory_order_relaxed));
  std::unique_lock lock(wait->mu);
  if (!wait->cv.wait_for(lock, deadline, [&] { return wait->answer.has_value(); }))
    return {503, fmt::format("control loop did not answer within {} ms\n", deadline.count())};
  return *wait->answer;
}

metrics::HttpAnswer Probes::liveness() {
  if (auto a = not_serving()) return *a;
  if (const auto stalled = stalled_(); !stalled.empty())
    return {503, fmt::format("stalled: {} (busy inside one pass past the watchdog's threshold)\n", joined(stalled))};
  return on_control([] { return metrics::HttpAnswer{200, "ok\n"}; });
}

metrics::HttpAnswer Probes::readiness() {
  if (auto a = not_serving()) return *a;
  return on_control([this] {
    const Readiness r = judge_readiness(input_());
    if (!r.ready) return metrics::HttpAnswer{503, "not ready: " + joined(r.reasons) + "\n"};
    return metrics::HttpAnswer{200, r.reasons.empty() ? std::string("ready\n") : "ready: " + joined(r.reasons) + "\n"};
  });
}

}  // namespace rdmad::daemon
