#include "datapath.h"

#include <poll.h>
#include <pthread.h>
#include <sys/eventfd.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <ctime>
#include <stdexcept>
#include <string>

namespace rdmad::verbs::engine {
namespace {

roce::IpAddr relay_ip(const EngineConfig& c) {
  roce::IpAddr a;
  const auto gid = Gid::from_ip(c.relay_address);
  if (!gid) return a;
  if (gid->is_ipv4_mapped()) {
    std::memcpy(a.bytes.data(), gid->raw.data() + 12, 4);
    return a;
  }
  return roce::IpAddr::from_v6(gid->raw);
}

}  // namespace

Datapath::Datapath(Nic& nic, uint32_t index, PortQueue& queue)
    : nic_(nic),
      index_(index),
      queue_(queue),
      payload_in_place_(nic.port().offloads().payload_in_place),
      cc_enabled_(nic.config().cc_enabled),
      dcqcn_(nic.config().dcqcn),
      relay_ip_(relay_ip(nic.config())),
      relay_port_(nic.config().relay_address.empty() ? 0 : nic.config().relay_udp_port),
      rp_(nic.config().dcqcn, nic.config().line_rate_mbps),
      np_(nic.config().dcqcn),
      pacer_(nic.config().line_rate_mbps),
      qps_((nic.numbering().table() + nic.datapath_count() - 1) / nic.datapath_count()),
      wheel_(kWheelSlotNs, 0, cc::TimingWheel::kMaxLevels, queue.now_ns()),
      posted_(static_cast<uint32_t>(qps_.size())) {
  event_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (event_fd_ < 0) throw std::runtime_error(std::string("engine nic: eventfd: ") + std::strerror(errno));
  active_.reserve(qps_.size());
}

Datapath::~Datapath() {
  stop();
  close(event_fd_);
}

void Datapath::start() {
  thread_ = std::thread([this] {
    // Named so operators (and the benchmarks) can find the datapath threads in top/ps/proc:
    // rdmad-soft3 (one thread), rdmad-soft3.1 (the second of several).
    std::string name = "rdmad-" + nic_.config().backend.substr(0, 4) + std::to_string(nic_.id());
    if (nic_.datapath_count() > 1) name += "." + std::to_string(index_);
    pthread_setname_np(pthread_self(), name.substr(0, 15).c_str());
    prctl(PR_SET_TIMERSLACK, 1UL);  // pacing and retransmission deadlines are µs-scale
    loop();
  });
  commands_.attach(thread_.get_id());
}

void Datapath::stop() {
  if (!thread_.joinable()) return;
  stop_.store(true);
  doorbell_seq_.fetch_add(1);
  uint64_t one = 1;
  [[maybe_unused]] ssize_t r = write(event_fd_, &one, sizeof one);
  thread_.join();
  commands_.detach();
}

void Datapath::doorbell() {
  doorbell_seq_.fetch_add(1);
  if (sleeping_.load()) {
    uint64_t one = 1;
    [[maybe_unused]] ssize_t r = write(event_fd_, &one, sizeof one);
  }
}

void Datapath::loop() {
  const EngineConfig& config = nic_.config();
  TimeNs last_work = queue_.now_ns();
  uint64_t seen_seq = 0;
  const TimeNs spin_ns = static_cast<TimeNs>(config.busy_poll_us) * 1000;
  const TimeNs completion_spin_ns = static_cast<TimeNs>(config.completion_spin_us) * 1000;
  TimeNs spin_until = 0;
  while (!stop_.load(std::memory_order_relaxed)) {
    TimeNs now = queue_.now_ns();
    loop_now_ = now;
    const uint64_t completions_before = completions_pushed_;
    const uint64_t tx_before = counters_.tx_packets;
    const uint64_t rx_before = counters_.rx_packets;
    ++passes_;
    // seq_cst: ordered before this pass's key lookups, against remove_mr's clear of a key.
    pass_state_.busy(passes_);
    bool work = commands_.drain();
    work |= rx_burst(now);
    const uint64_t seq_before_tx = doorbell_seq_.load();  // collect_posted sees every post counted here
    collect_posted();
    // Timers first: a retransmit timeout or a pacing departure due now sends in this pass's rounds.
    fire_timers(now);
    bool tx_drained = false;  // a round found nothing to send: every QP is out of work, window or tokens
    work |= transmit(now, &tx_drained);
    flush_tx();
    uint64_t seq = doorbell_seq_.load();
    if (seq != seen_seq) {
      seen_seq = seq;
      work = true;
    }
    if (completions_pushed_ != completions_before) {
      spin_until = now + completion_spin_ns;
    } else if (counters_.tx_packets != tx_before) {
      spin_until = 0;  // the reply went out: leave the core to whoever receives it
    }
    // A request/response pass (at most one packet in, exactly one out) with nothing left to send
    // and no post since requester_tx looked counts as idle: sleep now instead of spending a pass (a
    // receive call) on finding the queue empty; the sleep returns at once if a packet arrived
    // meanwhile. Bulk passes keep going: there the next receive usually finds data (and sleeping
    // early may have cost throughput on shared cores; BENCHMARKS.md, "Sleeping after the reply").
    const bool exchange_done = spin_ns == 0 && tx_drained && seq == seq_before_tx &&
                               counters_.rx_packets - rx_before <= 1 && counters_.tx_packets - tx_before == 1;
    if (work && !exchange_done) {
      last_work = now;
    } else if (now < spin_until) {
#if defined(__x86_64__) || defined(__i386__)
      __builtin_ia32_pause();
#endif
    } else if (now - last_work >= spin_ns) {
      idle_wait(now, wheel_.next_expiry_hint_ns(), seen_seq);
      last_work = queue_.now_ns();
    }
  }
  pass_state_.idle(passes_);
}

void Datapath::add_counters(NicCounters& c) const {
  const LiveCounters& l = counters_;
  c.np_ecn_marked_roce_packets += l.np_ecn_marked_roce_packets;
  c.np_cnp_sent += l.np_cnp_sent;
  c.rp_cnp_handled += l.rp_cnp_handled;
  c.rp_cnp_ignored += l.rp_cnp_ignored;
  c.out_of_sequence += l.out_of_sequence;
  c.packet_seq_err += l.packet_seq_err;
  c.local_ack_timeout_err += l.local_ack_timeout_err;
  c.duplicate_request += l.duplicate_request;
  c.rnr_nak_retry_err += l.rnr_nak_retry_err;
  c.req_remote_access_errors += l.req_remote_access_errors;
  c.resp_remote_access_errors += l.resp_remote_access_errors;
  c.implied_nak_seq_err += l.implied_nak_seq_err;
  c.tx_packets += l.tx_packets;
  c.rx_packets += l.rx_packets;
  c.tx_bytes += l.tx_bytes;
  c.rx_bytes += l.rx_bytes;
  for (size_t i = 0; i < kRxDropReasons; ++i) {
    c.rx_dropped_by_reason[i] += l.rx_dropped_by_reason[i];
    c.rx_dropped += l.rx_dropped_by_reason[i];
  }
  c.retransmitted_packets += l.retransmitted_packets;
  c.datapath_sleeps += l.datapath_sleeps;
  c.crc_at_post_packets += l.crc_at_post_packets;
  // The thread's CPU clock, read from whichever thread asks.
  clockid_t cpu_clock{};
  timespec ts{};
  if (thread_.joinable() && pthread_getcpuclockid(const_cast<std::thread&>(thread_).native_handle(), &cpu_clock) == 0 &&
      clock_gettime(cpu_clock, &ts) == 0) {
    c.datapath_cpu_ns += static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000u + static_cast<uint64_t>(ts.tv_nsec);
  }
}

void Datapath::wait_pass() const {
  // Either the pass in progress looked the key up after the clear (and missed), or this load sees
  // it running (odd) and the wait ends when it does. An even state: no pass runs, and the next
  // one misses the key.
  const uint64_t seen = pass_state_.load(std::memory_order_seq_cst);
  if ((seen & 1) == 0 || std::this_thread::get_id() == thread_.get_id()) return;  // a command: between lookups
  for (int looks = 0; pass_state_.load(std::memory_order_acquire) == seen; ++looks) {
    if (looks < 64) {
      sched_yield();
    } else {
      std::this_thread::sleep_for(std::chrono::microseconds(20));
    }
  }
}

void Datapath::idle_wait(TimeNs now, TimeNs next_deadline, uint64_t seen_seq) {
  // Out of the pass: nothing registered is touched until the next one (remove_mr need not wait).
  pass_state_.idle(passes_);
  sleeping_.store(true);
  TimeNs wait_ns = next_deadline == cc::kNever ? 100'000'000 : next_deadline - now;
  const int port_fd = queue_.wait_fd();
  // A queue that can only be polled is looked at again after its interval, whatever the timers say.
  if (port_fd < 0 && queue_.poll_interval_ns() > 0) wait_ns = std::min(wait_ns, queue_.poll_interval_ns());
  if (wait_ns > 0 && commands_.queued() == 0) {
    pollfd fds[2] = {{event_fd_, POLLIN, 0}, {port_fd, POLLIN, 0}};
    timespec ts{static_cast<time_t>(wait_ns / 1'000'000'000), static_cast<long>(wait_ns % 1'000'000'000)};
    // Posts that raced with going to sleep bumped doorbell_seq_ before reading sleeping_: the loop
    // notices them on its next pass, and the eventfd wakes us for later ones.
    const bool sleep = doorbell_seq_.load() == seen_seq;
    if (sleep) {
      ++counters_.datapath_sleeps;
      queue_.before_sleep();
      const int n = ppoll(fds, port_fd >= 0 ? 2 : 1, &ts, nullptr);
      queue_.after_sleep();
      if (n > 0 && (fds[0].revents & POLLIN) != 0) {
        // Only a doorbell leaves the eventfd readable: woken by a packet or the timer, skip the read.
        uint64_t v;
        [[maybe_unused]] ssize_t r = read(event_fd_, &v, sizeof v);
      }
    }
  }
  sleeping_.store(false);
}

}  // namespace rdmad::verbs::engine
