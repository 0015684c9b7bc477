#include "rdmad/daemon/clients/request_decoder.h"

#include <cstring>

namespace rdmad::clients {
namespace {

using proto::MsgType;

DecodedRequest fail(DecodedRequest d, rdmad_status status, const char* reason) {
  d.action = DecodeAction::kReplyError;
  d.status = status;
  d.reason = reason;
  return d;
}

template <class T>
T load(std::span<const std::byte> body) {
  T value;
  std::memcpy(&value, body.data(), sizeof(T));
  return value;
}

bool range_overflows(uint64_t base, uint64_t length) { return base + length < base; }

bool is_power_of_two(uint32_t v) { return v != 0 && (v & (v - 1)) == 0; }
constexpr uint32_t kMaxRingDepth = 65536;

bool is_zero(const proto::CcKnob& k) {
  static constexpr proto::CcKnob kZero{};
  return std::memcmp(&k, &kZero, sizeof(k)) == 0;
}

// The failed check of a per-NIC page request (cc_show, nic_details), named for its type.
struct NicPageErrors {
  const char* unterminated;
  const char* reserved;
  const char* cursor;
};
constexpr NicPageErrors kCcShowErrors{"cc_show: nic not NUL-terminated", "cc_show: reserved field set",
                                      "cc_show: cursor must be 0 when a nic is named"};
constexpr NicPageErrors kNicDetailsErrors{"nic_details: nic not NUL-terminated", "nic_details: reserved field set",
                                          "nic_details: cursor must be 0 when a nic is named"};

// nullptr when the request is well-formed: a NUL-terminated NIC name (empty: every NIC, paged by
// cursor) and a zero reserved field.
template <class R>
const char* check_nic_page(const R& r, const NicPageErrors& e) {
  if (!proto::is_terminated(r.nic)) return e.unterminated;
  if (r.reserved != 0) return e.reserved;
  if (r.nic[0] != '\0' && r.cursor != 0) return e.cursor;
  return nullptr;
}

// nullptr when the request is well-formed, else the failed check.
const char* check_cc_set(const proto::CcSetRequest& r) {
  if (!proto::is_terminated(r.nic)) return "cc_set: nic not NUL-terminated";
  if (r.reserved != 0) return "cc_set: reserved field set";
  if (r.count == 0 || r.count > proto::kMaxCcSetKnobs) return "cc_set: count must be 1..16";
  for (uint32_t i = 0; i < proto::kMaxCcSetKnobs; ++i) {
    const proto::CcKnob& k = r.knobs[i];
    if (i >= r.count) {
      if (!is_zero(k)) return "cc_set: entries after count must be zero";
      continue;
    }
    if (!proto::is_terminated(k.name) || k.name[0] == '\0')
      return "cc_set: knob name must be a non-empty NUL-terminated string";
    if (k.flags != 0 || k.reserved != 0) return "cc_set: knob flags or reserved field set";
    for (uint32_t j = 0; j < i; ++j)
      if (std::strcmp(r.knobs[j].name, k.name) == 0) return "cc_set: a knob is named twice";
  }
  return nullptr;
}

DecodedRequest validate_body(DecodedRequest d, std::span<const std::byte> body) {
  switch (static_cast<MsgType>(d.header.type)) {
    case MsgType::kHello: {
      auto h = load<proto::HelloRequest>(body);
      if (h.flags != 0) return fail(d, RDMAD_ERR_INVALID_ARGUMENT, "hello: reserved flags set");
      if (h.min_version > h.max_version)
        return fail(d, RDMAD_ERR_INVALID_ARGUMENT, "hello: min_version > max_version");
      if (h.max_version < proto::kVersionMin || h.min_version > proto::kVersionMax)
        return fail(d, RDMAD_ERR_VERSION, "hello: no protocol version in common");
      d.body = h;
      break;
    }
    case MsgType::kNearestNics: {
      auto n = load<proto::NearestNicsRequest>(body);
      if (n.kind != RDMAD_MEM_HOST && n.kind != RDMAD_MEM_GPU)
        return fail(d, RDMAD_ERR_INVALID_ARGUMENT, "nearest_nics: kind must be host (1) or gpu (2)");
      if (!proto::is_terminated(n.pci_address))
        return fail(d, RDMAD_ERR_INVALID_ARGUMENT, "nearest_nics: pci_address not NUL-terminated");
      if (n.numa_node < -1) return fail(d, RDMAD_ERR_INVALID_ARGUMENT, "nearest_nics: numa_node < -1");
      if (n.kind == RDMAD_MEM_GPU && n.pci_address[0] == '\0')
        return fail(d, RDMAD_ERR_INVALID_ARGUMENT, "nearest_nics: gpu location needs a pci_address");
      d.body = n;
      break;
    }
    case MsgType::kRegisterHost: {
      auto r = load<proto::RegisterHostRequest>(body);
      if (r.length == 0) return fail(d, RDMAD_ERR_INVALID_ARGUMENT, "register_host: zero length");
      if (range_overflows(r.offset, r.length))
        return fail(d, RDMAD_ERR_INVALID_ARGUMENT, "register_host: offset + length overflows");
      if (!valid_access(r.access))
        return fail(d, RDMAD_ERR_INVALID_ARGUMENT, "register_host: invalid access flags");
      d.body = r;
      break;
    }
    case MsgType::kRegisterDmabuf: {
      auto r = load<proto::RegisterDmabufRequest>(body);
      if (r.length == 0) return fail(d, RDMAD_ERR_INVALID_ARGUMENT, "register_dmabuf: zero length");
      if (range_overflows(r.offset, r.length) || range_overflows(r.iova, r.length))
        return fail(d, RDMAD_ERR_INVALID_ARGUMENT, "register_dmabuf: offset or iova + length overflows");
      if (!valid_access(r.access))
        return fail(d, RDMAD_ERR_INVALID_ARGUMENT, "register_dmabuf: invalid access flags");
      if (!proto::is_terminated(r.gpu_pci_address))
        return fail(d, RDMAD_ERR_INVALID_ARGUMENT, "register_dmabuf: gpu_pci_address not NUL-terminated");
      d.body = r;
      break;
    }
    case MsgType::kDeregister: {
      auto r = load<proto::DeregisterRequest>(body);
      if (r.handle == 0) return fail(d, RDMAD_ERR_INVALID_ARGUMENT, "deregister: handle 0 is never valid");
      d.body = r;
      break;
    }
    case MsgType::kListRegistrations:
    case MsgType::kListAllRegistrations:
    case MsgType::kListFlows: {
      // Flow and node-wide entries are larger: a page of them holds fewer to stay within one frame.
      const auto type = static_cast<MsgType>(d.header.type);
      const bool flows = type == MsgType::kListFlows;
      const uint32_t max_page = flows                                  ? proto::kMaxFlowListEntries
                                : type == MsgType::kListAllRegistrations ? proto::kMaxRegistrationListEntries
                                                                         : proto::kMaxListEntries;
      auto r = load<proto::ListRequest>(body);
      if (r.reserved != 0)
        return fail(d, RDMAD_ERR_INVALID_ARGUMENT,
                    flows ? "list_flows: reserved field set" : "list: reserved field set");
      static_assert(proto::kMaxFlowListEntries == 24 && proto::kMaxRegistrationListEntries == 40 &&
                    proto::kMaxListEntries == 64);  // the messages below
      if (r.max_entries == 0 || r.max_entries > max_page)
        return fail(d, RDMAD_ERR_INVALID_ARGUMENT,
                    flows                                  ? "list_flows: max_entries must be 1..24"
                    : type == MsgType::kListAllRegistrations ? "list: max_entries must be 1..40"
                                                             : "list: max_entries must be 1..64");
      d.body = r;
      break;
    }
    case MsgType::kListPeers:
    case MsgType::kListGids: {
      const bool peers = d.header.type == static_cast<uint16_t>(MsgType::kListPeers);
      auto r = load<proto::ListRequest>(body);
      if (r.reserved != 0)
        return fail(d, RDMAD_ERR_INVALID_ARGUMENT, peers ? "list_peers: reserved field set" : "list_gids: reserved field set");
      if (r.max_entries == 0 || r.max_entries > (peers ? proto::kMaxPeerListEntries : proto::kMaxGidListEntries))
        return fail(d, RDMAD_ERR_INVALID_ARGUMENT,
                    peers ? "list_peers: max_entries must be 1..8" : "list_gids: max_entries must be 1..32");
      d.body = r;
      break;
    }
    case MsgType::kCcShow: {
      auto r = load<proto::CcShowRequest>(body);
      if (auto reason = check_nic_page(r, kCcShowErrors)) return fail(d, RDMAD_ERR_INVALID_ARGUMENT, reason);
      d.body = r;
      break;
    }
    case MsgType::kNicDetails: {
      auto r = load<proto::NicDetailsRequest>(body);
      if (auto reason = check_nic_page(r, kNicDetailsErrors)) return fail(d, RDMAD_ERR_INVALID_ARGUMENT, reason);
      d.body = r;
      break;
    }
    case MsgType::kTestStall: {
      auto r = load<proto::TestStallRequest>(body);
      if (!proto::is_terminated(r.thread)) return fail(d, RDMAD_ERR_INVALID_ARGUMENT, "test_stall: thread not NUL-terminated");
      if (r.reserved != 0) return fail(d, RDMAD_ERR_INVALID_ARGUMENT, "test_stall: reserved field set");
      if (r.seconds == 0 || r.seconds > 3600) return fail(d, RDMAD_ERR_INVALID_ARGUMENT, "test_stall: seconds must be 1..3600");
      d.body = r;
      break;
    }
    case MsgType::kCcSet: {
      auto r = load<proto::CcSetRequest>(body);
      if (auto reason = check_cc_set(r)) return fail(d, RDMAD_ERR_INVALID_ARGUMENT, reason);
      d.body = r;
      break;
    }
    case MsgType::kFlowOpen: {
      // The older, shorter request is the same fields without nic_mask (0: every NIC).
      proto::FlowOpenRequest r{};
      std::memcpy(&r, body.data(), body.size());
      if (!proto::is_terminated(r.peer) || r.peer[0] == '\0')
        return fail(d, RDMAD_ERR_INVALID_ARGUMENT, "flow_open: peer must be a NUL-terminated node id");
      if ((r.sq_depth != 0 && !is_power_of_two(r.sq_depth)) || (r.cq_depth != 0 && !is_power_of_two(r.cq_depth)))
        return fail(d, RDMAD_ERR_INVALID_ARGUMENT, "flow_open: ring depths must be 0 or powers of two");
      if (r.sq_depth > kMaxRingDepth || r.cq_depth > kMaxRingDepth)
        return fail(d, RDMAD_ERR_INVALID_ARGUMENT, "flow_open: ring depth above 65536");
      if (r.reserved != 0) return fail(d, RDMAD_ERR_INVALID_ARGUMENT, "flow_open: reserved field set");
      d.body = r;
      break;
    }
    case MsgType::kFlowClose:
      d.body = load<proto::FlowCloseRequest>(body);
      break;
    case MsgType::kExport: {
      auto r = load<proto::ExportRequest>(body);
      if (!proto::is_terminated(r.peer) || r.peer[0] == '\0')
        return fail(d, RDMAD_ERR_INVALID_ARGUMENT, "export: peer must be a NUL-terminated node id");
      if (r.length == 0 || range_overflows(r.offset, r.length))
        return fail(d, RDMAD_ERR_INVALID_ARGUMENT, "export: empty range or offset + length overflows");
      if (r.rights == 0 || (r.rights & ~uint32_t{RDMAD_ACCESS_REMOTE_WRITE | RDMAD_ACCESS_REMOTE_READ}) != 0)
        return fail(d, RDMAD_ERR_INVALID_ARGUMENT, "export: rights must be REMOTE_WRITE and/or REMOTE_READ");
      if (r.reserved != 0) return fail(d, RDMAD_ERR_INVALID_ARGUMENT, "export: reserved field set");
      d.body = r;
      break;
    }
    case MsgType::kImport:
      d.body = load<proto::ImportRequest>(body);
      break;
    case MsgType::kRevoke:
      d.body = load<proto::RevokeRequest>(body);
      break;
    case MsgType::kResume:
      d.body = load<proto::ResumeRequest>(body);
      break;
    case MsgType::kQueryRegistration: {
      auto r = load<proto::QueryRegistrationRequest>(body);
      if (r.handle == 0) return fail(d, RDMAD_ERR_INVALID_ARGUMENT, "query_registration: handle 0 is never valid");
      d.body = r;
      break;
    }
    case MsgType::kQueryNics:
    case MsgType::kDiagnose:
    case MsgType::kReload:
    case MsgType::kStatus:
    case MsgType::kNodeId:
    case MsgType::kError:
      break;
  }
  d.action = DecodeAction::kDispatch;
  return d;
}

}  // namespace

bool valid_access(uint32_t access) {
  if ((access & ~uint32_t{RDMAD_ACCESS_ALL}) != 0) return false;
  bool needs_local_write = (access & (RDMAD_ACCESS_REMOTE_WRITE | RDMAD_ACCESS_REMOTE_ATOMIC)) != 0;
  return !needs_local_write || (access & RDMAD_ACCESS_LOCAL_WRITE) != 0;
}

DecodedRequest decode_request(std::span<const std::byte> frame, size_t fd_count, bool control_truncated,
                              uint16_t negotiated_version) {
  DecodedRequest d;
  if (frame.size() < sizeof(proto::Header)) {
    d.reason = "frame shorter than the header";
    return d;
  }
  std::memcpy(&d.header, frame.data(), sizeof(proto::Header));
  if (d.header.magic != proto::kMagic) {
    d.reason = "bad magic";
    return d;
  }
  if (d.header.length != frame.size() - sizeof(proto::Header)) {
    d.reason = "length field disagrees with the frame size";
    return d;
  }
  auto body = frame.subspan(sizeof(proto::Header));
  uint16_t type = d.header.type;
  long expected = (type & proto::kReplyBit) != 0 ? -1 : proto::request_body_bytes(type);
  if (expected < 0) return fail(d, RDMAD_ERR_PROTOCOL, "unknown request type");
  if (d.header.flags != 0) return fail(d, RDMAD_ERR_PROTOCOL, "reserved header flags set");
  bool is_hello = type == static_cast<uint16_t>(MsgType::kHello);
  uint16_t want_version = negotiated_version != 0 ? negotiated_version : proto::kVersionMin;
  if (d.header.version != want_version)
    return fail(d, RDMAD_ERR_VERSION, "header version is not the negotiated one");
  if (!proto::request_body_valid(type, body.size(), want_version)) {
    if (type == static_cast<uint16_t>(MsgType::kFlowOpen) && body.size() == sizeof(proto::FlowOpenRequest))
      return fail(d, RDMAD_ERR_VERSION, "flow_open: a nic_mask needs protocol version 3");
    return fail(d, RDMAD_ERR_PROTOCOL, "bad body length for type");
  }
  if (control_truncated)
    return fail(d, RDMAD_ERR_PROTOCOL, "too many file descriptors (control data truncated)");
  if (fd_count != proto::request_fd_count(type))
    return fail(d, RDMAD_ERR_INVALID_ARGUMENT, "wrong number of file descriptors for type");
  if (negotiated_version == 0 && !is_hello) return fail(d, RDMAD_ERR_PROTOCOL, "hello required first");
  if (negotiated_version != 0 && is_hello) return fail(d, RDMAD_ERR_PROTOCOL, "hello already done");
  if (proto::needs_sessions(type) && negotiated_version < proto::kVersionSessions)
    return fail(d, RDMAD_ERR_VERSION, "request needs protocol version 2");
  return validate_body(d, body);
}

}  // namespace rdmad::clients
