// vm_ecn_loop: DCQCN closed through a marker the project did not write. Two soft NICs in one guest,
// each in a network namespace of its own (the guest's own has rxe on UDP 4791), joined by a veth
// pair whose A side leaves through tbf + RED with ECN (tests/vm/guest/ecn_red.sh): A WRITEs to B faster than
// the link drains, the kernel's RED marks CE, B's notification point sends CNPs, A's reaction point cuts its
// rate and, once the transfer is over, recovers to line rate.
//
//   vm_ecn_loop --a ADDRESS --a-netns NAME --b ADDRESS --b-netns NAME [--line-rate-mbps N]
//               [--profile tcg|mlx5] [--messages N] [--bytes N] [--timeout S]
//
// Profile "tcg" (the default) is the SIGCOMM'15 profile with its timers scaled to the guest's
// round trips: TCG makes a round trip ~1-2 ms where the paper's 55 µs assume a few µs (DCQCN.md:
// recovery timers must scale with the RTT). "mlx5" runs the firmware defaults as they are; with a
// 1 µs alpha timer and CNPs a millisecond apart, alpha is ~0 at every CNP and the cuts are tiny
// (docs/dcqcn.md, "The loop through a real marker").
//
// Checks (exit 1 naming each failure): every byte delivered; B counted CE-marked packets and sent
// CNPs; A handled every CNP B sent (the reverse path has no qdisc); A's DCQCN rate fell below half
// the line rate during the transfer and was back at line rate afterwards. Prints
// "ecn_loop: marked=N" for the script to compare with RED's own count.
#include <fcntl.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "counters.h"
#include "peer.h"
#include "rdmad/verbs/soft/soft_backend.h"

namespace rdmad::vm {
namespace {

using Clock = std::chrono::steady_clock;
using verbs::Status;

struct Options {
  std::string a, a_netns, b, b_netns;
  uint32_t line_rate_mbps = 100;
  std::string profile = "tcg";
  uint32_t messages = 8;
  uint32_t bytes = 256 * 1024 + 3;
  int timeout_s = 120;
};

bool parse(int argc, char** argv, Options* o) {
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i], v = argv[i + 1];
    if (k == "--a")
      o->a = v;
    else if (k == "--b")
      o->b = v;
    else if (k == "--a-netns")
      o->a_netns = v;
    else if (k == "--b-netns")
      o->b_netns = v;
    else if (k == "--line-rate-mbps")
      o->line_rate_mbps = static_cast<uint32_t>(std::stoul(v));
    else if (k == "--profile")
      o->profile = v;
    else if (k == "--messages")
      o->messages = static_cast<uint32_t>(std::stoul(v));
    else if (k == "--bytes")
      o->bytes = static_cast<uint32_t>(std::stoul(v));
    else if (k == "--timeout")
      o->timeout_s = std::stoi(v);
    else
      return false;
  }
  return (argc % 2) == 1 && (o->profile == "tcg" || o->profile == "mlx5") && !o->a.empty() && !o->b.empty() &&
         !o->a_netns.empty() && !o->b_netns.empty();
}

// Runs `fn` with this thread in the named network namespace (ip netns add), then returns to the
// one it came from: sockets keep the namespace they were made in.
Status in_netns(const std::string& name, const std::function<Status()>& fn) {
  const int home = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
  const int there = open(("/run/netns/" + name).c_str(), O_RDONLY | O_CLOEXEC);
  if (home < 0 || there < 0 || setns(there, CLONE_NEWNET) != 0)
    return Status::error("cannot enter netns " + name);
  Status st = fn();
  if (setns(home, CLONE_NEWNET) != 0) st = Status::error("cannot leave netns " + name);
  close(home);
  close(there);
  return st;
}

// The paper's profile on the guest's time scale: 40x its timers (55 µs -> 2.2 ms, the NP's 50 µs
// -> 2 ms), the additive step scaled from 40 Mb/s at 40 Gb/s to this line rate (at least 1 Mb/s),
// and no byte counter: on a lossy queue it would count the bytes the queue drops as progress.
cc::DcqcnParams tcg_params(uint32_t line_rate_mbps) {
  cc::DcqcnParams p = cc::paper_profile();
  constexpr uint32_t kScale = 40;
  p.alpha_timer_us *= kScale;
  p.increase_timer_us *= kScale;
  p.np_cnp_interval_us *= kScale;
  p.byte_counter_bytes = 0;
  p.rate_ai_mbps = std::max<uint32_t>(1, line_rate_mbps / 1000);
  return p;
}

verbs::DeviceConfig nic_config(const std::string& address, const Options& o) {
  verbs::DeviceConfig c;
  c.address = address;
  c.backend_options["udp_port"] = 4791;
  c.backend_options["cc_enabled"] = true;
  c.backend_options["line_rate_mbps"] = o.line_rate_mbps;
  // One packet per datagram: RED then counts (and marks) exactly the packets the NP counts. With
  // UDP_SEGMENT a run that fits the tbf's burst reaches RED whole and one mark covers all of it.
  c.backend_options["udp_offload"] = false;
  c.dcqcn = o.profile == "mlx5" ? cc::mlx5_profile() : tcg_params(o.line_rate_mbps);
  return c;
}

int run(const Options& o) {
  const auto deadline = Clock::now() + std::chrono::seconds(o.timeout_s);
  verbs::BackendRegistry registry;
  verbs::soft::register_backend(registry);
  Peer a, b;
  std::vector<std::string> failures;
  auto check = [&](const Status& st) {
    if (!st.ok()) failures.push_back(st.message());
    return st.ok();
  };
  if (!check(in_netns(o.a_netns, [&] { return a.open(registry, "soft", nic_config(o.a, o)); })) ||
      !check(in_netns(o.b_netns, [&] { return b.open(registry, "soft", nic_config(o.b, o)); })) ||
      !check(a.create_qp(0x10000)) || !check(b.create_qp(0x20000)) ||
      !check(a.connect(b.local(), 1024, 18)) || !check(b.connect(a.local(), 1024, 18))) {
    for (const auto& f : failures) std::fprintf(stderr, "ecn_loop: FAIL: %s\n", f.c_str());
    return 1;
  }
  const CounterMap a0 = soft_counters(a.counters()), b0 = soft_counters(b.counters());
  const Case c{verbs::WrOpcode::kRdmaWrite, o.bytes, o.messages, true};
  const uint64_t seed = 0xEC0;
  check(b.prepare(c, seed));
  // A's reaction point, sampled while the WRITEs are in flight.
  std::atomic<bool> done{false};
  double min_rate = o.line_rate_mbps;
  std::thread sampler([&] {
    while (!done.load()) {
      for (const auto& s : a.dcqcn_samples()) min_rate = std::min(min_rate, s.rate_mbps);
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
  });
  const auto start = Clock::now();
  check(a.initiate(c, seed, b.region(), deadline));
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  done = true;
  sampler.join();
  check(b.check(c, seed, deadline));
  // Recovery: with no more CNPs the timer raises the rate back to line rate (mlx5 profile: 300 µs
  // steps of 5 Mb/s after one fast-recovery step, so tens of milliseconds from a few Mb/s).
  double rate = 0;
  const auto recover_by = std::min(deadline, Clock::now() + std::chrono::seconds(5));
  while (Clock::now() < recover_by) {
    const auto s = a.dcqcn_samples();
    rate = s.empty() ? 0 : s[0].rate_mbps;
    if (rate >= o.line_rate_mbps) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  const CounterMap da = delta(a0, soft_counters(a.counters())), db = delta(b0, soft_counters(b.counters()));
  const double mbps = 8.0 * c.size * c.count / seconds / 1e6;
  std::printf(
      "ecn_loop: %u x %u B in %.2f s (%.1f Mb/s); A's rate: min %.1f Mb/s, after %.1f Mb/s (line %u)\n",
      c.count, c.size, seconds, mbps, min_rate, rate, o.line_rate_mbps);
  std::printf("ecn_loop: A counters: %s\necn_loop: B counters: %s\n", to_line(da).c_str(),
              to_line(db).c_str());
  std::printf("ecn_loop: marked=%llu\n",
              static_cast<unsigned long long>(at(db, "np_ecn_marked_roce_packets")));
  if (at(db, "np_ecn_marked_roce_packets") == 0) failures.push_back("B counted no CE-marked packet");
  if (at(db, "np_cnp_sent") == 0) failures.push_back("B's notification point sent no CNP");
  if (at(da, "rp_cnp_handled") != at(db, "np_cnp_sent")) {
    failures.push_back("A handled " + std::to_string(at(da, "rp_cnp_handled")) + " CNPs, B sent " +
                       std::to_string(at(db, "np_cnp_sent")));
  }
  if (min_rate >= o.line_rate_mbps / 2.0) failures.push_back("A's rate never fell below half the line rate");
  if (rate < o.line_rate_mbps)
    failures.push_back("A's rate did not recover to line rate (" + std::to_string(rate) + ")");
  for (const char* n :
       {"drop_bad_icrc", "drop_malformed", "drop_truncated", "drop_unknown_qp", "drop_wrong_source"}) {
    if (at(da, n) + at(db, n) != 0) failures.push_back(std::string(n) + " is not 0");
  }
  for (const auto& f : failures) std::fprintf(stderr, "ecn_loop: FAIL: %s\n", f.c_str());
  return failures.empty() ? 0 : 1;
}

}  // namespace
}  // namespace rdmad::vm

int main(int argc, char** argv) {
  rdmad::vm::Options o;
  if (!rdmad::vm::parse(argc, argv, &o)) {
    std::fprintf(stderr, "usage: see the top of tests/vm/interop/ecn_loop_main.cc\n");
    return 2;
  }
  return rdmad::vm::run(o);
}
