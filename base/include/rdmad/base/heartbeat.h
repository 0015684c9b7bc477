#pragma once
// A thread's heartbeat: one word its owner writes and anyone may read, 2 × the passes the thread
// has started, plus 1 while a pass runs. A thread that is between passes (waiting for work, by
// choice) shows an even word; one stuck inside a pass shows the same odd word for as long as it
// is stuck. The daemon's watchdog (StallDetector, stall_detector.h) tells the two apart; the soft
// NIC's deregistration also waits on it for the pass in progress (verbs/soft).
//
// Cost: one store per pass and one before the thread waits (seq_cst, which the soft NIC's
// deregistration needs: docs/architecture.md, "Heartbeats").
#include <atomic>
#include <cstdint>

namespace rdmad::base {

class Heartbeat {
 public:
  /// The owning thread: pass number `passes` (counted by the owner) begins.
  void busy(uint64_t passes) noexcept { word_.store(passes * 2 + 1, std::memory_order_seq_cst); }
  /// The owning thread: it finished pass `passes` and waits for work (or stops).
  void idle(uint64_t passes) noexcept { word_.store(passes * 2, std::memory_order_seq_cst); }
  /// Any thread: the word now.
  uint64_t load(std::memory_order order = std::memory_order_seq_cst) const noexcept { return word_.load(order); }
  static constexpr bool is_busy(uint64_t word) noexcept { return (word & 1) != 0; }

 private:
  std::atomic<uint64_t> word_{0};
};

}  // namespace rdmad::base
