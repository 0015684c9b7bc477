#include "soft_options.h"

#include "rdmad/verbs/soft/soft_backend.h"

namespace rdmad::verbs::soft {
namespace {

std::vector<OptionSpec> make_table() {
  const UdpPortConfig d;
  std::vector<OptionSpec> t;
  t.push_back(OptionSpec::integer("udp_port", int64_t{d.udp_port}, 0, 65535,
               "UDP port of the NIC's RoCEv2 endpoint (4791 is the IANA RoCEv2 port; soft: 0 picks a free one)."));
  t.push_back(OptionSpec::integer("socket_buffer_bytes", int64_t{d.socket_buffer_bytes}, 4096, int64_t{1} << 30,
               "SO_SNDBUF and SO_RCVBUF of the NIC's UDP sockets (the kernel caps them at net.core.wmem_max and "
               "rmem_max)."));
  t.push_back(OptionSpec::integer("source_ports", int64_t{d.source_ports}, 0, 64,
               "UDP source ports (49152-65535, drawn at random) the NIC's QPs send from, per datapath thread, each "
               "QP pair fixed to one by a hash of the QP numbers, so ECMP in the fabric spreads QPs over paths as it "
               "does for hardware RoCE NICs; 0 sends everything from udp_port."));
  t.push_back(OptionSpec::boolean("udp_offload", d.udp_offload,
               "UDP segmentation offload: runs of packets cross the kernel as one buffer (UDP_SEGMENT on send, "
               "UDP_GRO on receive). Where the kernel splits a run for an interface without the offload, the "
               "packets' IP ids count up from 0; soft NICs cannot see the id and take it as 0 in the ICRC, hardware "
               "RoCE NICs include it, so set false when this NIC exchanges traffic with hardware RoCE NICs."));
  for (OptionSpec& s : engine::engine_options()) t.push_back(std::move(s));
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
  c.engine = engine::engine_config(config, o, "soft");
  c.port.address = config.address;
  // The table's ranges make every narrowing below exact.
  c.port.udp_port = static_cast<uint16_t>(o.integer("udp_port"));
  c.port.socket_buffer_bytes = static_cast<uint32_t>(o.integer("socket_buffer_bytes"));
  c.port.source_ports = static_cast<uint32_t>(o.integer("source_ports"));
  c.port.udp_offload = o.boolean("udp_offload");
  return c;
}

}  // namespace rdmad::verbs::soft
