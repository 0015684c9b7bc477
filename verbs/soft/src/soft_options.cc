#include "soft_options.h"

#include "rdmad/verbs/soft/soft_backend.h"
#include "rdmad/verbs/types.h"

namespace rdmad::verbs::soft {
namespace {

std::string ip_or_empty(const std::string& s) {
  return s.empty() || Gid::from_ip(s) ? "" : "an IPv4 or IPv6 address, or empty";
}

std::vector<OptionSpec> make_table() {
  const SoftConfig d;
  std::vector<OptionSpec> t;
  t.push_back(OptionSpec::integer("udp_port", int64_t{d.udp_port}, 0, 65535,
               "UDP port of the soft backend's RoCEv2 endpoint (4791 is the IANA RoCEv2 port; 0 picks a free one)."));
  t.push_back(OptionSpec::integer("line_rate_mbps", int64_t{d.line_rate_mbps}, 1, 1000000,
               "Port speed in Mb/s: what the port reports and the line rate DCQCN paces up to."));
  t.push_back(OptionSpec::boolean("cc_enabled", d.cc_enabled,
               "Run DCQCN in software (reaction point pacing every QP, notification point sending CNPs); false "
               "sends at line rate and ignores CE marks (tests, A/B)."));
  t.push_back(OptionSpec::integer("socket_buffer_bytes", int64_t{d.socket_buffer_bytes}, 4096, int64_t{1} << 30,
               "SO_SNDBUF and SO_RCVBUF of the NIC's UDP socket (the kernel caps them at net.core.wmem_max and "
               "rmem_max)."));
  t.push_back(OptionSpec::integer("source_ports", int64_t{d.source_ports}, 0, 64,
               "UDP source ports (49152-65535, drawn at random) the NIC's QPs send from, each QP pair fixed to one by "
               "a hash of the QP numbers, so ECMP in the fabric spreads QPs over paths as it does for hardware RoCE "
               "NICs; 0 sends everything from udp_port."));
  t.push_back(OptionSpec::text("relay_address", d.relay_address,
               "The relay in front of this NIC when peers reach it through one (an rdmad-fabric port): a relay "
               "forwards from its own address and relay_udp_port, so QPs accept exactly that source besides their "
               "peer's; empty: no relay. Every packet's ICRC is verified either way (a relay re-seals what it "
               "forwards).",
               ip_or_empty, "an IPv4 or IPv6 address, or empty"));
  t.push_back(OptionSpec::integer("relay_udp_port", int64_t{d.relay_udp_port}, 0, 65535,
               "UDP port the relay forwards from (required with relay_address)."));
  t.push_back(OptionSpec::integer("busy_poll_us", int64_t{d.busy_poll_us}, 0, 1000000,
               "Microseconds the datapath thread keeps polling after its last work before it sleeps: shortens round "
               "trips when it has a core of its own, lengthens them when cores are shared."));
  t.push_back(OptionSpec::integer("completion_spin_us", int64_t{d.completion_spin_us}, 0, 1000000,
               "Microseconds the datapath keeps polling after handing completions to a CQ (or until it sends again) "
               "for the work the application posts in reply, so a request/response costs one wake-up per "
               "direction; worth 10-50 us where the datapath thread has a core to itself, harmful on "
               "oversubscribed cores."));
  t.push_back(OptionSpec::boolean("udp_offload", d.udp_offload,
               "UDP segmentation offload: runs of packets cross the kernel as one buffer (UDP_SEGMENT on send, "
               "UDP_GRO on receive). Where the kernel splits a run for an interface without the offload, the "
               "packets' IP ids count up from 0; soft NICs cannot see the id and take it as 0 in the ICRC, hardware "
               "RoCE NICs include it, so set false when this NIC exchanges traffic with hardware RoCE NICs."));
  t.push_back(OptionSpec::boolean("crc_at_post", d.crc_at_post,
               "The thread posting a SEND or WRITE of 16 KiB or more computes its payload CRCs, which the datapath "
               "combines into each packet's ICRC instead of reading the payload twice (moves about a tenth of the "
               "requester's work onto the posting thread); false: the datapath computes every ICRC."));
  return t;
}

}  // namespace

const std::vector<OptionSpec>& option_table() {
  static const std::vector<OptionSpec> table = make_table();
  return table;
}

Result<SoftConfig> soft_config(const DeviceConfig& config) {
  auto parsed = OptionValues::parse("soft", option_table(), config.backend_options);
  if (!parsed.ok()) return parsed.status();
  const OptionValues& o = parsed.value();
  SoftConfig c;
  c.name = config.name;
  c.address = config.address;
  c.dcqcn = config.dcqcn;
  // The table's ranges make every narrowing below exact.
  c.udp_port = static_cast<uint16_t>(o.integer("udp_port"));
  c.line_rate_mbps = static_cast<uint32_t>(o.integer("line_rate_mbps"));
  c.cc_enabled = o.boolean("cc_enabled");
  c.socket_buffer_bytes = static_cast<uint32_t>(o.integer("socket_buffer_bytes"));
  c.source_ports = static_cast<uint32_t>(o.integer("source_ports"));
  c.relay_address = o.text("relay_address");
  c.relay_udp_port = static_cast<uint16_t>(o.integer("relay_udp_port"));
  c.busy_poll_us = static_cast<uint32_t>(o.integer("busy_poll_us"));
  c.completion_spin_us = static_cast<uint32_t>(o.integer("completion_spin_us"));
  c.udp_offload = o.boolean("udp_offload");
  c.crc_at_post = o.boolean("crc_at_post");
  return c;
}

}  // namespace rdmad::verbs::soft
