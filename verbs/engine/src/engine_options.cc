// The engine's own options, which every engine backend (soft, dpdk) puts in its table beside its
// port's.
#include <bit>

#include "datapath.h"
#include "rdmad/verbs/engine/engine.h"
#include "rdmad/verbs/types.h"

namespace rdmad::verbs::engine {
namespace {

std::string ip_or_empty(const std::string& s) {
  return s.empty() || Gid::from_ip(s) ? "" : "an IPv4 or IPv6 address, or empty";
}

}  // namespace

std::vector<OptionSpec> engine_options() {
  const EngineConfig d;
  std::vector<OptionSpec> t;
  t.push_back(OptionSpec::integer("line_rate_mbps", int64_t{d.line_rate_mbps}, 1, 1000000,
               "Port speed in Mb/s: what the port reports and the line rate DCQCN paces up to."));
  t.push_back(OptionSpec::boolean("cc_enabled", d.cc_enabled,
               "Run DCQCN in software (reaction point pacing every QP, notification point sending CNPs); false "
               "sends at line rate and ignores CE marks (tests, A/B)."));
  t.push_back(OptionSpec::text("relay_address", d.relay_address,
               "The relay in front of this NIC when peers reach it through one (an rdmad-fabric port): a relay "
               "forwards from its own address and relay_udp_port, so QPs accept exactly that source besides their "
               "peer's; empty: no relay. Every packet's ICRC is verified either way (a relay re-seals what it "
               "forwards).",
               ip_or_empty, "an IPv4 or IPv6 address, or empty"));
  t.push_back(OptionSpec::integer("relay_udp_port", int64_t{d.relay_udp_port}, 0, 65535,
               "UDP port the relay forwards from (required with relay_address)."));
  t.push_back(OptionSpec::integer("busy_poll_us", int64_t{d.busy_poll_us}, 0, 1000000,
               "Microseconds a datapath thread keeps polling after its last work before it sleeps: shortens round "
               "trips when it has a core of its own, lengthens them when cores are shared."));
  t.push_back(OptionSpec::integer("completion_spin_us", int64_t{d.completion_spin_us}, 0, 1000000,
               "Microseconds the datapath keeps polling after handing completions to a CQ (or until it sends again) "
               "for the work the application posts in reply, so a request/response costs one wake-up per "
               "direction; worth 10-50 us where the datapath thread has a core to itself, harmful on "
               "oversubscribed cores."));
  t.push_back(OptionSpec::boolean("crc_at_post", d.crc_at_post,
               "The thread posting a SEND or WRITE of 16 KiB or more computes its payload CRCs, which the datapath "
               "combines into each packet's ICRC instead of reading the payload twice (moves about a tenth of the "
               "requester's work onto the posting thread); false: the datapath computes every ICRC."));
  t.push_back(OptionSpec::integer("datapath_threads", int64_t{d.datapath_threads}, 1, kMaxDatapathThreads,
               "Datapath threads of the NIC, each with its own share of the QPs and its own queue of the port "
               "(soft: a socket of a SO_REUSEPORT group that steers by destination QP; dpdk: an rx/tx queue), so "
               "one NIC can use several cores. A QP's traffic stays on one thread: more threads help NICs with "
               "many busy QPs (flows with qps_per_lane > 1, many peers)."));
  t.push_back(OptionSpec::integer("max_qps", int64_t{d.max_qps}, kMinQps, kMaxQpsLimit,
               "Queue pairs the NIC can hold (rounded up to a power of two). The low log2(max_qps) bits of a QP "
               "number index the QP table and the other bits of the 24 are random, so a smaller table makes QP "
               "numbers harder to guess (8 random bits at 65536, 14 at 1024); idle QPs cost no datapath time."));
  return t;
}

EngineConfig engine_config(const DeviceConfig& config, const OptionValues& o, std::string backend) {
  EngineConfig c;
  c.backend = std::move(backend);
  c.name = config.name;
  c.address = config.address;
  c.dcqcn = config.dcqcn;
  // The table's ranges make every narrowing below exact.
  c.line_rate_mbps = static_cast<uint32_t>(o.integer("line_rate_mbps"));
  c.cc_enabled = o.boolean("cc_enabled");
  c.relay_address = o.text("relay_address");
  c.relay_udp_port = static_cast<uint16_t>(o.integer("relay_udp_port"));
  c.busy_poll_us = static_cast<uint32_t>(o.integer("busy_poll_us"));
  c.completion_spin_us = static_cast<uint32_t>(o.integer("completion_spin_us"));
  c.crc_at_post = o.boolean("crc_at_post");
  c.datapath_threads = static_cast<uint32_t>(o.integer("datapath_threads"));
  c.max_qps = std::bit_ceil(static_cast<uint32_t>(o.integer("max_qps")));
  return c;
}

}  // namespace rdmad::verbs::engine
