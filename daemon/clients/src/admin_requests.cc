// Serving the operator's requests (rdmactl): registrations of every client from the table, the
// rest through the AdminHandler the daemon installed. Served on the admin socket only, which
// accepts uid 0 and the daemon's own uid; on the client socket they are refused, even to root (a
// container's root that has the client socket mounted is not the node's operator).
#include <unistd.h>

#include <algorithm>

#include "connection.h"

namespace rdmad::clients {

using proto::MsgType;

namespace {

// A ListReply and the entries of one page, cut to max_entries whatever the handler returned.
template <class Entry>
std::span<const std::byte> write_page(FrameWriter& w, std::vector<Entry> entries, uint32_t max_entries, bool more) {
  if (entries.size() > max_entries) entries.resize(max_entries), more = true;
  w.append(proto::ListReply{static_cast<uint32_t>(entries.size()), more ? 1u : 0u});
  for (const auto& e : entries) w.append(e);
  return w.finish();
}

}  // namespace

std::span<const std::byte> UnixServer::Core::dispatch_admin(Connection& conn, DecodedRequest& req,
                                                            FrameBuffer& out, rdmad_status* status) {
  const uint64_t id = req.header.request_id;
  const uint16_t version = conn.version();
  auto type = static_cast<MsgType>(req.header.type);
  auto fail = [&](const Error& e) {
    *status = e.status;
    return write_error(out, version, id, e.status, e.message);
  };
  if (!conn.peer().admin)
    return fail(Error{RDMAD_ERR_ADMIN_SOCKET,
                      config_.admin_socket_path.empty()
                          ? std::string("admin requests go to the admin socket, and this daemon has none")
                          : "admin requests go to the admin socket " + config_.admin_socket_path +
                                " (root and the daemon's uid only), not to the client socket"});
  FrameWriter w(out, version, proto::reply_type(type), id);
  if (type == MsgType::kListAllRegistrations) {
    auto& l = std::get<proto::ListRequest>(req.body);
    bool more = false;
    auto entries = service_.list_all(l.after_handle, l.max_entries, &more);
    w.append(proto::ListReply{static_cast<uint32_t>(entries.size()), more ? 1u : 0u});
    for (const auto& e : entries) w.append(e);
    return w.finish();
  }
  if (admin_ == nullptr) return fail(Error{RDMAD_ERR_NOT_SUPPORTED, "this server has no admin handler"});
  switch (type) {
    case MsgType::kListFlows: {
      auto& l = std::get<proto::ListRequest>(req.body);
      bool more = false;
      return write_page(w, admin_->list_flows(l.after_handle, l.max_entries, &more), l.max_entries, more);
    }
    case MsgType::kCcShow: {
      auto r = admin_->cc_show(std::get<proto::CcShowRequest>(req.body));
      if (!r.ok()) return fail(r.error());
      auto& shown = r.value();
      shown.head.knob_count = static_cast<uint32_t>(std::min<size_t>(shown.knobs.size(), proto::kMaxCcKnobs));
      w.append(shown.head);
      for (uint32_t i = 0; i < shown.head.knob_count; ++i) w.append(shown.knobs[i]);
      return w.finish();
    }
    case MsgType::kCcSet: {
      auto r = admin_->cc_set(std::get<proto::CcSetRequest>(req.body));
      if (!r.ok()) return fail(r.error());
      w.append(r.value());
      return w.finish();
    }
    case MsgType::kNicDetails: {
      auto r = admin_->nic_details(std::get<proto::NicDetailsRequest>(req.body));
      if (!r.ok()) return fail(r.error());
      w.append(r.value());
      return w.finish();
    }
    case MsgType::kReload: {
      auto r = admin_->reload();
      return r.ok() ? w.finish() : fail(r.error());
    }
    case MsgType::kTestStall: {
      const auto& s = std::get<proto::TestStallRequest>(req.body);
      auto r = admin_->test_stall(s.thread, s.seconds);
      return r.ok() ? w.finish() : fail(r.error());
    }
    case MsgType::kListPeers:
    case MsgType::kListGids: {
      auto& l = std::get<proto::ListRequest>(req.body);
      bool more = false;
      if (type == MsgType::kListPeers)
        return write_page(w, admin_->list_peers(l.after_handle, l.max_entries, &more), l.max_entries, more);
      return write_page(w, admin_->list_gids(l.after_handle, l.max_entries, &more), l.max_entries, more);
    }
    case MsgType::kStatus:
      w.append(admin_->status());
      return w.finish();
    default:
      break;
  }
  return fail(Error{RDMAD_ERR_PROTOCOL, "unexpected request type"});
}

}  // namespace rdmad::clients
