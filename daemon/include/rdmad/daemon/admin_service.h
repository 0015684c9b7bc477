#pragma once
// The daemon's side of the operator's requests (rdmactl): the node's flows, the DCQCN parameters
// in force on each [[nic]] (soft NICs from their datapath, hardware NICs from the NIC through
// nic_cc) and changing them live, and configuration reload.
#include <chrono>
#include <functional>
#include <optional>
#include <string>

#include "rdmad/config/config.h"
#include "rdmad/daemon/nics/node_nics.h"
#include "rdmad/daemon/flow/flow_service.h"
#include "rdmad/daemon/clients/admin_handler.h"
#include "rdmad/daemon/health.h"
#include "rdmad/nic_cc/cc_param_store.h"

namespace rdmad::daemon {

// What the daemon tells its operators about itself (rdmactl status).
struct DaemonFacts {
  std::string config_path;  // empty: the embedded default
  std::string node_id;      // the peer channel's ([peer] node_id, else the host name)
  std::chrono::system_clock::time_point started;
  std::chrono::steady_clock::time_point started_steady;  // uptime does not jump with the clock
};

// Reloads so far (SIGHUP and rdmactl reload), kept by the daemon.
struct ReloadRecord {
  uint64_t ok = 0;
  uint64_t failed = 0;
  std::string last_error;  // the last reload's errors when it failed; empty when it succeeded
};

class AdminService final : public clients::AdminHandler {
 public:
  // `config` is the daemon's (its [[nic]] list and sysfs root); `flows` may be null (flows off);
  // `reloads` outlives this object.
  AdminService(const config::Config& config, NodeNics& nics, flow::FlowService* flows,
               std::function<clients::Result<clients::Ok>()> reload, DaemonFacts facts, const ReloadRecord& reloads);

  std::vector<proto::FlowEntry> list_flows(uint64_t after, uint32_t max_entries, bool* more) override;
  clients::Result<clients::CcShown> cc_show(const proto::CcShowRequest& req) override;
  clients::Result<proto::CcSetReply> cc_set(const proto::CcSetRequest& req) override;
  clients::Result<clients::Ok> reload() override;
  clients::Result<proto::NicDetailsReply> nic_details(const proto::NicDetailsRequest& req) override;
  clients::Result<clients::Ok> test_stall(const std::string& thread, uint32_t seconds) override;

  // --enable-test-hooks: test_stall calls `hook`; without one it is refused (not supported).
  using StallHook = std::function<clients::Result<clients::Ok>(const std::string&, uint32_t)>;
  void set_stall_hook(StallHook hook) { stall_hook_ = std::move(hook); }
  // admin_status.cc
  std::vector<proto::PeerEntry> list_peers(uint64_t skip, uint32_t max_entries, bool* more) override;
  std::vector<proto::GidEntry> list_gids(uint64_t skip, uint32_t max_entries, bool* more) override;
  proto::StatusReply status() override;
  // What the health verdict and readiness are judged on: NICs, peers, the last reload (control thread).
  HealthInput health_input();

 private:
  // Where one [[nic]]'s DCQCN parameters live.
  struct CcTarget {
    const config::NicSection* nic = nullptr;
    verbs::Device* soft = nullptr;                    // CC runs in the backend
    std::optional<nic_cc::CcParamLocation> hardware;  // CC runs in the NIC
    std::string unavailable;                          // why neither, when neither
  };
  CcTarget resolve(const config::NicSection& nic) const;
  clients::Result<clients::Ok> apply(const CcTarget& t, const proto::CcSetRequest& req);

  const config::Config& config_;
  NodeNics& nics_;
  flow::FlowService* flows_;
  std::function<clients::Result<clients::Ok>()> reload_;
  StallHook stall_hook_;
  DaemonFacts facts_;
  const ReloadRecord& reloads_;
};

}  // namespace rdmad::daemon
