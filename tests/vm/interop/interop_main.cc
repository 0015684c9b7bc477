// vm_interop_peer: one side of the RoCEv2 interop test between the soft backend and Linux's rxe
// (tests/vm/guest/interop_rxe.sh runs both). Both sides go through the project's verbs interface.
//
//   soft side (host, in the harness's namespace):
//     vm_interop_peer --soft ADDRESS --listen ADDRESS:PORT --phases clean,lossy,ecn
//                     [--udp-offload 0|1] [--expect-max-mtu N] [--timeout S]
//   or a dpdk NIC there (a net_af_packet port on the harness's tap; its own address, whose ARP it
//   answers itself, beside the kernel's on the tap, where the channel listens):
//     vm_interop_peer --dpdk ADDRESS --devargs DEVARGS --listen ADDRESS:PORT --phases ...
//   rxe side (guest):
//     vm_interop_peer --rdma-core DEVICE --connect ADDRESS:PORT --phase NAME [--timeout S]
//
// The rxe side connects once per phase (the guest changes its qdiscs between phases); the soft
// side serves the phases named, in that order, and exits after the last.
// At the end of a phase the soft side checks its NIC's counters and sends them; the rxe side checks
// rxe's hw_counters against them (checks.cc). Exit 0 when everything passed.
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "channel.h"
#include "checks.h"
#include "counters.h"
#include "peer.h"
#include "plan.h"
#include "rdmad/verbs/rdma_core/rdma_core_backend.h"
#include "rdmad/verbs/soft/soft_backend.h"
#ifdef RDMAD_VM_HAVE_DPDK
#include "rdmad/verbs/dpdk/dpdk_backend.h"
#endif
#include "session.h"

namespace rdmad::vm {
namespace {

using verbs::Status;

struct Options {
  std::string soft_address;  // --soft, or --dpdk's
  bool dpdk = false;         // --dpdk: the host side is a dpdk NIC on --devargs
  std::string devargs;
  std::string device;        // --rdma-core
  std::string listen;        // host:port
  std::string connect;
  std::vector<std::string> phases;
  bool udp_offload = false;
  uint32_t expect_max_mtu = 0;
  int timeout_s = 240;
};

bool split_host_port(const std::string& s, std::string* host, int* port) {
  const auto colon = s.rfind(':');
  if (colon == std::string::npos) return false;
  *host = s.substr(0, colon);
  *port = std::stoi(s.substr(colon + 1));
  return true;
}

std::vector<std::string> split_commas(const std::string& s) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= s.size()) {
    const size_t comma = s.find(',', start);
    out.push_back(s.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

bool parse(int argc, char** argv, Options* o) {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string { return i + 1 < argc ? argv[++i] : ""; };
    if (a == "--soft") {
      o->soft_address = value();
    } else if (a == "--dpdk") {
      o->soft_address = value();
      o->dpdk = true;
    } else if (a == "--devargs") {
      o->devargs = value();
    } else if (a == "--rdma-core")
      o->device = value();
    else if (a == "--listen")
      o->listen = value();
    else if (a == "--connect")
      o->connect = value();
    else if (a == "--phases" || a == "--phase")
      o->phases = split_commas(value());
    else if (a == "--udp-offload")
      o->udp_offload = value() == "1";
    else if (a == "--expect-max-mtu")
      o->expect_max_mtu = static_cast<uint32_t>(std::stoul(value()));
    else if (a == "--timeout")
      o->timeout_s = std::stoi(value());
    else
      return false;
  }
  const bool soft = !o->soft_address.empty();
  return soft != !o->device.empty() && o->dpdk != o->devargs.empty() &&
         (soft ? !o->listen.empty() : !o->connect.empty() && o->phases.size() == 1);
}

int report(const char* side, const std::vector<std::string>& failures) {
  for (const auto& f : failures) std::fprintf(stderr, "interop: %s: FAIL: %s\n", side, f.c_str());
  return failures.empty() ? 0 : 1;
}

std::string hello(const std::string& phase, uint32_t mtu, const RegionInfo& r) {
  return "hello " + phase + " " + std::to_string(mtu) + " " + std::to_string(r.addr) + " " +
         std::to_string(r.rkey);
}

bool parse_hello(const std::string& line, std::string* phase, uint32_t* mtu, RegionInfo* r) {
  const auto w = words(line);
  if (w.size() != 5 || w[0] != "hello") return false;
  *phase = w[1];
  *mtu = static_cast<uint32_t>(std::stoul(w[2]));
  r->addr = std::stoull(w[3]);
  r->rkey = static_cast<uint32_t>(std::stoul(w[4]));
  return true;
}

// The soft side: one session per phase, in the order given.
int serve(const Options& o, Peer& peer, Clock::time_point deadline) {
  std::string host, err;
  int port = 0;
  if (!split_host_port(o.listen, &host, &port)) return 2;
  Listener listener(host, port, &err);
  if (!listener.valid()) return report("soft", {err});
  std::vector<std::string> failures;
  for (size_t p = 0; p < o.phases.size(); ++p) {
    auto ch = listener.accept(deadline, &err);
    if (!ch) return report("soft", {"phase " + o.phases[p] + ": " + err});
    auto line = ch->receive(deadline, &err);
    std::string name;
    uint32_t guest_mtu = 0;
    RegionInfo remote;
    if (!line || !parse_hello(*line, &name, &guest_mtu, &remote))
      return report("soft", {"bad hello: " + err});
    if (name != o.phases[p])
      return report("soft", {"the guest runs phase " + name + ", expected " + o.phases[p]});
    const uint32_t mtu = std::min(guest_mtu, peer.port().active_mtu_bytes);
    if (o.expect_max_mtu != 0 && mtu != o.expect_max_mtu) {
      failures.push_back("largest path MTU both accept is " + std::to_string(mtu) + ", expected " +
                         std::to_string(o.expect_max_mtu) + " (soft " +
                         std::to_string(peer.port().active_mtu_bytes) + ", rxe " + std::to_string(guest_mtu) +
                         ")");
    }
    ch->send(hello(name, mtu, peer.region()));
    const CounterMap before = soft_counters(peer.counters());
    const Status st = run_phase(peer, *ch, make_phase(name, mtu), true, remote, deadline);
    if (!st.ok()) {
      std::printf("interop: soft: %s: counters at the failure: %s\n", name.c_str(),
                  to_line(delta(before, soft_counters(peer.counters()))).c_str());
      return report("soft", {st.message()});
    }
    if (auto end = ch->receive(deadline, &err); !end || *end != "end")
      return report("soft", {"no end: " + err});
    const CounterMap d = delta(before, soft_counters(peer.counters()));
    std::printf("interop: soft: %s: counters: %s\n", name.c_str(), to_line(d).c_str());
    std::fflush(stdout);
    ch->send("counters " + to_line(d, true));
    for (auto& f : check_soft(name, d)) failures.push_back(name + ": " + f);
  }
  return report("soft", failures);
}

// The rxe side: one phase.
int run_guest(const Options& o, Peer& peer, Clock::time_point deadline) {
  std::string host, err;
  int port = 0;
  if (!split_host_port(o.connect, &host, &port)) return 2;
  auto ch = Channel::connect(host, port, deadline, &err);
  if (!ch) return report("rxe", {err});
  const std::string counters_dir = "/sys/class/infiniband/" + o.device + "/ports/1/hw_counters";
  const CounterMap before = read_hw_counters(counters_dir);
  if (before.empty()) return report("rxe", {"cannot read " + counters_dir});
  ch->send(hello(o.phases[0], peer.port().active_mtu_bytes, peer.region()));
  std::string name;
  uint32_t mtu = 0;
  RegionInfo remote;
  auto line = ch->receive(deadline, &err);
  if (!line || !parse_hello(*line, &name, &mtu, &remote)) return report("rxe", {"bad hello: " + err});
  const Status st = run_phase(peer, *ch, make_phase(name, mtu), false, remote, deadline);
  if (!st.ok()) {
    std::printf("interop: rxe: %s: counters at the failure: %s\n", name.c_str(),
                to_line(delta(before, read_hw_counters(counters_dir))).c_str());
    return report("rxe", {st.message()});
  }
  ch->send("end");
  auto counters = ch->receive(deadline, &err);
  if (!counters || counters->rfind("counters", 0) != 0)
    return report("rxe", {"no counters from the soft side: " + err});
  const CounterMap soft = from_line(*counters);
  const CounterMap d = delta(before, read_hw_counters(counters_dir));
  std::printf("interop: rxe: %s: counters: %s\n", name.c_str(), to_line(d).c_str());
  std::fflush(stdout);
  return report("rxe", check_rxe(name, d, soft));
}

}  // namespace
}  // namespace rdmad::vm

int main(int argc, char** argv) {
  using namespace rdmad;
  vm::Options o;
  if (!vm::parse(argc, argv, &o)) {
    std::fprintf(stderr, "usage: see the top of tests/vm/interop/interop_main.cc\n");
    return 2;
  }
  const auto deadline = vm::Clock::now() + std::chrono::seconds(o.timeout_s);
  verbs::BackendRegistry registry;
  verbs::soft::register_backend(registry);
  verbs::rdma_core::register_backend(registry);
#ifdef RDMAD_VM_HAVE_DPDK
  verbs::dpdk::register_backend(registry);
#endif
  verbs::DeviceConfig cfg;
  const bool soft = !o.soft_address.empty();
  if (soft) {
    cfg.address = o.soft_address;
    cfg.backend_options["udp_port"] = 4791;
    if (o.dpdk) {
      cfg.backend_options["devargs"] = o.devargs;
      cfg.backend_options["mtu"] = 9000;  // net_af_packet reports 1500 whatever the tap carries
    } else {
      cfg.backend_options["udp_offload"] = o.udp_offload;
    }
    cfg.backend_options["cc_enabled"] = true;  // the notification point answers the guest's CE marks (phase ecn)
  } else {
    cfg.name = o.device;
  }
  vm::Peer peer;
  const std::string backend = !soft ? "rdma_core" : o.dpdk ? "dpdk" : "soft";
  if (registry.find(backend) == nullptr) {
    std::fprintf(stderr, "interop: SKIP: backend %s is not built in\n", backend.c_str());
    return 77;
  }
  if (auto st = peer.open(registry, backend, cfg); !st.ok()) {
    std::fprintf(stderr, "interop: %s\n", st.message().c_str());
    return 1;
  }
  std::printf("interop: %s side: %s, port mtu %u\n", soft ? "soft" : "rxe",
              peer.port().gid.to_ip_string().c_str(), peer.port().active_mtu_bytes);
  std::fflush(stdout);
  return soft ? vm::serve(o, peer, deadline) : vm::run_guest(o, peer, deadline);
}
