#include "rdmad/daemon/watchdog.h"

#include <algorithm>

#include <boost/asio/post.hpp>

#include "rdmad/base/log.h"
#include "rdmad/base/log_fields.h"
#include "rdmad/metrics/family_set.h"
#include "rdmad/metrics/metric.h"

namespace rdmad::daemon {
namespace {

using namespace std::chrono_literals;

constexpr metrics::Metric kThreadStalled{
    "rdmad_thread_stalled",
    "1 while the thread is busy inside one pass without progress for longer than the watchdog's threshold "
    "(the daemon then stops pinging systemd's watchdog), else 0",
    metrics::Kind::kGauge};
constexpr metrics::Metric kThreadBusy{"rdmad_thread_busy_seconds",
                                      "How long the thread has been busy inside one pass without progress, as of "
                                      "the watchdog's last check; 0 while it progresses or waits for work",
                                      metrics::Kind::kGauge};

std::chrono::microseconds tick_for(std::chrono::microseconds ping) {
  return ping.count() > 0 ? std::min<std::chrono::microseconds>(ping, 1s) : std::chrono::microseconds(1s);
}

base::StallDetector::Duration threshold_for(std::chrono::microseconds ping) {
  return ping.count() > 0 ? base::StallDetector::Duration(ping) : base::StallDetector::Duration(10s);
}

}  // namespace

class Watchdog::Collector final : public prometheus::Collectable {
 public:
  explicit Collector(const Watchdog& w) : w_(w) {}
  std::vector<prometheus::MetricFamily> Collect() const override {
    metrics::FamilySet set;
    std::lock_guard lock(w_.mu_);
    for (const auto& s : w_.detector_.states()) set.add(kThreadStalled, {{"thread", s.name}}, s.stalled ? 1 : 0);
    for (const auto& s : w_.detector_.states())
      set.add(kThreadBusy, {{"thread", s.name}}, std::chrono::duration<double>(s.busy_without_progress).count());
    return set.take();
  }

 private:
  const Watchdog& w_;
};

Watchdog::Watchdog(boost::asio::io_context& io, std::chrono::microseconds ping_interval, std::function<void()> ping)
    : timer_(io),
      ping_interval_(ping_interval),
      tick_interval_(tick_for(ping_interval)),
      ping_(std::move(ping)),
      detector_(threshold_for(ping_interval)),
      collector_(std::make_shared<Collector>(*this)) {}

Watchdog::~Watchdog() {
  stop();
  for (auto& t : stalls_) t.join();
}

void Watchdog::watch(std::string name, const base::Heartbeat* heartbeat, RunOn run_on) {
  std::lock_guard lock(mu_);
  detector_.add(name, heartbeat, std::chrono::steady_clock::now());
  run_on_.emplace_back(std::move(name), std::move(run_on));
  reported_.push_back(false);
}

void Watchdog::start() {
  control_beat_.busy(++control_beats_);
  // The hook's busy loop is posted and returns at once: it must not wait on the thread it stalls.
  watch("control", &control_beat_,
        [this](const std::function<void()>& fn) { boost::asio::post(timer_.get_executor(), fn); });
  auto log = log::get(log::Component::kDaemon);
  std::string names;
  for (const auto& n : thread_names()) names += (names.empty() ? "" : ",") + n;
  log->info("watchdog threads={} stall_after_ms={} systemd_ping_ms={}", base::q(names),
            std::chrono::duration_cast<std::chrono::milliseconds>(detector_.threshold()).count(),
            ping_interval_.count() / 1000);
  if (ping_interval_.count() > 0) ping_();
  arm_control_beat();
  monitor_ = std::thread([this] { monitor(); });
}

void Watchdog::stop() {
  timer_.cancel();
  {
    std::lock_guard lock(stop_mu_);
    stopping_ = true;
  }
  stop_cv_.notify_all();
  if (monitor_.joinable()) monitor_.join();
}

void Watchdog::arm_control_beat() {
  // Four beats per check: a beat a little late never looks like a stall (the threshold is a tick).
  timer_.expires_after(tick_interval_ / 4);
  timer_.async_wait([this](const boost::system::error_code& ec) {
    if (ec) return;
    control_beat_.busy(++control_beats_);
    arm_control_beat();
  });
}

void Watchdog::monitor() {
  std::unique_lock lock(stop_mu_);
  while (!stop_cv_.wait_for(lock, tick_interval_, [this] { return stopping_; })) {
    lock.unlock();
    tick();
    lock.lock();
  }
}

void Watchdog::tick() {
  auto log = log::get(log::Component::kDaemon);
  bool stalled = false;
  {
    std::lock_guard lock(mu_);
    const auto& states = detector_.check(std::chrono::steady_clock::now());
    for (size_t i = 0; i < states.size(); ++i) {
      const auto& s = states[i];
      const double busy_s = std::chrono::duration<double>(s.busy_without_progress).count();
      if (s.stalled && !reported_[i]) {
        // Once per stall, where it is detected: systemd's kill follows when the watchdog is on.
        log->error("thread stalled thread={} busy_without_progress_s={:.1f} systemd_watchdog={}", s.name, busy_s,
                   ping_interval_.count() > 0 ? "not-pinged" : "off");
      } else if (!s.stalled && reported_[i]) {
        log->warn("thread progresses again thread={}", s.name);
      }
      reported_[i] = s.stalled;
      stalled |= s.stalled;
    }
  }
  if (!stalled && ping_interval_.count() > 0) ping_();
}

base::Status Watchdog::stall_for_test(const std::string& name, uint32_t seconds) {
  RunOn run;
  {
    std::lock_guard lock(mu_);
    for (const auto& [n, r] : run_on_)
      if (n == name) run = r;
    if (!run) {
      std::string names;
      for (const auto& [n, r] : run_on_)
        if (r) names += (names.empty() ? "" : ", ") + n;
      return base::Status::error("no thread named '" + name + "' can be stalled (threads: " + names + ")");
    }
  }
  log::get(log::Component::kDaemon)->warn("test hook stalls thread thread={} seconds={}", name, seconds);
  // The command blocks its caller until it has run, so a thread of its own waits for it; the
  // watched thread spins inside its pass (busy, no progress) for the whole time.
  stalls_.emplace_back([run = std::move(run), seconds] {
    run([seconds] {
      const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
      while (std::chrono::steady_clock::now() < end) {
      }
    });
  });
  return base::Status::success();
}

std::vector<std::string> Watchdog::stalled() const {
  std::lock_guard lock(mu_);
  std::vector<std::string> names;
  for (const auto& s : detector_.states())
    if (s.stalled) names.push_back(s.name);
  return names;
}

std::vector<std::string> Watchdog::thread_names() const {
  std::lock_guard lock(mu_);
  std::vector<std::string> names;
  for (const auto& [n, r] : run_on_) names.push_back(n);
  return names;
}

}  // namespace rdmad::daemon
