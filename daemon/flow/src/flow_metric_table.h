#pragma once
// The flow, balancer and peer families, declared once: flow_metrics.cc reads them at scrape time,
// flow_service.cc keeps the transfer-time histogram. No flow id, QPN, peer or address is a label:
// per NIC the `device` label (and a QP's index in its lane, at most 16 values), otherwise none.
#include "rdmad/metrics/metric.h"

namespace rdmad::flow::metric {

using metrics::Kind;
using metrics::Metric;

inline constexpr Metric kFlowsOpen{"rdmad_flows_open", "Flows open by local clients", Kind::kGauge};
inline constexpr Metric kTransfersInFlight{"rdmad_transfers_in_flight", "Flow requests taken and not yet completed",
                                           Kind::kGauge};
inline constexpr Metric kTransfers{"rdmad_transfers_total", "Flow requests completed", Kind::kCounter};
inline constexpr Metric kTransferDuration{"rdmad_transfer_duration_seconds",
                                          "Time from taking a flow request to writing its completion",
                                          Kind::kHistogram};
inline constexpr Metric kFlowErrors{"rdmad_flow_errors_total", "Flows failed because the client broke the ring protocol",
                                    Kind::kCounter};
inline constexpr Metric kPinnedSpills{"rdmad_flow_pinned_spills_total",
                                      "Times a flow pinned to NICs had to leave them (all of its NICs were down)",
                                      Kind::kCounter};
inline constexpr Metric kSendDones{
    "rdmad_flow_send_dones_total",
    "How this node told peers that a SEND's data is placed, by way: by the data's own RDMA WRITE with immediate "
    "(immediate), or a send-done as a SEND on a lane's queue pair (lane), or on the control channel (no lane up, a "
    "lane's mailbox full, or again after the lane holding it failed)",
    Kind::kCounter};
inline constexpr Metric kImmediateQueries{
    "rdmad_flow_immediate_queries_total",
    "SENDs whose WRITE with immediate lost its lane unacknowledged, by the peer's answer about the receive: pending "
    "(sent again), placed (completed) or unknown (failed)",
    Kind::kCounter};
inline constexpr Metric kRecvPosts{
    "rdmad_flow_recv_posts_total",
    "Receives this node advertised to peers, by way: as a SEND on a lane's queue pair (lane), or on the control "
    "channel (no lane could take it, or it is longer than a lane message); one sent again after its lane failed "
    "counts again",
    Kind::kCounter};
inline constexpr Metric kRecvPostsDuplicate{
    "rdmad_flow_recv_posts_duplicate_total",
    "Receive advertisements from peers that arrived a second time (sent again after a lane failed holding them "
    "unacknowledged) and were dropped",
    Kind::kCounter};
inline constexpr Metric kRecvPostsWithdrawn{
    "rdmad_flow_recv_posts_withdrawn_total",
    "Receives peers advertised and withdrawn before anything filled them (their flow closed): their credits dropped",
    Kind::kCounter};
inline constexpr Metric kGrantsHeld{"rdmad_peer_grants_held", "Memory grants from peer daemons held by this node",
                                    Kind::kGauge};
inline constexpr Metric kMessagesRefused{
    "rdmad_peer_messages_refused_total",
    "Flow messages from peers refused: over a per-peer limit, or naming another peer's grant", Kind::kCounter};

inline constexpr Metric kBalancerWeight{
    "rdmad_balancer_weight", "Share of new chunks this NIC gets under the current weights (0..1, mean over peers)",
    Kind::kGauge};
inline constexpr Metric kBalancerBytesSent{"rdmad_balancer_bytes_sent_total", "Bytes of flow chunks posted on this NIC",
                                           Kind::kCounter};
inline constexpr Metric kBalancerChunksSent{"rdmad_balancer_chunks_sent_total", "Flow chunks posted on this NIC",
                                            Kind::kCounter};
inline constexpr Metric kFlowLaneQps{
    "rdmad_flow_lane_qps",
    "Queue pairs a lane on this NIC spreads its chunks over ([flow] qps_per_lane, or the peer's if fewer; the most "
    "of any peer's lane that is up, 0 when none is)",
    Kind::kGauge};
inline constexpr Metric kFlowLaneQpChunks{
    "rdmad_flow_lane_qp_chunks_sent_total",
    "Flow chunks posted on this NIC, by the queue pair's index in its lane (lane_qp, 0..qps_per_lane-1; not a QPN)",
    Kind::kCounter};
inline constexpr Metric kBalancerFailovers{"rdmad_balancer_failovers_total",
                                           "Times this NIC's path to a peer failed and its chunks moved", Kind::kCounter};
inline constexpr Metric kBalancerRejoinChecks{
    "rdmad_balancer_rejoin_checks_total",
    "Checks of a lane's path (a zero-length RDMA WRITE on each of its queue pairs) before it joins (when the peer "
    "session starts) or rejoins, by result: failed keeps the lane out for a longer back-off, and no chunk waited on it",
    Kind::kCounter};

inline constexpr Metric kPeersConnected{"rdmad_peers_connected", "Peer daemons with an established control connection",
                                        Kind::kGauge};
inline constexpr Metric kPeersDiscovered{"rdmad_peers_discovered",
                                         "Peer addresses found through [peer] discover (this node's own left out)",
                                         Kind::kGauge};
inline constexpr Metric kPeersFailed{"rdmad_peers_failed", "Discovered peer addresses whose last dial failed",
                                     Kind::kGauge};
inline constexpr Metric kPeerDiscoveryResolutions{"rdmad_peer_discovery_resolutions_total",
                                                  "DNS resolutions of [peer] discover, by result", Kind::kCounter};
inline constexpr Metric kPeerDiscoverySeconds{"rdmad_peer_discovery_seconds",
                                              "How long the last DNS resolution of [peer] discover took", Kind::kGauge};
inline constexpr Metric kPeerIdleCloses{"rdmad_peer_idle_closes_total",
                                        "Peer sessions closed because neither side used them for idle_session_ms",
                                        Kind::kCounter};
inline constexpr Metric kPeerAuthFailures{"rdmad_peer_auth_failures_total", "Peer handshakes refused for authentication",
                                          Kind::kCounter};
inline constexpr Metric kPeerHandshakeFailures{"rdmad_peer_handshake_failures_total",
                                               "Peer handshakes refused otherwise (strangers, timeouts)", Kind::kCounter};
inline constexpr Metric kPeerKeepaliveTimeouts{"rdmad_peer_keepalive_timeouts_total",
                                               "Peers declared dead after missed keepalives", Kind::kCounter};
inline constexpr Metric kPeerReconnects{"rdmad_peer_reconnects_total", "Redials of lost or unreachable peers",
                                        Kind::kCounter};
inline constexpr Metric kPeerFrameErrors{"rdmad_peer_frame_errors_total", "Malformed frames from established peers",
                                         Kind::kCounter};
inline constexpr Metric kPeerConnectionsRefused{"rdmad_peer_connections_refused_total",
                                                "Peer connections closed at accept: too many in their handshake",
                                                Kind::kCounter};
inline constexpr Metric kPeerDuplicateConnections{"rdmad_peer_duplicate_connections_total",
                                                  "Second connections for a connected peer id (closed)", Kind::kCounter};
inline constexpr Metric kPeerAcceptErrors{"rdmad_peer_accept_errors_total",
                                          "Peer accepts that failed (EMFILE, ...); accepting paused", Kind::kCounter};
inline constexpr Metric kPeerSendQueueOverflows{"rdmad_peer_send_queue_overflows_total",
                                                "Peer connections dropped: the peer did not read its queue",
                                                Kind::kCounter};
inline constexpr Metric kPeerCredentialReloads{"rdmad_peer_credential_reloads_total",
                                               "Peer TLS credentials reloaded after they changed on disk", Kind::kCounter};
inline constexpr Metric kPeerChannelInsecure{"rdmad_peer_channel_insecure",
                                             "1 when the peer channel runs without TLS ([peer] insecure = true)",
                                             Kind::kGauge};
inline constexpr Metric kPeerSessions{"rdmad_peer_sessions_total", "Queue-pair sets brought up with peers",
                                      Kind::kCounter};
inline constexpr Metric kPeerRebuilds{"rdmad_peer_rebuilds_total",
                                      "One NIC's queue pairs to a peer rebuilt, by why (failover recovery)",
                                      Kind::kCounter};

}  // namespace rdmad::flow::metric
