// Flow, balancer and peer series, read from live counters at scrape time (declared in
// flow_metric_table.h).
#include <prometheus/collectable.h>

#include "flow_metric_table.h"
#include "rdmad/metrics/family_set.h"
#include "rdmad/daemon/peer/peer_channel.h"
#include "rdmad/daemon/peer/peer_session.h"
#include "service_state.h"

namespace rdmad::flow {
namespace {

class FlowCollector final : public prometheus::Collectable {
 public:
  FlowCollector(const FlowEngine& engine, const FlowService::Counters& service, const peer::PeerChannel& channel,
                const peer::PeerSession& session, std::vector<std::string> devices, uint32_t qps_per_lane)
      : engine_(engine),
        service_(service),
        channel_(channel),
        session_(session),
        devices_(std::move(devices)),
        qps_per_lane_(qps_per_lane) {}

  std::vector<prometheus::MetricFamily> Collect() const override {
    metrics::FamilySet f;
    const EngineCounters& c = engine_.counters();
    auto load = [](const std::atomic<uint64_t>& v) { return static_cast<double>(v.load(std::memory_order_relaxed)); };
    f.add(metric::kFlowsOpen, {}, load(c.flows_open));
    f.add(metric::kTransfersInFlight, {}, load(c.transfers_in_flight));
    f.add(metric::kTransfers, {{"result", "ok"}}, load(c.transfers_completed));
    f.add(metric::kTransfers, {{"result", "error"}}, load(c.transfers_failed));
    f.add(metric::kFlowErrors, {}, load(c.flow_errors));
    f.add(metric::kPinnedSpills, {}, load(c.pinned_spills));
    f.add(metric::kGrantsHeld, {}, load(service_.grants_held));
    f.add(metric::kMessagesRefused, {{"kind", "grant"}}, load(service_.grants_refused));
    f.add(metric::kMessagesRefused, {{"kind", "receive_credit"}}, load(c.credits_refused));
    f.add(metric::kMessagesRefused, {{"kind", "send_done"}}, load(c.dones_refused));
    f.add(metric::kSendDones, {{"path", "lane"}}, load(c.dones_on_lanes));
    f.add(metric::kSendDones, {{"path", "control"}}, load(c.dones_on_control));
    f.add(metric::kSendDones, {{"path", "immediate"}}, load(c.sends_by_immediate));
    f.add(metric::kRecvPosts, {{"path", "lane"}}, load(c.posts_on_lanes));
    f.add(metric::kRecvPosts, {{"path", "control"}}, load(c.posts_on_control));
    f.add(metric::kRecvPostsDuplicate, {}, load(c.posts_duplicate));
    f.add(metric::kRecvPostsWithdrawn, {}, load(c.posts_withdrawn));
    f.add(metric::kImmediateQueries, {{"answer", "pending"}}, load(c.imm_answers[0]));
    f.add(metric::kImmediateQueries, {{"answer", "placed"}}, load(c.imm_answers[1]));
    f.add(metric::kImmediateQueries, {{"answer", "unknown"}}, load(c.imm_answers[2]));
    for (size_t i = 0; i < engine_.nic_count(); ++i) {
      const LaneCounters& l = engine_.lane(i);
      const metrics::LabelList dl = {{"device", devices_[i]}};
      f.add(metric::kBalancerWeight, dl, l.weight.load(std::memory_order_relaxed));
      f.add(metric::kBalancerBytesSent, dl, load(l.bytes_sent));
      f.add(metric::kBalancerChunksSent, dl, load(l.chunks_sent));
      f.add(metric::kBalancerFailovers, dl, load(l.failovers));
      f.add(metric::kBalancerRejoinChecks, {dl[0], {"result", "ok"}}, load(l.rejoin_checks_ok));
      f.add(metric::kBalancerRejoinChecks, {dl[0], {"result", "failed"}}, load(l.rejoin_checks_failed));
      f.add(metric::kFlowLaneQps, dl, static_cast<double>(l.lane_qps.load(std::memory_order_relaxed)));
      for (uint32_t j = 0; j < qps_per_lane_ && j < l.qp_chunks_sent.size(); ++j)
        f.add(metric::kFlowLaneQpChunks, {{"device", devices_[i]}, {"lane_qp", std::to_string(j)}},
              load(l.qp_chunks_sent[j]));
    }
    const peer::PeerCounters& p = channel_.counters();
    auto n = [](uint64_t v) { return static_cast<double>(v); };
    f.add(metric::kPeersConnected, {}, n(p.peers_connected));
    // Discovery (all 0 without [peer] discover).
    f.add(metric::kPeersDiscovered, {}, n(p.peers_discovered));
    f.add(metric::kPeersFailed, {}, n(p.peers_failed));
    f.add(metric::kPeerDiscoveryResolutions, {{"result", "ok"}}, n(p.discovery_resolutions));
    f.add(metric::kPeerDiscoveryResolutions, {{"result", "error"}}, n(p.discovery_errors));
    f.add(metric::kPeerDiscoverySeconds, {}, p.discovery_seconds);
    f.add(metric::kPeerIdleCloses, {}, n(p.idle_closes));
    f.add(metric::kPeerAuthFailures, {}, n(p.auth_failures));
    f.add(metric::kPeerHandshakeFailures, {}, n(p.handshake_failures));
    f.add(metric::kPeerKeepaliveTimeouts, {}, n(p.keepalive_timeouts));
    f.add(metric::kPeerReconnects, {}, n(p.reconnects));
    f.add(metric::kPeerFrameErrors, {}, n(p.frame_errors));
    f.add(metric::kPeerConnectionsRefused, {}, n(p.connections_refused));
    f.add(metric::kPeerDuplicateConnections, {}, n(p.duplicate_connections));
    f.add(metric::kPeerAcceptErrors, {}, n(p.accept_errors));
    f.add(metric::kPeerSendQueueOverflows, {}, n(p.send_queue_overflows));
    f.add(metric::kPeerCredentialReloads, {}, n(p.credential_reloads));
    f.add(metric::kPeerChannelInsecure, {}, std::string(channel_.security()) == "insecure" ? 1 : 0);
    f.add(metric::kPeerSessions, {}, n(session_.counters().sessions_ready));
    const peer::SessionCounters& s = session_.counters();
    f.add(metric::kPeerRebuilds, {{"cause", "path_fault"}}, n(s.rebuilds - s.rebuilds_request_refused));
    f.add(metric::kPeerRebuilds, {{"cause", "request_refused"}}, n(s.rebuilds_request_refused));
    return f.take();
  }

 private:
  const FlowEngine& engine_;
  const FlowService::Counters& service_;
  const peer::PeerChannel& channel_;
  const peer::PeerSession& session_;
  std::vector<std::string> devices_;
  uint32_t qps_per_lane_;  // this node's: the lane_qp series it exports
};

}  // namespace

std::shared_ptr<prometheus::Collectable> FlowService::make_collector() {
  std::vector<std::string> devices;
  for (const FlowNic& n : nics_) devices.push_back(n.device);
  return std::make_shared<FlowCollector>(*engine_, counters_, *channel_, *session_, std::move(devices),
                                         options_.qp.qps_per_nic);
}

}  // namespace rdmad::flow
