// What the operator's requests (rdmactl) need from the daemon beyond the client service: the
// node's flows and peers, the DCQCN parameters and GID tables of its NICs, its status and a
// configuration reload. The socket server
// decodes and validates the requests and checks that the peer may make them (uid 0 or the
// daemon's uid); the handler owns the semantics. Called on the control io_context.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "rdmad/daemon/clients/result.h"
#include "rdmad/protocol.h"

namespace rdmad::clients {

struct CcShown {
  proto::CcShowReply head{};  // knob_count is set by the server from knobs.size()
  std::vector<proto::CcKnob> knobs;
};

class AdminHandler {
 public:
  virtual ~AdminHandler() = default;
  // Every client's flows with ids above `after`, ascending; *more when some were left out.
  virtual std::vector<proto::FlowEntry> list_flows(uint64_t after, uint32_t max_entries, bool* more) = 0;
  // One NIC's DCQCN parameters in force (by name, or the cursor-th NIC when the name is empty).
  virtual Result<CcShown> cc_show(const proto::CcShowRequest& req) = 0;
  // Validates every knob and value first, then applies them live to one NIC or every NIC.
  virtual Result<proto::CcSetReply> cc_set(const proto::CcSetRequest& req) = 0;
  // Re-reads the configuration file, as SIGHUP does; the error lists what was wrong with it.
  virtual Result<Ok> reload() = 0;
  // One opened NIC's port, address, counters and software DCQCN summary (by name or cursor).
  virtual Result<proto::NicDetailsReply> nic_details(const proto::NicDetailsRequest& req) = 0;
  // Test hook: makes a named thread spin busy for `seconds` (rdmad --enable-test-hooks only).
  virtual Result<Ok> test_stall(const std::string& thread, uint32_t seconds) {
    (void)thread;
    (void)seconds;
    return Error{RDMAD_ERR_NOT_SUPPORTED, "test hooks are off (rdmad --enable-test-hooks)"};
  }
  // The peer daemons this node knows, in node id order, from the `skip`-th on; *more when some
  // were left out.
  virtual std::vector<proto::PeerEntry> list_peers(uint64_t skip, uint32_t max_entries, bool* more) = 0;
  // Every GID of every port (hardware ports as sysfs shows them now, soft NICs their address),
  // from the `skip`-th on; *more when some were left out.
  virtual std::vector<proto::GidEntry> list_gids(uint64_t skip, uint32_t max_entries, bool* more) = 0;
  // Version, uptime, node id, configuration file and the health verdict with its reasons.
  virtual proto::StatusReply status() = 0;
};

}  // namespace rdmad::clients
