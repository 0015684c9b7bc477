#include "dpdk_options.h"

#include "eal.h"
#include "rdmad/verbs/dpdk/dpdk_backend.h"

namespace rdmad::verbs::dpdk {
namespace {

std::string mac_or_empty(const std::string& s) {
  return s.empty() || parse_mac(s) ? "" : "a MAC address (02:00:00:00:00:01), or empty";
}

std::string ip_or_empty(const std::string& s) {
  return s.empty() || parse_ip(s) ? "" : "an IPv4 or IPv6 address, or empty";
}

std::vector<OptionSpec> make_table() {
  const DpdkPortConfig d;
  std::vector<OptionSpec> t;
  t.push_back(OptionSpec::text("devargs", d.devargs,
               "The port, as rte_dev_probe takes it (required): a PCI address (0000:3b:00.0, with its PMD's "
               "arguments after a comma) or a virtual device (net_af_packet0,iface=eth1,framesz=4352,blocksz=69632; "
               "net_memif0,role=client,socket=/run/memif.sock; a memif port gets bsize=4352,rsize=12 unless "
               "given, one 4096-slot ring entry per frame, and its server end must be up before a client opens). "
               "Hot-plugged when the NIC opens, removed when it closes.",
               nullptr, "DPDK device arguments"));
  t.push_back(OptionSpec::text("eal_args", kDefaultEalArgs,
               "Arguments of rte_eal_init, which the first dpdk NIC of the process runs (one EAL per process: "
               "every dpdk NIC gives the same, or empty to take the running EAL's). A --file-prefix unique to the "
               "process and one lcore (-l, the first CPU the process may use) are added unless given. The default "
               "needs no hugepages and scans no PCI bus; a NIC bound to vfio-pci wants hugepages and no --no-pci "
               "(docs/verbs.md, \"The dpdk backend\").",
               nullptr, "EAL arguments"));
  t.push_back(OptionSpec::integer("udp_port", int64_t{d.udp_port}, 1, 65535,
               "UDP port of the NIC's RoCEv2 endpoint (4791 is the IANA RoCEv2 port)."));
  t.push_back(OptionSpec::integer("mbufs", int64_t{d.mbufs}, 1023, int64_t{1} << 20,
               "Packet buffers of the NIC's pool (each about 4.5 KiB, from the EAL's memory): enough for every rx "
               "and tx descriptor of every queue, plus the packets in flight between queues."));
  t.push_back(OptionSpec::integer("descriptors", int64_t{d.descriptors}, 64, 16384,
               "Rx and tx descriptors per queue (the PMD may round them)."));
  t.push_back(OptionSpec::text("mac", d.mac,
               "The NIC's MAC address; empty takes the port's. Another one is set on the port, or the port is put "
               "in promiscuous mode where it cannot take it.",
               mac_or_empty, "a MAC address (02:00:00:00:00:01), or empty"));
  t.push_back(OptionSpec::text("neighbors", d.neighbors,
               "Peers' MAC addresses that need no ARP or neighbour discovery: ip=mac,ip=mac (IPv4 or IPv6); other "
               "peers are resolved on the link, and their packets dropped (the engine resends them) until they are.",
               check_neighbors, "a list of ip=mac (10.0.0.2=02:00:00:00:00:02,...), or empty"));
  t.push_back(OptionSpec::text("gateway", d.gateway,
               "The router every peer not in neighbors is reached through (its MAC resolved by ARP or neighbour "
               "discovery), for routed fabrics; empty: every peer is on the link.",
               ip_or_empty, "an IPv4 or IPv6 address, or empty"));
  t.push_back(OptionSpec::integer("mtu", int64_t{d.mtu}, 0, 65535,
               "IP MTU of the link in bytes; 0 takes the port's. Set on the port where the PMD can; where it cannot "
               "(net_memif has none, net_af_packet reports 1500 whatever its interface carries) the link is taken "
               "to carry it. The NIC's active MTU is the largest RoCE MTU whose packets fit."));
  t.push_back(OptionSpec::integer("idle_poll_us", int64_t{d.idle_poll_us}, 1, 100000,
               "Where the PMD has no rx interrupts (net_memif, net_af_packet), how long an idle datapath thread "
               "first naps between looks at its queue; the naps double up to idle_poll_max_us while nothing "
               "arrives, so an idle NIC costs little CPU, and the first packet after a quiet spell waits that long."));
  t.push_back(OptionSpec::integer("idle_poll_max_us", int64_t{d.idle_poll_max_us}, 1, 1000000,
               "The longest nap of an idle polled queue (see idle_poll_us)."));
  t.push_back(OptionSpec::boolean("rx_interrupts", d.rx_interrupts,
               "Sleep on the port's rx interrupts where the PMD has them (NICs bound to vfio-pci); false polls "
               "as for PMDs without them."));
  t.push_back(OptionSpec::boolean("zero_copy_tx", d.zero_copy_tx,
               "Attach payloads to frames in place (an external mbuf segment) instead of copying them, where the "
               "PMD has copied the frame when rte_eth_tx_burst returns (net_memif, net_af_packet) and sends "
               "multi-segment frames; other PMDs always get a copy."));
  for (OptionSpec& s : engine::engine_options()) t.push_back(std::move(s));
  return t;
}

}  // namespace

const std::vector<OptionSpec>& option_table() {
  static const std::vector<OptionSpec> table = make_table();
  return table;
}

Result<DpdkConfig> dpdk_config(const DeviceConfig& config) {
  auto parsed = OptionValues::parse("dpdk", option_table(), config.backend_options);
  if (!parsed.ok()) return parsed.status();
  const OptionValues& o = parsed.value();
  DpdkConfig c;
  c.engine = engine::engine_config(config, o, "dpdk");
  DpdkPortConfig& p = c.port;
  p.address = config.address;
  p.devargs = o.text("devargs");
  p.eal_args = o.text("eal_args");
  // The table's ranges make every narrowing below exact.
  p.udp_port = static_cast<uint16_t>(o.integer("udp_port"));
  p.mbufs = static_cast<uint32_t>(o.integer("mbufs"));
  p.descriptors = static_cast<uint32_t>(o.integer("descriptors"));
  p.mac = o.text("mac");
  p.neighbors = o.text("neighbors");
  p.gateway = o.text("gateway");
  p.mtu = static_cast<uint32_t>(o.integer("mtu"));
  p.idle_poll_us = static_cast<uint32_t>(o.integer("idle_poll_us"));
  p.idle_poll_max_us = static_cast<uint32_t>(o.integer("idle_poll_max_us"));
  p.rx_interrupts = o.boolean("rx_interrupts");
  p.zero_copy_tx = o.boolean("zero_copy_tx");
  return c;
}

}  // namespace rdmad::verbs::dpdk
