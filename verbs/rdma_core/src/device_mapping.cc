#include "device_mapping.h"

#include "device_discovery.h"
#include "split_keys.h"

namespace rdmad::verbs::rdma_core {

namespace {

PortState to_port_state(int ib_state) {
  switch (ib_state) {
    case IBV_PORT_ACTIVE:
    case IBV_PORT_ACTIVE_DEFER:
      return PortState::kActive;
    case IBV_PORT_INIT:
    case IBV_PORT_ARMED:
      return PortState::kInit;
    default:
      return PortState::kDown;
  }
}

}  // namespace

verbs::PortInfo to_verbs_port(const PortInfo& port, const GidBytes& gid) {
  verbs::PortInfo out;
  out.port_num = static_cast<uint8_t>(port.port);
  out.state = to_port_state(port.state);
  out.link_layer =
      port.link_layer == LinkLayer::kInfiniBand ? verbs::LinkLayer::kInfiniband : verbs::LinkLayer::kEthernet;
  out.speed_mbps = static_cast<uint32_t>(port.rate_mbps);
  out.max_mtu_bytes = 4096;
  out.active_mtu_bytes = port.active_mtu_bytes;
  if (out.active_mtu_bytes == 0 && port.link_layer == LinkLayer::kEthernet) {
    out.active_mtu_bytes = roce_active_mtu(port.netdev_mtu);
  }
  out.gid.raw = gid;
  if (port.link_layer == LinkLayer::kInfiniBand) out.lid = port.lid;  // what a peer routes to
  return out;
}

void apply_port_attr(const ibv_port_attr& attr, verbs::PortInfo& out) {
  out.state = to_port_state(attr.state);
  out.link_layer = attr.link_layer == IBV_LINK_LAYER_INFINIBAND ? verbs::LinkLayer::kInfiniband
                                                                : verbs::LinkLayer::kEthernet;
  if (const uint32_t m = mtu_bytes(attr.max_mtu); m != 0) out.max_mtu_bytes = m;
  if (const uint32_t m = mtu_bytes(attr.active_mtu); m != 0) out.active_mtu_bytes = m;
  if (out.link_layer == verbs::LinkLayer::kInfiniband) out.lid = attr.lid;
}

NicCounters to_nic_counters(const nic_cc::PortCounters* port, const nic_cc::HwCounters* hw) {
  NicCounters c;
  // The mlx5 name, or else the counter of the same meaning under the driver's own name.
  auto hwv = [&](std::string_view name, std::string_view alias = {}) -> uint64_t {
    if (hw == nullptr) return 0;
    if (auto v = hw->get(name)) return *v;
    return alias.empty() ? 0 : hw->get(alias).value_or(0);
  };
  c.np_ecn_marked_roce_packets = hwv("np_ecn_marked_roce_packets");
  c.np_cnp_sent = hwv("np_cnp_sent");
  c.rp_cnp_handled = hwv("rp_cnp_handled");
  c.rp_cnp_ignored = hwv("rp_cnp_ignored");
  // rxe (rxe_hw_counters.c): out_of_seq_request is counted by the responder once per PSN gap (the
  // packet it NAKs), rcvd_seq_err by the requester for each sequence NAK that moves it forward,
  // rcvd_rnr_err for every RNR NAK received. rxe has no counter of ACK timeouts alone (its
  // completer_retry_err also counts the go-back-N a sequence NAK starts) nor of access errors, so
  // local_ack_timeout_err and the remote access errors stay 0 there (docs/verbs.md, "rxe findings").
  c.out_of_sequence = hwv("out_of_sequence", "out_of_seq_request");
  c.packet_seq_err = hwv("packet_seq_err", "rcvd_seq_err");
  c.local_ack_timeout_err = hwv("local_ack_timeout_err");
  c.duplicate_request = hwv("duplicate_request");
  c.rnr_nak_retry_err = hwv("rnr_nak_retry_err", "rcvd_rnr_err");
  c.req_remote_access_errors = hwv("req_remote_access_errors");
  c.resp_remote_access_errors = hwv("resp_remote_access_errors");
  c.implied_nak_seq_err = hwv("implied_nak_seq_err");
  c.rx_dropped = hwv("out_of_buffer");
  if (port != nullptr) {
    c.tx_packets = port->xmit_packets;
    c.rx_packets = port->rcv_packets;
    c.tx_bytes = port->xmit_bytes;
    c.rx_bytes = port->rcv_bytes;
    c.rx_dropped += port->get("port_rcv_errors").value_or(0);
  } else {
    // No PMA counters/ (rxe has no MAD interface): the driver's own packet counts.
    c.tx_packets = hwv("sent_pkts");
    c.rx_packets = hwv("rcvd_pkts");
  }
  return c;
}

Capabilities to_capabilities(const DeviceCaps& caps, uint32_t port_max_msg_bytes) {
  Capabilities c;
  c.dmabuf_mr = caps.dmabuf.support == DmabufSupport::kSupported;
  c.software_cc = false;  // DCQCN runs in the NIC; rdmad/nic_cc configures it
  c.ipv6 = true;
  c.max_mr_size = caps.max_mr_size >= kMaxMrSliceBytes ? kMaxSlices * kMaxMrSliceBytes : caps.max_mr_size;
  c.max_mr = caps.max_mr;
  c.max_qp = caps.max_qp;
  c.max_qp_wr = caps.max_qp_wr;
  c.max_cq_depth = caps.max_cqe;
  c.max_msg_size = port_max_msg_bytes;
  c.min_mtu_bytes = 256;
  c.max_mtu_bytes = 4096;
  return c;
}

}  // namespace rdmad::verbs::rdma_core
