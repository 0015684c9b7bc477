#pragma once
// Flows between nodes, the control-plane half: the peer channel and QP sessions to other daemons,
// the client requests that open flows and export or import memory, the tokens, and the metrics.
// The datapath half is the FlowEngine thread it owns. Everything here runs on the control
// io_context; the engine is changed only through its run_sync().
#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>

#include "rdmad/balancer/balancer_config.h"
#include "rdmad/base/heartbeat.h"
#include "rdmad/base/status.h"
#include "rdmad/daemon/flow/mr_slices.h"
#include "rdmad/daemon/clients/fd_budget.h"
#include "rdmad/daemon/clients/flow_handler.h"
#include "rdmad/daemon/clients/memory_registrar.h"
#include "rdmad/daemon/clients/region_pins.h"
#include "rdmad/daemon/clients/tenant.h"
#include "rdmad/daemon/clients/session_store.h"
#include "rdmad/daemon/nics/flow_nic.h"
#include "rdmad/daemon/peer/discovery.h"
#include "rdmad/daemon/peer/peer_config.h"
#include "rdmad/daemon/peer/qp_connector.h"
#include "rdmad/verbs/device.h"

namespace prometheus {
class Registry;
class Collectable;
template <typename T>
class Family;
class Histogram;
}  // namespace prometheus

namespace rdmad::peer {
class PeerChannel;
class PeerSession;
struct Grant;
}  // namespace rdmad::peer

namespace rdmad::flow {

class FlowEngine;
class PeerDomain;
struct ExactRegion;
struct RemoteRange;

struct FlowServiceOptions {
  peer::PeerConfig peer;
  peer::QpConnectorOptions qp;
  balancer::BalancerConfig balancer;
  uint32_t lane_window_chunks = 8;
  uint32_t sq_depth = 256;  // defaults for flows that ask for 0
  uint32_t cq_depth = 512;
  uint32_t max_flows_per_client = 64;
  // What one peer may hold here: memory exported to this node (grants), and receive buffers it
  // advertised for our sends. A peer beyond a limit misbehaves: its message is refused and counted.
  uint32_t max_grants_per_peer = 4096;
  uint32_t max_receives_per_peer = 4096;
  // The slices of MRs a backend splits (exports and receives carry every slice's rkey); empty:
  // every MR is one.
  SliceReader slice_reader;
};

// The local NICs come from NodeNics::flow_nics(), in [[nic]] order.
using FlowNic = daemon::FlowNic;

class FlowService final : public clients::FlowHandler {
 public:
  FlowService(boost::asio::io_context& io, FlowServiceOptions options, std::vector<FlowNic> nics,
              clients::RegionPins& registrations, prometheus::Registry& registry);
  ~FlowService() override;
  FlowService(const FlowService&) = delete;
  FlowService& operator=(const FlowService&) = delete;

  /// Creates the completion queues, starts the engine thread and the peer channel. An error names
  /// the cause (address in use, unreadable key file, ...).
  base::Status start();
  /// Stops the channel and the engine; flows fail, exports are revoked. Idempotent.
  void stop();

  uint16_t peer_port() const;
  /// Flows take their descriptors (ring memfd, two eventfds) from `budget` (the client service's).
  void set_fd_budget(clients::FdBudget* budget) { fds_ = budget; }
  /// A NIC's port went down (its lanes to every peer fail over, and are not rebuilt while it is
  /// down) or came back (its lanes are rebuilt and rejoin after their back-off).
  void port_changed(size_t nic, bool up);
  /// One of a NIC's QPs failed on its own (asynchronous QP fatal event): the lane it carries fails
  /// over and is rebuilt.
  void qp_failed(size_t nic, uint32_t qp_num);
  /// A NIC's source GID changed (an address change): its lanes to every ready peer are rebuilt,
  /// which re-advertises the endpoint with the new GID.
  void gid_changed(size_t nic);
  /// A NIC that was out of service at start() opened: it gets its completion queue and a
  /// protection domain in every peer's domain, and its lanes are brought up.
  base::Status nic_opened(size_t nic, verbs::Device* device);
  /// The flow, balancer and peer series (register it with the exporter; valid until destruction).
  std::shared_ptr<prometheus::Collectable> collector() const { return collector_; }
  size_t flow_count() const { return flows_.size(); }
  /// The engine thread's heartbeat, for the daemon's watchdog (valid from start() to destruction).
  const base::Heartbeat* engine_heartbeat() const;
  /// Runs `fn` on the engine thread and returns when it has run (the daemon's test hooks).
  void run_on_engine_for_test(const std::function<void()>& fn);
  /// Every client's flows with ids above `after`, ascending, for operators; *more when some were
  /// left out. State and requests in flight are read from each flow's ring header.
  std::vector<proto::FlowEntry> list_flows(uint64_t after, uint32_t max_entries, bool* more) const;
  /// The peers the channel knows (node id order) from the `skip`-th on, with their state, last
  /// error, keepalive round trip and rails (NICs whose QPs to them are connected).
  std::vector<proto::PeerEntry> list_peers(uint64_t skip, uint32_t max_entries, bool* more) const;

  // clients::FlowHandler
  // A flow (or export) to a node found through discovery whose session is not up waits for it,
  // at most session_wait(): the session is opened lazily, by this request (flow_lazy.cc).
  void open_flow(const clients::Peer& client, const proto::FlowOpenRequest& req,
                 std::function<void(clients::Result<clients::FlowOpened>)> done) override;
  clients::Result<clients::Ok> close_flow(const clients::Peer& client, uint64_t flow_id) override;
  void export_memory(const clients::Peer& client, const proto::ExportRequest& req,
                     std::function<void(clients::Result<proto::ExportReply>)> done) override;
  clients::Result<proto::ImportReply> import_token(const clients::Peer& client, const proto::ImportRequest& req) override;
  clients::Result<clients::Ok> revoke(const clients::Peer& client, const proto::RevokeRequest& req) override;
  std::string node_id() const override { return options_.peer.node_id; }
  void connection_closed(uint64_t conn_id) override;
  void adopt_connection(uint64_t from, const clients::Peer& to) override;

  /// Records exports of connections with a session there (session_store.h). Before start().
  void set_session_store(clients::SessionStore* store) { store_ = store; }
  /// Exports the previous run recorded, of handles the client service restored: each is granted
  /// to its peer again when that peer's session is ready (the token stays the same). Returns how
  /// many were restored; the others are logged and dropped from the store.
  size_t restore_exports(const std::vector<clients::StoredSession>& sessions,
                         const std::vector<clients::StoredExport>& exports);

  using Token = std::array<uint8_t, 16>;

  /// Read at scrape time from another thread.
  struct Counters {
    std::atomic<uint64_t> grants_held{0};      // grants from peers stored here
    std::atomic<uint64_t> grants_refused{0};   // beyond max_grants_per_peer, or another peer's token
  };

 private:
  struct FlowRecord {
    uint64_t id = 0;
    uint64_t conn_id = 0;
    uid_t owner_uid = 0;
    clients::Tenant owner_tenant;  // what its quota counts it against
    pid_t owner_pid = 0;
    std::string peer;
    uint64_t channel = 0;
    uint32_t sq_depth = 0;
    uint32_t cq_depth = 0;
    void* ring = nullptr;
    uint64_t ring_bytes = 0;
    int memfd = -1;
    int doorbell_fd = -1;
    int completion_fd = -1;
    uint32_t imports = 0;  // distinct tokens imported on it (imports_)
  };
  // A token imported on a flow. It outlives the grant it was made from: when the peer's session
  // ends (the peer restarted, the connection dropped) the import waits, under the same remote
  // handle, for the peer to grant the token again; the flow's client keeps using its handle.
  struct Import {
    uint64_t flow_id = 0;
    Token token{};
  };
  struct Export {
    Token token{};
    uint64_t conn_id = 0;
    uid_t owner_uid = 0;
    clients::Tenant owner_tenant;  // what its quota counts it against
    std::string peer;
    uint64_t handle = 0;  // the registration and offset it was made from (the session store's record)
    uint64_t offset = 0;
    clients::PinnedRange range{};
    // MRs over exactly the range with exactly the rights, in the peer's domain (while it has one).
    std::unique_ptr<ExactRegion> mrs;
    uint32_t rights = 0;
    bool acked = false;
    std::function<void(clients::Result<proto::ExportReply>)> done;  // until the peer acknowledged
  };
  struct Grant;  // a peer's export to us

  clients::Result<clients::FlowOpened> create_flow(const clients::Peer& client, const proto::FlowOpenRequest& req);
  void export_now(const clients::Peer& client, const proto::ExportRequest& req,
                  std::function<void(clients::Result<proto::ExportReply>)> done);

  // Lazy sessions and idle close (flow_lazy.cc). A request that waits for a peer's session: `go`
  // runs with nullptr once the session is ready, or with the error that ended the wait.
  struct Waiter {
    uint64_t conn_id = 0;
    std::string peer;
    std::chrono::steady_clock::time_point deadline;
    std::function<void(const clients::Error*)> go;
  };
  static constexpr size_t kMaxWaiters = 4096;
  bool needs_session_wait(const std::string& peer) const;
  void wait_for_session(uint64_t conn_id, const std::string& peer, std::function<void(const clients::Error*)> go);
  void resume_waiters(const std::string& peer);
  size_t waiting_of(uint64_t conn_id) const;
  clients::Error not_found(const std::string& peer, const char* why) const;
  // Flows, exports, grants or waiting requests name the peer.
  bool in_use(const std::string& peer) const;
  std::chrono::milliseconds session_wait() const;
  std::chrono::milliseconds tick_interval() const;
  void start_lazy();
  void lazy_tick();
  void on_idle_request(const std::string& peer);
  std::vector<Waiter> waiters_;
  std::unique_ptr<peer::IdleSessions> idle_;
  std::unique_ptr<boost::asio::steady_timer> lazy_timer_;

  void on_peer_message(const std::string& peer, uint16_t type, const std::vector<uint8_t>& payload);
  void on_peer_ready(const std::string& peer, peer::QpConnector& qps);
  void on_peer_lost(const std::string& peer);
  // The peer's connection is gone (ready or not) and its QPs with it: its grants, and its domain
  // with every MR in it, go too.
  void on_peer_closed(const std::string& peer);
  // The peer's domain, opened on first use; nullptr (and *error) when a NIC refuses a PD.
  PeerDomain* domain_for(const std::string& peer, std::string* error);
  // Registers the export in its peer's domain (if not yet) and sends the grant; false when it
  // could not be registered (the export is then failed and dropped).
  bool grant(std::map<Token, Export>::iterator it);
  void send_grant(const Export& e);
  void drop_export(std::map<Token, Export>::iterator it, bool tell_peer);
  void destroy_flow(FlowRecord& f);
  peer::LocalNic local_nic(size_t nic) const;
  bool port_active(size_t nic) const;
  static constexpr uint32_t kCqDepth = 4096;
  std::shared_ptr<prometheus::Collectable> make_collector();

  boost::asio::io_context& io_;
  FlowServiceOptions options_;
  std::vector<FlowNic> nics_;
  clients::RegionPins& registrations_;
  prometheus::Registry& registry_;
  prometheus::Histogram* duration_ = nullptr;
  std::shared_ptr<prometheus::Collectable> collector_;
  std::vector<std::unique_ptr<verbs::CompletionQueue>> cqs_;  // by NIC; null while out of service
  std::vector<peer::LocalNic> local_;  // by NIC, without the per-peer PD
  // Before the engine, channel and sessions: destroyed after them (receive MRs, QPs).
  std::map<std::string, std::unique_ptr<PeerDomain>> domains_;
  uint64_t next_domain_id_ = 1;
  std::unique_ptr<FlowEngine> engine_;
  std::unique_ptr<peer::PeerChannel> channel_;
  std::unique_ptr<peer::PeerSession> session_;
  std::map<uint64_t, FlowRecord> flows_;
  std::map<Token, Export> exports_;
  std::map<Token, std::unique_ptr<Grant>> grants_;
  std::map<uint64_t, Import> imports_;  // by remote handle
  std::multimap<Token, uint64_t> imports_by_token_;  // -> remote handle
  // Removes the imports `drop` selects (from the flows' records too; not from the engine).
  void erase_imports(const std::function<bool(const Import&)>& drop);
  // The grant of `token` from `peer` is (again) here: every flow to that peer that imported it
  // gets its keys, under the remote handle it already has.
  void reattach_imports(const std::string& peer, const Token& token);
  std::map<std::string, uint32_t> grants_by_peer_;
  Counters counters_;
  clients::FdBudget* fds_ = nullptr;
  clients::SessionStore* store_ = nullptr;
  std::map<clients::Tenant, uint32_t> flows_by_tenant_;
  std::map<clients::Tenant, uint32_t> exports_by_tenant_;
  void set_grants_held() { counters_.grants_held.store(grants_.size(), std::memory_order_relaxed); }
  uint64_t next_flow_id_ = 1;
  uint64_t next_remote_handle_ = 1;
  bool started_ = false;
  std::vector<bool> port_down_;  // by NIC
  std::unique_ptr<boost::asio::steady_timer> congestion_timer_;
  std::vector<uint64_t> last_cnps_;
  std::chrono::steady_clock::time_point last_sample_;
  void sample_congestion();
  std::shared_ptr<int> alive_ = std::make_shared<int>(0);  // posted closures check it
};

}  // namespace rdmad::flow
