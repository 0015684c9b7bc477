// The daemon's file descriptors as a budget: every client connection costs one, every flow three
// (its ring's memfd and two eventfds), every GPU registration one (its dma-buf). Whatever local
// clients can make the daemon hold is taken from it first and refused, with a clear error, when it
// is spent — so no client can exhaust the descriptors the daemon needs for everyone else (its
// NICs, peers, the metrics endpoint, the next accept). Thread-safe.
#pragma once

#include <atomic>
#include <cstdint>

namespace rdmad::clients {

class FdBudget {
 public:
  /// Raises RLIMIT_NOFILE's soft limit to the hard one (best effort) and keeps `reserve` of it
  /// for the daemon's own use. Returns the limit now in force.
  static uint64_t raise_fd_limit();

  FdBudget() = default;
  /// `limit` descriptors in all, `reserve` of which clients never get.
  FdBudget(uint64_t limit, uint64_t reserve) { set(limit, reserve); }
  void set(uint64_t limit, uint64_t reserve) {
    available_.store(limit > reserve ? limit - reserve : 0, std::memory_order_relaxed);
    total_ = limit > reserve ? limit - reserve : 0;
  }
  /// Takes n descriptors; false (nothing taken) when fewer are left.
  bool take(uint64_t n) {
    uint64_t have = available_.load(std::memory_order_relaxed);
    while (have >= n) {
      if (available_.compare_exchange_weak(have, have - n, std::memory_order_relaxed)) return true;
    }
    return false;
  }
  void give(uint64_t n) { available_.fetch_add(n, std::memory_order_relaxed); }
  uint64_t available() const { return available_.load(std::memory_order_relaxed); }
  /// What clients may use in all.
  uint64_t total() const { return total_; }

 private:
  std::atomic<uint64_t> available_{UINT64_MAX / 2};
  uint64_t total_ = UINT64_MAX / 2;
};

/// Descriptors one flow holds in the daemon.
inline constexpr uint64_t kFdsPerFlow = 3;
/// Kept for the daemon's own use: NIC sockets, peer connections, the metrics endpoint, the
/// acceptors' spare descriptor, files it opens.
inline constexpr uint64_t kFdReserve = 256;

}  // namespace rdmad::clients
