// Serving decoded requests: each operation turns into exactly one reply frame.
#include <fcntl.h>

#include <cstring>

#include <algorithm>
#include <boost/asio/post.hpp>

#include "connection.h"
#include "log.h"
#include "rdmad/base/log_fields.h"
#include "rdmad/daemon/clients/diagnose.h"
#include "rdmad/daemon/clients/nic_topology.h"

namespace rdmad::clients {
namespace {

using proto::MsgType;

proto::NicEntry nic_entry(const NicDescriptor& nic, uint32_t index) {
  proto::NicEntry e{};
  proto::copy_cstr(e.name, nic.name.c_str());
  proto::copy_cstr(e.backend, nic.backend.c_str());
  proto::copy_cstr(e.pci_address, nic.pci_address.c_str());
  e.link_state = nic.link_state;
  e.speed_mbps = nic.speed_mbps;
  e.numa_node = nic.numa_node;
  e.index = index;
  return e;
}

std::span<const std::byte> nic_list(FrameWriter& w, const std::vector<NicDescriptor>& nics,
                                    const std::vector<uint32_t>& indexes) {
  proto::NicListReply head{static_cast<uint32_t>(std::min<size_t>(indexes.size(), proto::kMaxNics)), 0};
  w.append(head);
  for (uint32_t k = 0; k < head.count; ++k) w.append(nic_entry(nics[indexes[k]], indexes[k]));
  return w.finish();
}

std::span<const std::byte> registered(FrameWriter& w, const Registered& r) {
  proto::RegisterReply reply{};
  reply.handle = r.handle;
  reply.iova = r.iova;
  reply.length = r.length;
  reply.nic_count = static_cast<uint32_t>(std::min<size_t>(r.keys.size(), proto::kMaxNics));
  reply.flags = r.shared ? proto::kRegisterShared : 0;
  for (uint32_t i = 0; i < reply.nic_count; ++i)
    reply.keys[i] = proto::NicKey{r.keys[i].nic_index, r.keys[i].lkey, r.keys[i].rkey, 0};
  w.append(reply);
  return w.finish();
}

}  // namespace

bool served_on_worker(uint16_t type) {
  switch (static_cast<MsgType>(type)) {
    case MsgType::kHello:
    case MsgType::kRegisterHost:
    case MsgType::kRegisterDmabuf:
    case MsgType::kDeregister:
    case MsgType::kListRegistrations:
    case MsgType::kQueryRegistration:
      return true;
    default:
      return false;
  }
}

bool served_in_bulk(const DecodedRequest& req) {
  switch (static_cast<MsgType>(req.header.type)) {
    case MsgType::kRegisterHost:
      return std::get<proto::RegisterHostRequest>(req.body).length >= kBulkRegistrationBytes;
    case MsgType::kRegisterDmabuf:
      return true;
    default:
      return false;
  }
}

void UnixServer::Core::serve_in_bulk(const std::shared_ptr<Connection>& conn, DecodedRequest req, int fd) {
  // stop() finishes every bulk request before it stops the workers: `this` and the connection's
  // worker are still there when the reply goes out.
  boost::asio::post(bulk_.io, [this, conn, req = std::move(req), fd]() mutable {
    FrameBuffer buf;
    ReplyFds no_fds;  // registrations send none
    auto out = handle(*conn, req, fd, buf, no_fds);
    if (fd >= 0) ::close(fd);  // before the reply, as on the worker
    conn->bulk_done({out.begin(), out.end()});
  });
}

void UnixServer::Core::forward_to_control(const std::shared_ptr<Connection>& conn, DecodedRequest req) {
  // Weak references: neither may outlive the server (the connection's socket belongs to a worker).
  boost::asio::post(io_, [weak = weak_from_this(), weak_conn = std::weak_ptr<Connection>(conn),
                          req = std::move(req)]() mutable {
    auto core = weak.lock();
    auto c = core ? weak_conn.lock() : nullptr;
    if (!c) return;
    std::vector<std::byte> frame;
    std::vector<int> fds;
    if (!core->stopped_) {
      ReplyFds reply_fds;
      auto out = core->handle(*c, req, -1, core->control_tx_, reply_fds);
      frame.assign(out.begin(), out.end());
      // The handler keeps its fds (they are sent, not closed, by the server): the worker sends copies.
      for (size_t i = 0; i < reply_fds.count; ++i) {
        int d = ::fcntl(reply_fds.fds[i], F_DUPFD_CLOEXEC, 0);
        if (d >= 0) fds.push_back(d);
      }
    }
    c->send_from_elsewhere(std::move(frame), std::move(fds), true);
  });
}

std::span<const std::byte> UnixServer::Core::handle(Connection& conn, DecodedRequest& req, int fd,
                                                    FrameBuffer& out, ReplyFds& reply_fds) {
  uint16_t type = req.header.type;
  rdmad_status status = req.status;
  std::span<const std::byte> frame;
  if (req.action == DecodeAction::kReplyError) {
    ipc_log()->debug("client request refused pid={} type={} error={}", conn.peer().pid, type, base::q(req.reason));
    frame = write_error(out, conn.version() != 0 ? conn.version() : proto::kVersionMin, req.header.request_id,
                        status, req.reason);
  } else {
    frame = dispatch(conn, req, fd, out, reply_fds, &status);
  }
  metrics_.request(type <= proto::kMaxRequestType ? type : 0, status);
  return frame;
}

std::span<const std::byte> UnixServer::Core::dispatch(Connection& conn, DecodedRequest& req, int fd,
                                                      FrameBuffer& out, ReplyFds& reply_fds,
                                                      rdmad_status* status) {
  const uint64_t id = req.header.request_id;
  auto type = static_cast<MsgType>(req.header.type);
  auto fail = [&](const Error& e) {
    *status = e.status;
    return write_error(out, conn.version() != 0 ? conn.version() : proto::kVersionMin, id, e.status,
                       e.message);
  };
  *status = RDMAD_OK;
  if (type == MsgType::kHello) {
    auto& hello = std::get<proto::HelloRequest>(req.body);
    conn.set_version(std::min(hello.max_version, proto::kVersionMax));
    FrameWriter w(out, conn.version(), proto::reply_type(type), id);
    if (conn.version() < proto::kVersionSessions) {
      w.append(
          proto::HelloReply{conn.version(), 0, static_cast<uint32_t>(proto::kMaxFrameBytes), instance_id_});
      return w.finish();
    }
    proto::HelloReplyV2 reply{conn.version(), 0, static_cast<uint32_t>(proto::kMaxFrameBytes), instance_id_, {}};
    const SessionToken token = random_token();
    std::memcpy(reply.session, token.data(), token.size());
    if (store_ != nullptr)
      store_->session_started(
          {conn.peer().conn_id, conn.peer().uid, conn.peer().pid, token, conn.peer().pod_uid});
    w.append(reply);
    return w.finish();
  }
  FrameWriter w(out, conn.version(), proto::reply_type(type), id);
  switch (type) {
    case MsgType::kQueryNics: {
      auto nics = inventory_.nics();
      std::vector<uint32_t> all(nics.size());
      for (uint32_t i = 0; i < all.size(); ++i) all[i] = i;
      return nic_list(w, nics, all);
    }
    case MsgType::kNearestNics: {
      auto nics = inventory_.nics();
      auto near = nearest_nics(nics, std::get<proto::NearestNicsRequest>(req.body), config_.diagnose_root);
      if (!near.ok()) return fail(near.error());
      return nic_list(w, nics, near.value());
    }
    case MsgType::kRegisterHost: {
      auto r = service_.register_host(conn.peer(), fd, std::get<proto::RegisterHostRequest>(req.body));
      return r.ok() ? registered(w, r.value()) : fail(r.error());
    }
    case MsgType::kRegisterDmabuf: {
      auto r = service_.register_dmabuf(conn.peer(), fd, std::get<proto::RegisterDmabufRequest>(req.body));
      return r.ok() ? registered(w, r.value()) : fail(r.error());
    }
    case MsgType::kDeregister: {
      auto r = service_.deregister(conn.peer(), std::get<proto::DeregisterRequest>(req.body).handle);
      return r.ok() ? w.finish() : fail(r.error());
    }
    case MsgType::kListRegistrations: {
      auto& l = std::get<proto::ListRequest>(req.body);
      bool more = false;
      auto entries = service_.list(conn.peer().conn_id, l.after_handle, l.max_entries, &more);
      w.append(proto::ListReply{static_cast<uint32_t>(entries.size()), more ? 1u : 0u});
      for (const auto& e : entries) w.append(e);
      return w.finish();
    }
    case MsgType::kQueryRegistration: {
      auto r = service_.query(conn.peer().conn_id, std::get<proto::QueryRegistrationRequest>(req.body).handle);
      return r.ok() ? registered(w, r.value()) : fail(r.error());
    }
    case MsgType::kResume: {
      SessionToken token;
      std::memcpy(token.data(), std::get<proto::ResumeRequest>(req.body).session, token.size());
      w.append(resume(conn, token));
      return w.finish();
    }
    case MsgType::kDiagnose: {
      std::string text = diagnose_gpudirect(config_.diagnose_root, inventory_.nics(), registrar_);
      if (diagnose_extra_) text += diagnose_extra_();
      text.resize(std::min(text.size(), proto::kMaxFrameBytes - sizeof(proto::Header)));
      w.append_bytes(text.data(), text.size());
      return w.finish();
    }
    case MsgType::kFlowOpen:
    case MsgType::kFlowClose:
    case MsgType::kExport:
    case MsgType::kImport:
    case MsgType::kRevoke:
    case MsgType::kNodeId:
      return dispatch_flow(conn, req, out, reply_fds, status);
    case MsgType::kListFlows:
    case MsgType::kListAllRegistrations:
    case MsgType::kCcShow:
    case MsgType::kCcSet:
    case MsgType::kReload:
    case MsgType::kNicDetails:
    case MsgType::kTestStall:
    case MsgType::kListPeers:
    case MsgType::kListGids:
    case MsgType::kStatus:
      return dispatch_admin(conn, req, out, status);
    case MsgType::kHello:
    case MsgType::kError:
      break;
  }
  return fail(Error{RDMAD_ERR_PROTOCOL, "unexpected request type"});
}

}  // namespace rdmad::clients
