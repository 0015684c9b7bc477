#pragma once
// The systemd watchdog that means it: WATCHDOG=1 is sent only while every watched thread (the
// control io_context, soft NIC datapaths, the flow engine) is making progress or idle by choice.
// A thread busy inside one pass for longer than the threshold is stalled (base::StallDetector):
// the daemon logs an error naming it, stops pinging (systemd then kills and restarts the service)
// and exports rdmad_thread_stalled{thread} and rdmad_thread_busy_seconds{thread}.
//
// The checks and pings run on a thread of their own, because a stalled datapath also holds up the
// control thread the moment it waits for that datapath (a counter read, a QP change): the stall is
// still named. The control thread is watched like the others, through a timer on its io_context
// that beats every tick (it has no idle state: a missed beat is a stall). docs/operations.md,
// "Watchdog".
#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <prometheus/collectable.h>

#include "rdmad/base/heartbeat.h"
#include "rdmad/base/stall_detector.h"
#include "rdmad/base/status.h"

namespace rdmad::daemon {

class Watchdog {
 public:
  // Runs a command on a watched thread and returns when it has run (the stall test hook).
  using RunOn = std::function<void(const std::function<void()>&)>;

  // `ping` sends WATCHDOG=1; `ping_interval` is systemd's WATCHDOG_USEC / 2, zero when systemd
  // asked for no watchdog (the threads are still checked and exported, every second). The stall
  // threshold is the ping interval (half the watchdog timeout), or 10 s without one.
  Watchdog(boost::asio::io_context& io, std::chrono::microseconds ping_interval, std::function<void()> ping);
  ~Watchdog();  // stop(), then waits for test stalls in flight (they end on their own)
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

  /// Watches a thread by `name` (unique; "datapath:nic0", "flow-engine"). `run_on` may be empty.
  void watch(std::string name, const base::Heartbeat* heartbeat, RunOn run_on);
  /// Watches the control thread too ("control"; the stall hook posts onto its io_context), pings
  /// now and then on every tick while no thread is stalled.
  void start();
  /// Stops checking and pinging (the daemon is stopping: its io_context no longer runs).
  void stop();
  /// Test hook (--enable-test-hooks): the named thread spins, busy, for `seconds`. Returns at once.
  base::Status stall_for_test(const std::string& name, uint32_t seconds);
  /// The watched threads stalled as of the last check (any thread: the liveness probe asks).
  std::vector<std::string> stalled() const;
  /// The names watched, in order.
  std::vector<std::string> thread_names() const;
  /// rdmad_thread_stalled and rdmad_thread_busy_seconds (register with the exporter).
  std::shared_ptr<prometheus::Collectable> collector() const { return collector_; }

 private:
  class Collector;
  void tick();
  void arm_control_beat();
  void monitor();

  boost::asio::steady_timer timer_;  // the control thread's beat
  base::Heartbeat control_beat_;
  uint64_t control_beats_ = 0;
  const std::chrono::microseconds ping_interval_;
  const std::chrono::microseconds tick_interval_;
  std::function<void()> ping_;
  mutable std::mutex mu_;  // detector_ and run_on_: the control thread and a scrape
  base::StallDetector detector_;
  std::vector<std::pair<std::string, RunOn>> run_on_;
  std::vector<bool> reported_;  // parallel to the detector's threads: its stall is logged
  std::vector<std::thread> stalls_;  // test hooks in flight
  std::mutex stop_mu_;
  std::condition_variable stop_cv_;
  bool stopping_ = false;  // under stop_mu_
  std::thread monitor_;
  std::shared_ptr<prometheus::Collectable> collector_;
};

}  // namespace rdmad::daemon
