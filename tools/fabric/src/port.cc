#include "port.h"

#include <poll.h>
#include <sys/prctl.h>

#include <algorithm>
#include <cstring>
#include <ctime>

#include "rdmad/roce/headers.h"

namespace rdmad::fabric {
namespace {

constexpr int64_t kMaxSleepNs = 10'000'000;     // re-check the stop flag at least this often
constexpr int64_t kPublishEveryNs = 1'000'000;  // stats snapshot period
constexpr int64_t kSpinBelowNs = 5'000;         // closer deadlines are not worth a sleep
constexpr size_t kMaxRxBatchesPerLoop = 8;
constexpr int64_t kLateNs = 1'000'000;  // a departure this far behind schedule is "late"      // bounded so a
                                        // flood cannot starve the drain

int64_t mono_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

// Descriptors for a buffer full of the smallest RoCEv2 datagrams (an ACK is 20 bytes).
size_t max_packets(uint64_t buffer_bytes) { return static_cast<size_t>(buffer_bytes / 20 + 64); }

}  // namespace

Port::Port(const PortConfig& config)
    : config_(config),
      socket_(config.listen, config.name.c_str()),
      ring_(config.buffer_bytes + 2 * kMaxDatagramBytes, max_packets(config.buffer_bytes)),
      tx_(config.forward),
      resealer_(socket_.local_endpoint(), config.forward),
      red_(config.red, config.seed * 4 + 0),
      loss_rng_(config.seed * 4 + 1),
      dup_rng_(config.seed * 4 + 2),
      reorder_rng_(config.seed * 4 + 3),
      ip_udp_overhead_bytes_(config.listen.family() == AF_INET6 ? 48 : 28),
      held_(kMaxDatagramBytes) {
  bound_ = socket_.local_endpoint();
}

Port::~Port() { stop(); }

void Port::start() {
  if (thread_.joinable()) return;
  stop_.store(false);
  thread_ = std::thread([this] { run(); });
}

void Port::stop() {
  stop_.store(true);
  if (thread_.joinable()) thread_.join();
}

PortStats Port::stats() const {
  std::lock_guard lock(published_mu_);
  return published_;
}

int64_t Port::wire_ns(size_t datagram_bytes) const {
  if (config_.rate_bps == 0) return 0;
  const uint64_t bits = (datagram_bytes + ip_udp_overhead_bytes_) * 8;
  return static_cast<int64_t>(bits * 1'000'000'000ull / config_.rate_bps);
}

void Port::run() {
  // Sleeps end within a microsecond of the deadline instead of the default 50 µs slack.
  prctl(PR_SET_TIMERSLACK, 1000UL, 0, 0, 0);
  while (!stop_.load(std::memory_order_relaxed)) {
    int64_t now = mono_ns();
    receive(now);
    transmit(now);
    publish(now);
    now = mono_ns();
    const int64_t wait_ns = next_deadline_ns(now) - now;
    if (wait_ns <= kSpinBelowNs) continue;
    pollfd p{socket_.fd(), POLLIN, 0};
    const timespec ts{static_cast<time_t>(wait_ns / 1'000'000'000),
                      static_cast<long>(wait_ns % 1'000'000'000)};
    ppoll(&p, 1, &ts, nullptr);
  }
  publish(mono_ns() + kPublishEveryNs);
}

void Port::receive(int64_t now_ns) {
  for (size_t b = 0; b < kMaxRxBatchesPerLoop; ++b) {
    const size_t n = rx_.receive(socket_);
    for (size_t i = 0; i < n; ++i) {
      ReceivedDatagram d = rx_.get(i);
      ++local_.rx_packets;
      local_.rx_bytes += d.data.size();
      if (d.truncated) {
        ++local_.drops_oversize;
        continue;
      }
      if ((d.tos & roce::kEcnMask) == roce::kEcnCe) ++local_.ce_received;
      // Before any impairment, so a duplicate is a copy of the re-sealed datagram.
      if (resealer_.reseal(d.data, d.from, d.to)) {
        ++local_.resealed;
      } else {
        ++local_.not_resealed;
      }
      // Draw every stream for every datagram so each decision depends only on the arrival index.
      const bool opcode = config_.drop_opcode >= 0 && !d.data.empty() && d.data[0] == config_.drop_opcode &&
                          opcode_seen_++ >= config_.drop_opcode_after;
      const bool lose = loss_rng_() < config_.loss || opcode;
      const bool dup = dup_rng_() < config_.duplicate;
      if (lose) {
        ++local_.drops_loss;
        continue;
      }
      admit(d.data, d.tos, now_ns);
      if (dup) {
        ++local_.duplicated;
        admit(d.data, d.tos, now_ns);
      }
    }
    if (n < kIoBatch) break;
  }
}

void Port::admit(std::span<const uint8_t> data, uint8_t tos, int64_t now_ns) {
  if (ring_.bytes() + data.size() > config_.buffer_bytes || !ring_.push(data, tos, now_ns)) {
    ++local_.drops_buffer;
    return;
  }
  local_.queue_peak_bytes = std::max<uint64_t>(local_.queue_peak_bytes, ring_.bytes());
}

void Port::transmit(int64_t now_ns) {
  while (!ring_.empty()) {
    const QueuedPacket& p = ring_.front();
    // Store-and-forward: a datagram leaves when the link has finished serialising it. Scheduling
    // from the link's own timeline (not from when this loop ran) keeps the long-run rate exact
    // even when the thread wakes late.
    const int64_t finish = std::max(link_free_ns_, p.arrival_ns) + wire_ns(p.len);
    if (finish > now_ns) break;
    if (now_ns - finish > kLateNs && config_.rate_bps != 0) ++local_.late_departures;
    link_free_ns_ = finish;
    // Marking at dequeue sees the queue including this datagram. An unlimited port never builds a
    // real queue (what sits in the ring is one receive batch), so it never marks.
    const uint64_t q = config_.rate_bps == 0 ? 0 : ring_.bytes();
    if (q <= config_.red.kmin_bytes) {
      ++local_.departures_below_kmin;
    } else if (q <= config_.red.kmax_bytes) {
      ++local_.departures_between;
    } else {
      ++local_.departures_above_kmax;
    }
    uint8_t tos = p.tos;
    const uint8_t ecn = tos & roce::kEcnMask;
    if (config_.ecn && ecn != roce::kEcnNotEct && ecn != roce::kEcnCe && red_.should_mark(q)) {
      tos |= roce::kEcnCe;
      ++local_.marked;
    }
    const bool hold = reorder_rng_() < config_.reorder;
    if (hold && !holding_) {
      std::memcpy(held_.data(), ring_.data(p).data(), p.len);
      held_len_ = p.len;
      held_tos_ = tos;
      holding_ = true;
      held_deadline_ns_ = now_ns + static_cast<int64_t>(config_.reorder_hold_us) * 1000;
      ++local_.reordered;
      ring_.pop();
      continue;
    }
    send_front(tos);
  }
  if (holding_ && now_ns >= held_deadline_ns_) release_held();
  local_.tx_errors += tx_.flush(socket_);
  local_.queue_bytes = ring_.bytes();
  local_.queue_packets = ring_.packets();
}

void Port::send_front(uint8_t tos) {
  if (tx_.full()) local_.tx_errors += tx_.flush(socket_);
  const QueuedPacket& p = ring_.front();
  tx_.add(ring_.data(p), tos);
  ++local_.tx_packets;
  local_.tx_bytes += p.len;
  // The ring memory stays valid until the next push, which only happens after the flush below.
  ring_.pop();
  if (holding_) release_held();
}

void Port::release_held() {
  if (tx_.full()) local_.tx_errors += tx_.flush(socket_);
  tx_.add({held_.data(), held_len_}, held_tos_);
  ++local_.tx_packets;
  local_.tx_bytes += held_len_;
  holding_ = false;
  // Flush now: the hold buffer may be reused by the next reorder decision.
  local_.tx_errors += tx_.flush(socket_);
}

int64_t Port::next_deadline_ns(int64_t now_ns) const {
  int64_t t = now_ns + kMaxSleepNs;
  if (!ring_.empty()) {
    const QueuedPacket& p = ring_.front();
    t = std::min(t, std::max(link_free_ns_, p.arrival_ns) + wire_ns(p.len));
  }
  if (holding_) t = std::min(t, held_deadline_ns_);
  return t;
}

void Port::publish(int64_t now_ns) {
  if (now_ns - last_publish_ns_ < kPublishEveryNs) return;
  last_publish_ns_ = now_ns;
  std::lock_guard lock(published_mu_);
  published_ = local_;
}

}  // namespace rdmad::fabric
