// What the client service needs from the flows subsystem (daemon/flow): opening flows to peer
// nodes, exporting registrations to a peer and importing tokens. The socket server decodes and
// validates the requests; the handler owns the semantics. Called on the control io_context.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <string>

#include "rdmad/daemon/clients/client_peer.h"
#include "rdmad/daemon/clients/region_pins.h"
#include "rdmad/daemon/clients/result.h"
#include "rdmad/protocol.h"

namespace rdmad::clients {

struct FlowOpened {
  proto::FlowOpenReply reply{};
  std::array<int, proto::kFlowOpenFds> fds{-1, -1, -1};  // owned by the handler; sent, not closed, by the server
};

class FlowHandler {
 public:
  virtual ~FlowHandler() = default;
  // Answers through `done` (possibly later: a peer found through discovery is connected first).
  // The fds are the handler's: the server sends copies.
  virtual void open_flow(const Peer& client, const proto::FlowOpenRequest& req,
                         std::function<void(Result<FlowOpened>)> done) = 0;
  virtual Result<Ok> close_flow(const Peer& client, uint64_t flow_id) = 0;
  // Answers through `done` (possibly later: the peer daemon acknowledges the grant first).
  virtual void export_memory(const Peer& client, const proto::ExportRequest& req,
                             std::function<void(Result<proto::ExportReply>)> done) = 0;
  virtual Result<proto::ImportReply> import_token(const Peer& client, const proto::ImportRequest& req) = 0;
  virtual Result<Ok> revoke(const Peer& client, const proto::RevokeRequest& req) = 0;
  // This node's id on the peer channel (what a peer's flows to this node name).
  virtual std::string node_id() const = 0;
  // A client connection closed: its flows and exports go, before its registrations are released.
  virtual void connection_closed(uint64_t conn_id) = 0;
  // A session of connection `from` (restored from the previous run) was resumed by connection `to`:
  // its exports are to's from now on.
  virtual void adopt_connection(uint64_t from, const Peer& to) = 0;
};

}  // namespace rdmad::clients
