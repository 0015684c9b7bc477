// Serving the flow requests through the FlowHandler the daemon installed.
#include <fcntl.h>

#include "connection.h"

namespace rdmad::clients {

using proto::MsgType;

std::span<const std::byte> UnixServer::Core::dispatch_flow(Connection& conn, DecodedRequest& req, FrameBuffer& out,
                                                           [[maybe_unused]] ReplyFds& reply_fds,
                                                           rdmad_status* status) {
  const uint64_t id = req.header.request_id;
  const uint16_t version = conn.version();
  auto type = static_cast<MsgType>(req.header.type);
  auto fail = [&](const Error& e) {
    *status = e.status;
    return write_error(out, version, id, e.status, e.message);
  };
  if (flows_ == nullptr)
    return fail(Error{RDMAD_ERR_NOT_SUPPORTED, "flows are disabled on this node: set [peer] enabled = true"});
  FrameWriter w(out, version, proto::reply_type(type), id);
  switch (type) {
    case MsgType::kFlowOpen: {
      // Answered when the flow is open: at once, or once a peer found through discovery is
      // connected (or not found). The handler keeps the fds; the reply carries copies.
      std::weak_ptr<Connection> weak = conn.shared_from_this();
      flows_->open_flow(conn.peer(), std::get<proto::FlowOpenRequest>(req.body),
                        [weak, version, id, type](Result<FlowOpened> r) {
                          auto c = weak.lock();
                          if (!c) return;
                          FrameBuffer buf;
                          std::span<const std::byte> frame;
                          std::vector<int> fds;
                          if (!r.ok()) {
                            frame = write_error(buf, version, id, r.error().status, r.error().message);
                          } else {
                            c->flows_open.fetch_add(1, std::memory_order_relaxed);
                            for (int fd : r.value().fds) {
                              const int d = ::fcntl(fd, F_DUPFD_CLOEXEC, 0);
                              if (d >= 0) fds.push_back(d);
                            }
                            FrameWriter reply(buf, version, proto::reply_type(type), id);
                            reply.append(r.value().reply);
                            frame = reply.finish();
                          }
                          c->send_from_elsewhere({frame.begin(), frame.end()}, std::move(fds), false);
                        });
      return {};
    }
    case MsgType::kFlowClose: {
      auto r = flows_->close_flow(conn.peer(), std::get<proto::FlowCloseRequest>(req.body).flow_id);
      if (!r.ok()) return fail(r.error());
      conn.flows_open.fetch_sub(1, std::memory_order_relaxed);
      return w.finish();
    }
    case MsgType::kExport: {
      // Answered when the peer daemon has stored the grant (or refused it).
      std::weak_ptr<Connection> weak = conn.shared_from_this();
      flows_->export_memory(conn.peer(), std::get<proto::ExportRequest>(req.body),
                            [weak, version, id, type](Result<proto::ExportReply> r) {
                              auto c = weak.lock();
                              if (!c) return;
                              FrameBuffer buf;
                              std::span<const std::byte> frame;
                              if (!r.ok()) {
                                frame = write_error(buf, version, id, r.error().status, r.error().message);
                              } else {
                                FrameWriter reply(buf, version, proto::reply_type(type), id);
                                reply.append(r.value());
                                frame = reply.finish();
                              }
                              c->send_from_elsewhere({frame.begin(), frame.end()}, {}, false);
                            });
      return {};
    }
    case MsgType::kNodeId: {
      proto::NodeIdReply reply{};
      proto::copy_cstr(reply.node_id, flows_->node_id().c_str());
      w.append(reply);
      return w.finish();
    }
    case MsgType::kImport: {
      auto r = flows_->import_token(conn.peer(), std::get<proto::ImportRequest>(req.body));
      if (!r.ok()) return fail(r.error());
      w.append(r.value());
      return w.finish();
    }
    case MsgType::kRevoke: {
      auto r = flows_->revoke(conn.peer(), std::get<proto::RevokeRequest>(req.body));
      return r.ok() ? w.finish() : fail(r.error());
    }
    default:
      break;
  }
  return fail(Error{RDMAD_ERR_PROTOCOL, "unexpected request type"});
}

}  // namespace rdmad::clients
