#include "soft_nic.h"

#include <poll.h>
#include <pthread.h>
#include <sys/prctl.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <ctime>
#include <random>
#include <stdexcept>
#include <string>

namespace rdmad::verbs::soft {
namespace {

std::atomic<uint32_t> g_next_nic_id{1};

TimeNs now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

[[noreturn]] void fail(const std::string& what) {
  throw std::runtime_error("soft nic: " + what + ": " + std::strerror(errno));
}

roce::IpAddr to_ip_addr(const Gid& gid) {
  if (gid.is_ipv4_mapped()) {
    roce::IpAddr a;
    std::memcpy(a.bytes.data(), gid.raw.data() + 12, 4);
    return a;
  }
  return roce::IpAddr::from_v6(gid.raw);
}

void set_buffer(int fd, int opt_force, int opt, uint32_t bytes) {
  int v = static_cast<int>(bytes);
  // The *FORCE variants pass rmem_max/wmem_max when we have CAP_NET_ADMIN; fall back otherwise.
  if (setsockopt(fd, SOL_SOCKET, opt_force, &v, sizeof v) != 0) setsockopt(fd, SOL_SOCKET, opt, &v, sizeof v);
}

// A UDP socket that sends ECT(0) by default, reads the TOS of what it receives, and (IPv4) sets DF.
roce::IpAddr nic_address(const std::string& address) {
  auto gid = Gid::from_ip(address);
  if (!gid) throw std::runtime_error("soft nic: bad address '" + address + "'");
  return to_ip_addr(*gid);
}

int open_udp_socket(bool v6, uint32_t send_buffer_bytes, uint32_t receive_buffer_bytes) {
  int fd = socket(v6 ? AF_INET6 : AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) fail("socket");
  int one = 1;
  int tos = roce::kEcnEct0;
  if (v6) {
    setsockopt(fd, IPPROTO_IPV6, IPV6_RECVTCLASS, &one, sizeof one);
    setsockopt(fd, IPPROTO_IPV6, IPV6_TCLASS, &tos, sizeof tos);
  } else {
    setsockopt(fd, IPPROTO_IP, IP_RECVTOS, &one, sizeof one);
    setsockopt(fd, IPPROTO_IP, IP_TOS, &tos, sizeof tos);
    // DF set and IP id 0: what compute_icrc assumes for the headers the kernel builds.
    int pmtu = IP_PMTUDISC_DO;
    setsockopt(fd, IPPROTO_IP, IP_MTU_DISCOVER, &pmtu, sizeof pmtu);
  }
  set_buffer(fd, SO_SNDBUFFORCE, SO_SNDBUF, send_buffer_bytes);
  set_buffer(fd, SO_RCVBUFFORCE, SO_RCVBUF, receive_buffer_bytes);
  return fd;
}

constexpr uint32_t kSourcePortCount = 65536 - kSourcePortMin;
constexpr int kBindAttempts = 32;


}  // namespace

SoftNic::SoftNic(const SoftConfig& config)
    : config_(config),
      id_(g_next_nic_id.fetch_add(1)),
      local_ip_(nic_address(config.address)),
      fd_(open_udp_socket(local_ip_.v6, config.socket_buffer_bytes, config.socket_buffer_bytes)),
      rp_(config.dcqcn, config.line_rate_mbps),
      np_(config.dcqcn),
      pacer_(config.line_rate_mbps),
      // Receive as the kernel coalesced (UDP_GRO) only when sending coalesced too: a NIC with the
      // offload off behaves exactly like one on a kernel without it.
      tx_(local_ip_.v6, config.udp_offload && enable_udp_gro(fd_)),
      rx_(tx_.offload()),
      qps_(kMaxQps),
      wheel_(kWheelSlotNs, 0, cc::TimingWheel::kMaxLevels, now_ns()),
      mrs_(std::make_unique<MrEntry[]>(kMaxMrs)) {
  sockaddr_storage sa{};
  socklen_t len = make_sockaddr(local_ip_, config.udp_port, &sa);
  if (bind(fd_, reinterpret_cast<sockaddr*>(&sa), len) != 0) {
    int e = errno;
    close(fd_);
    errno = e;
    fail("bind " + config.address + ":" + std::to_string(config.udp_port));
  }
  len = sizeof sa;
  getsockname(fd_, reinterpret_cast<sockaddr*>(&sa), &len);
  roce::IpAddr bound;
  from_sockaddr(sa, &bound, &local_port_);
  main_source_ = {fd_, local_port_};
  if (!config.relay_address.empty()) {
    const auto relay = Gid::from_ip(config.relay_address);
    if (relay) relay_ip_ = to_ip_addr(*relay);
    if (!relay || relay_ip_.v6 != local_ip_.v6 || config.relay_udp_port == 0) {
      close(fd_);
      throw std::runtime_error("soft nic: relay " + config.relay_address + ":" + std::to_string(config.relay_udp_port) +
                               " is not an address of the nic's family with a port");
    }
    relay_port_ = config.relay_udp_port;
  }
  open_source_sockets();
  event_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (event_fd_ < 0) fail("eventfd");
  active_.reserve(kMaxQps);
  thread_ = std::thread([this] {
    // Named so operators (and the benchmarks) can find the datapath thread in top/ps/proc.
    std::string name = "rdmad-soft" + std::to_string(id_);
    pthread_setname_np(pthread_self(), name.c_str());
    prctl(PR_SET_TIMERSLACK, 1UL);  // pacing and retransmission deadlines are µs-scale
    loop();
  });
  commands_.attach(thread_.get_id());
}

SoftNic::~SoftNic() {
  stop_.store(true);
  doorbell_seq_.fetch_add(1);
  uint64_t one = 1;
  [[maybe_unused]] ssize_t r = write(event_fd_, &one, sizeof one);
  if (thread_.joinable()) thread_.join();
  commands_.detach();
  close(fd_);
  for (const SourceSocket& s : sources_) close(s.fd);
  close(event_fd_);
}

void SoftNic::open_source_sockets() {
  // Ports are drawn at random so the NICs of a host (and hosts) do not all pick the same ones; a
  // port in use is skipped. Fewer sockets than asked (a crowded port range) is not an error.
  std::minstd_rand rng(static_cast<uint32_t>(now_ns()) ^ (id_ * 2654435761u));
  for (uint32_t i = 0; i < config_.source_ports; ++i) {
    // Send-only: nothing is addressed to these ports, so they keep a small receive buffer.
    int fd = open_udp_socket(local_ip_.v6, config_.socket_buffer_bytes, 4096);
    bool bound = false;
    for (int attempt = 0; attempt < kBindAttempts && !bound; ++attempt) {
      const auto port = static_cast<uint16_t>(kSourcePortMin + rng() % kSourcePortCount);
      sockaddr_storage sa{};
      socklen_t len = make_sockaddr(local_ip_, port, &sa);
      if (bind(fd, reinterpret_cast<sockaddr*>(&sa), len) == 0) {
        sources_.push_back({fd, port});
        bound = true;
      }
    }
    if (!bound) {
      close(fd);
      break;
    }
  }
}

const SourceSocket& SoftNic::source_for(uint32_t qpn, uint32_t dest_qpn) const {
  if (sources_.empty()) return main_source_;
  // Fixed per QP pair, like the flow label hardware derives the source port from; mixed well enough
  // that the consecutive QP numbers of one application land on different sockets.
  uint64_t v = (static_cast<uint64_t>(qpn) << 32 | dest_qpn) * 0x9E3779B97F4A7C15ull;
  v ^= v >> 29;
  return sources_[(v >> 32) % sources_.size()];
}

void SoftNic::run(const std::function<void()>& fn) { commands_.run_sync(fn); }

void SoftNic::doorbell() {
  doorbell_seq_.fetch_add(1);
  if (sleeping_.load()) {
    uint64_t one = 1;
    [[maybe_unused]] ssize_t r = write(event_fd_, &one, sizeof one);
  }
}

void SoftNic::loop() {
  TimeNs last_work = now_ns();
  uint64_t seen_seq = 0;
  const TimeNs spin_ns = static_cast<TimeNs>(config_.busy_poll_us) * 1000;
  const TimeNs completion_spin_ns = static_cast<TimeNs>(config_.completion_spin_us) * 1000;
  TimeNs spin_until = 0;
  while (!stop_.load(std::memory_order_relaxed)) {
    TimeNs now = now_ns();
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
    // receive call) on finding the socket empty; ppoll returns at once if a packet arrived
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
      last_work = now_ns();
    }
  }
  pass_state_.idle(passes_);
}

NicCounters SoftNic::counters() const {
  const LiveCounters& l = counters_;
  NicCounters c;
  c.np_ecn_marked_roce_packets = l.np_ecn_marked_roce_packets;
  c.np_cnp_sent = l.np_cnp_sent;
  c.rp_cnp_handled = l.rp_cnp_handled;
  c.rp_cnp_ignored = l.rp_cnp_ignored;
  c.out_of_sequence = l.out_of_sequence;
  c.packet_seq_err = l.packet_seq_err;
  c.local_ack_timeout_err = l.local_ack_timeout_err;
  c.duplicate_request = l.duplicate_request;
  c.rnr_nak_retry_err = l.rnr_nak_retry_err;
  c.req_remote_access_errors = l.req_remote_access_errors;
  c.resp_remote_access_errors = l.resp_remote_access_errors;
  c.implied_nak_seq_err = l.implied_nak_seq_err;
  c.tx_packets = l.tx_packets;
  c.rx_packets = l.rx_packets;
  c.tx_bytes = l.tx_bytes;
  c.rx_bytes = l.rx_bytes;
  c.rx_dropped = 0;
  for (size_t i = 0; i < kRxDropReasons; ++i) {
    c.rx_dropped_by_reason[i] = l.rx_dropped_by_reason[i];
    c.rx_dropped += c.rx_dropped_by_reason[i];
  }
  c.retransmitted_packets = l.retransmitted_packets;
  c.datapath_sleeps = l.datapath_sleeps;
  c.crc_at_post_packets = l.crc_at_post_packets;
  // The datapath thread's CPU clock, read from whichever thread asks.
  clockid_t cpu_clock{};
  timespec ts{};
  if (thread_.joinable() && pthread_getcpuclockid(const_cast<std::thread&>(thread_).native_handle(), &cpu_clock) == 0 &&
      clock_gettime(cpu_clock, &ts) == 0) {
    c.datapath_cpu_ns = static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000u + static_cast<uint64_t>(ts.tv_nsec);
  }
  return c;
}

void SoftNic::idle_wait(TimeNs now, TimeNs next_deadline, uint64_t seen_seq) {
  // Out of the pass: nothing registered is touched until the next one (remove_mr need not wait).
  pass_state_.idle(passes_);
  sleeping_.store(true);
  TimeNs wait_ns = next_deadline == cc::kNever ? 100'000'000 : next_deadline - now;
  if (wait_ns > 0 && commands_.queued() == 0) {
    pollfd fds[2] = {{fd_, POLLIN, 0}, {event_fd_, POLLIN, 0}};
    timespec ts{static_cast<time_t>(wait_ns / 1'000'000'000), static_cast<long>(wait_ns % 1'000'000'000)};
    // Posts that raced with going to sleep bumped doorbell_seq_ before reading sleeping_: the loop
    // notices them on its next pass, and the eventfd wakes us for later ones.
    const bool sleep = doorbell_seq_.load() == seen_seq;
    if (sleep) ++counters_.datapath_sleeps;
    if (sleep && ppoll(fds, 2, &ts, nullptr) > 0 && (fds[1].revents & POLLIN) != 0) {
      // Only a doorbell leaves the eventfd readable: woken by a packet or the timer, skip the read.
      uint64_t v;
      [[maybe_unused]] ssize_t r = read(event_fd_, &v, sizeof v);
    }
  }
  sleeping_.store(false);
}

}  // namespace rdmad::verbs::soft
