#include "rdmad/daemon/peer/qp_connector.h"

#include <algorithm>
#include <cstring>

#include "rdmad/daemon/peer/auth.h"

namespace rdmad::peer {

using verbs::QpAttr;
using verbs::QpState;
using verbs::Status;

namespace {

// A random 24-bit initial PSN per QP, as ibverbs applications do, so stale packets of an earlier
// incarnation of a connection do not fall inside the new one's window.
uint32_t random_psn() {
  const Nonce n = random_nonce();
  return (uint32_t{n[0]} << 16 | uint32_t{n[1]} << 8 | n[2]) & 0xFFFFFF;
}

Status with_context(const Status& st, const std::string& nic, const char* step) {
  return Status(st.code(), "nic " + nic + ": " + step + ": " + st.message());
}

}  // namespace

QpConnector::QpConnector(std::vector<LocalNic> nics, QpConnectorOptions options)
    : nics_(std::move(nics)), options_(options) {}

verbs::Result<std::vector<NicEndpoint>> QpConnector::prepare() {
  qps_.clear();
  left_out_.clear();
  // Every endpoint goes in one message (config::Loader refuses such files; embedded NICs do not
  // go through it).
  if (nics_.size() * options_.qps_per_nic > kMaxEndpoints)
    return Status::error(std::to_string(nics_.size()) + " NICs x " + std::to_string(options_.qps_per_nic) +
                         " QPs per NIC exceed the " + std::to_string(kMaxEndpoints) + " one handshake carries");
  std::vector<NicEndpoint> out;
  for (uint16_t n = 0; n < nics_.size(); ++n) {
    // A NIC out of service, or whose port is not ACTIVE, gets no QPs now (the peer's QPs of that
    // rail find no partner): its lane is rebuilt when the port comes up.
    if (const std::string why = not_usable(n); !why.empty()) {
      left_out_.push_back("nic " + nics_[n].name + ": " + why);
      continue;
    }
    const Status st = add_nic_qps(n, out);
    if (!st.ok()) return st;
  }
  return out;
}

std::string QpConnector::not_usable(uint16_t n) const {
  const LocalNic& nic = nics_[n];
  if (nic.device == nullptr || nic.pd == nullptr) return "out of service";
  auto port = nic.device->query_port(nic.port);
  if (!port.ok()) return port.status().message();
  if (port->state != verbs::PortState::kActive)
    return "port " + std::to_string(nic.port) + " is " + (port->state == verbs::PortState::kInit ? "INIT" : "DOWN");
  return {};
}

verbs::Result<std::vector<NicEndpoint>> QpConnector::prepare_nic(uint16_t nic_index) {
  if (nic_index >= nics_.size()) return Status::error("no local NIC " + std::to_string(nic_index));
  std::erase_if(qps_, [&](const Qp& q) { return q.nic_index == nic_index; });
  if (const std::string why = not_usable(nic_index); !why.empty())
    return Status::error("nic " + nics_[nic_index].name + ": " + why);
  std::vector<NicEndpoint> out;
  const Status st = add_nic_qps(nic_index, out);
  // Keep the (nic, qp index) order of qps(); moving the entries leaves every QueuePair in place.
  std::stable_sort(qps_.begin(), qps_.end(), [](const Qp& a, const Qp& b) { return a.nic_index < b.nic_index; });
  if (!st.ok()) return st;
  return out;
}

Status QpConnector::add_nic_qps(uint16_t n, std::vector<NicEndpoint>& out) {
  const LocalNic& nic = nics_[n];
  auto port = nic.device->query_port(nic.port);
  if (!port.ok()) return with_context(port.status(), nic.name, "query_port");
  const bool ib = port->link_layer == verbs::LinkLayer::kInfiniband;
  // An InfiniBand port has a LID only once the subnet manager brought it to ACTIVE: without one
  // the peer could not address it.
  if (ib && (port->lid == 0 || port->lid > kMaxUnicastLid))
    return Status::error("nic " + nic.name + ": InfiniBand port " + std::to_string(nic.port) + " has no unicast LID (" +
                         std::to_string(port->lid) + "): is a subnet manager running?");
  if (options_.qps_per_nic == 0 || options_.qps_per_nic > kMaxQpsPerNic)
    return Status::error("nic " + nic.name + ": " + std::to_string(options_.qps_per_nic) + " QPs per NIC (1.." +
                         std::to_string(kMaxQpsPerNic) + ")");
  for (uint16_t j = 0; j < options_.qps_per_nic; ++j) {
    verbs::QpInitAttr ia;
    ia.max_send_wr = options_.max_send_wr;
    ia.max_recv_wr = options_.max_recv_wr;
    ia.send_cq = nic.send_cq;
    ia.recv_cq = nic.recv_cq;
    auto qp = nic.pd->create_qp(ia);
    if (!qp.ok()) return with_context(qp.status(), nic.name, "create_qp");
    QpAttr a;
    a.state = QpState::kInit;
    a.access_flags = options_.access;
    Status st = qp.value()->modify(a, verbs::kQpState | verbs::kQpAccessFlags);
    if (!st.ok()) return with_context(st, nic.name, "RESET→INIT");
    Qp q;
    q.nic_index = n;
    q.qp_index = j;
    q.local = {.nic_name = nic.name,
               .nic_index = n,
               .qp_index = j,
               .link = ib ? EndpointLink::kInfiniband : EndpointLink::kRoce,
               .gid = nic.advertise_gid.value_or(port->gid),
               .lid = ib ? port->lid : uint16_t{0},
               .udp_port = nic.advertise_udp_port != 0 ? nic.advertise_udp_port : port->udp_port,
               .qpn = qp.value()->qp_num(),
               .psn = random_psn(),
               .mtu_bytes = std::min(port->active_mtu_bytes, options_.max_mtu_bytes)};
    q.qp = std::move(qp.value());
    out.push_back(q.local);
    qps_.push_back(std::move(q));
  }
  return Status::success();
}

Status QpConnector::connect(std::span<const NicEndpoint> remote) {
  auto n = connect_where(remote, -1);
  if (!n.ok()) return n.status();
  if (qps_.empty()) return Status::error("no NIC pair in common with the peer");
  return Status::success();
}

Status QpConnector::connect_nic(uint16_t nic_index, std::span<const NicEndpoint> remote) {
  if (nic_index >= nics_.size()) return Status::error("no local NIC " + std::to_string(nic_index));
  auto n = connect_where(remote, nic_index);
  if (!n.ok()) return n.status();
  if (*n == 0) return Status::error("nic " + nics_[nic_index].name + ": no QP pair in common with the peer");
  return Status::success();
}

verbs::Result<size_t> QpConnector::connect_where(std::span<const NicEndpoint> remote, int nic) {
  auto in_scope = [nic](const Qp& q) { return !q.connected && (nic < 0 || q.nic_index == nic); };
  size_t connected = 0;
  for (Qp& q : qps_) {
    if (!in_scope(q)) continue;
    const auto r = std::find_if(remote.begin(), remote.end(), [&](const NicEndpoint& e) {
      return e.nic_index == q.nic_index && e.qp_index == q.qp_index;
    });
    if (r == remote.end()) continue;  // the peer has fewer NICs or QPs: this one stays unused
    const Status st = connect_qp(q, *r);
    if (!st.ok()) return st;
    ++connected;
  }
  std::erase_if(qps_, in_scope);  // the connected ones are out of scope now
  return connected;
}

Status QpConnector::connect_qp(Qp& q, const NicEndpoint& r) {
  const std::string& name = nics_[q.nic_index].name;
  if (q.local.link != r.link) {
    auto what = [](EndpointLink l) { return l == EndpointLink::kInfiniband ? "InfiniBand" : "RoCE"; };
    return Status::error("nic " + name + ": this end is " + what(q.local.link) + ", the peer's NIC " + r.nic_name +
                         " is " + what(r.link) + ": the rails do not match");
  }
  QpAttr a;
  a.state = QpState::kRtr;
  a.path_mtu_bytes = std::min(q.local.mtu_bytes, r.mtu_bytes);
  a.dest_qp_num = r.qpn;
  a.rq_psn = r.psn;
  a.dest_gid = r.gid;  // InfiniBand: the backend adds a GRH only when it is in another subnet
  a.dest_udp_port = r.udp_port;
  a.dest_lid = r.lid;
  a.min_rnr_timer = options_.min_rnr_timer;
  a.max_dest_rd_atomic = options_.max_rd_atomic;
  Status st = q.qp->modify(a, verbs::kQpState | verbs::kQpPathMtu | verbs::kQpDestQpn | verbs::kQpRqPsn |
                                  verbs::kQpAv | verbs::kQpMinRnrTimer | verbs::kQpMaxDestRdAtomic);
  if (!st.ok()) return with_context(st, name, "INIT→RTR");
  a.state = QpState::kRts;
  a.sq_psn = q.local.psn;
  a.timeout = options_.timeout;
  a.retry_cnt = options_.retry_cnt;
  a.rnr_retry = options_.rnr_retry;
  a.max_rd_atomic = options_.max_rd_atomic;
  st = q.qp->modify(a, verbs::kQpState | verbs::kQpSqPsn | verbs::kQpTimeout | verbs::kQpRetryCnt |
                           verbs::kQpRnrRetry | verbs::kQpMaxRdAtomic);
  if (!st.ok()) return with_context(st, name, "RTR→RTS");
  q.remote = r;
  q.connected = true;
  return Status::success();
}

void QpConnector::set_nic(uint16_t nic_index, const LocalNic& nic) {
  if (nic_index >= nics_.size()) return;
  std::erase_if(qps_, [&](const Qp& q) { return q.nic_index == nic_index; });
  nics_[nic_index] = nic;
}

verbs::QueuePair* QpConnector::qp(uint16_t nic_index, uint16_t qp_index) const {
  for (const Qp& q : qps_) {
    if (q.connected && q.nic_index == nic_index && q.qp_index == qp_index) return q.qp.get();
  }
  return nullptr;
}

std::vector<verbs::QueuePair*> QpConnector::nic_qps(uint16_t nic_index) const {
  // qps_ is in (nic, qp index) order (prepare, prepare_nic); connect kept QP j only where the
  // peer has a QP j: with a well-behaved peer, indices 0..min(k, the peer's k) - 1.
  std::vector<verbs::QueuePair*> out;
  for (const Qp& q : qps_) {
    if (q.connected && q.nic_index == nic_index) out.push_back(q.qp.get());
  }
  return out;
}

}  // namespace rdmad::peer
