// Flow, balancer and peer series, read from live counters at scrape time. No flow id, QPN, peer
// or address is a label: per NIC the `device` label, otherwise none.
#include <prometheus/collectable.h>

#include "rdmad/metrics/family_set.h"
#include "rdmad/peer/peer_channel.h"
#include "rdmad/peer/peer_session.h"
#include "service_state.h"

namespace rdmad::flow {
namespace {

class FlowCollector final : public prometheus::Collectable {
 public:
  FlowCollector(const FlowEngine& engine, const FlowService::Counters& service, const peer::PeerChannel& channel,
                const peer::PeerSession& session, std::vector<std::string> devices)
      : engine_(engine), service_(service), channel_(channel), session_(session), devices_(std::move(devices)) {}

  std::vector<prometheus::MetricFamily> Collect() const override {
    metrics::FamilySet f;
    const EngineCounters& c = engine_.counters();
    auto load = [](const std::atomic<uint64_t>& v) { return static_cast<double>(v.load(std::memory_order_relaxed)); };
    f.gauge("rdmad_flows_open", "Flows open by local clients", {}, load(c.flows_open));
    f.gauge("rdmad_transfers_in_flight", "Flow requests taken and not yet completed", {}, load(c.transfers_in_flight));
    f.counter("rdmad_transfers_total", "Flow requests completed", {{"result", "ok"}}, load(c.transfers_completed));
    f.counter("rdmad_transfers_total", "Flow requests completed", {{"result", "error"}}, load(c.transfers_failed));
    f.counter("rdmad_flow_errors_total", "Flows failed because the client broke the ring protocol", {},
              load(c.flow_errors));
    f.gauge("rdmad_peer_grants_held", "Memory grants from peer daemons held by this node", {},
            load(service_.grants_held));
    const char* refused_help = "Flow messages from peers refused: over a per-peer limit, or naming another peer's grant";
    f.counter("rdmad_peer_messages_refused_total", refused_help, {{"kind", "grant"}}, load(service_.grants_refused));
    f.counter("rdmad_peer_messages_refused_total", refused_help, {{"kind", "receive_credit"}},
              load(c.credits_refused));
    for (size_t i = 0; i < engine_.nic_count(); ++i) {
      const LaneCounters& l = engine_.lane(i);
      const metrics::LabelList dl = {{"device", devices_[i]}};
      f.gauge("rdmad_balancer_weight", "Share of new chunks this NIC gets under the current weights (0..1, mean over peers)",
              dl, l.weight.load(std::memory_order_relaxed));
      f.counter("rdmad_balancer_bytes_sent_total", "Bytes of flow chunks posted on this NIC", dl, load(l.bytes_sent));
      f.counter("rdmad_balancer_chunks_sent_total", "Flow chunks posted on this NIC", dl, load(l.chunks_sent));
      f.counter("rdmad_balancer_failovers_total", "Times this NIC's path to a peer failed and its chunks moved", dl,
                load(l.failovers));
    }
    const peer::PeerCounters& p = channel_.counters();
    auto n = [](uint64_t v) { return static_cast<double>(v); };
    f.gauge("rdmad_peers_connected", "Peer daemons with an established control connection", {}, n(p.peers_connected));
    f.counter("rdmad_peer_auth_failures_total", "Peer handshakes refused for authentication", {}, n(p.auth_failures));
    f.counter("rdmad_peer_handshake_failures_total", "Peer handshakes refused otherwise (strangers, timeouts)", {},
              n(p.handshake_failures));
    f.counter("rdmad_peer_keepalive_timeouts_total", "Peers declared dead after missed keepalives", {},
              n(p.keepalive_timeouts));
    f.counter("rdmad_peer_reconnects_total", "Redials of lost or unreachable peers", {}, n(p.reconnects));
    f.counter("rdmad_peer_frame_errors_total", "Malformed frames from established peers", {}, n(p.frame_errors));
    f.counter("rdmad_peer_connections_refused_total", "Peer connections closed at accept: too many in their handshake",
              {}, n(p.connections_refused));
    f.counter("rdmad_peer_duplicate_connections_total", "Second connections for a connected peer id (closed)", {},
              n(p.duplicate_connections));
    f.counter("rdmad_peer_accept_errors_total", "Peer accepts that failed (EMFILE, ...); accepting paused", {},
              n(p.accept_errors));
    f.counter("rdmad_peer_send_queue_overflows_total", "Peer connections dropped: the peer did not read its queue", {},
              n(p.send_queue_overflows));
    f.counter("rdmad_peer_credential_reloads_total", "Peer TLS credentials reloaded after they changed on disk", {},
              n(p.credential_reloads));
    f.gauge("rdmad_peer_channel_insecure", "1 when the peer channel runs without TLS ([peer] insecure = true)", {},
            std::string(channel_.security()) == "insecure" ? 1 : 0);
    f.counter("rdmad_peer_sessions_total", "Queue-pair sets brought up with peers", {},
              n(session_.counters().sessions_ready));
    const peer::SessionCounters& s = session_.counters();
    const char* rebuilds_help = "One NIC's queue pairs to a peer rebuilt, by why (failover recovery)";
    f.counter("rdmad_peer_rebuilds_total", rebuilds_help, {{"cause", "path_fault"}},
              n(s.rebuilds - s.rebuilds_request_refused));
    f.counter("rdmad_peer_rebuilds_total", rebuilds_help, {{"cause", "request_refused"}},
              n(s.rebuilds_request_refused));
    return f.take();
  }

 private:
  const FlowEngine& engine_;
  const FlowService::Counters& service_;
  const peer::PeerChannel& channel_;
  const peer::PeerSession& session_;
  std::vector<std::string> devices_;
};

}  // namespace

std::shared_ptr<prometheus::Collectable> FlowService::make_collector() {
  std::vector<std::string> devices;
  for (const FlowNic& n : nics_) devices.push_back(n.device);
  return std::make_shared<FlowCollector>(*engine_, counters_, *channel_, *session_, std::move(devices));
}

}  // namespace rdmad::flow
