#include "rdmad/daemon/peer/wire.h"

#include <algorithm>

#include "byte_codec.h"
#include "rdmad/base/assert.h"

namespace rdmad::peer {
using codec::decode_with;
using codec::encode_with;
using codec::Reader;
using codec::Writer;

namespace {

constexpr auto kPingLayout = [](auto& c, auto& m) { c.field(m.seq); };
constexpr auto kNicEndpointLayout = [](auto& c, auto& e) {
  c.field(e.nic_name);
  c.field(e.nic_index);
  c.field(e.qp_index);
  c.field(e.link);
  c.field(e.gid.raw);
  c.field(e.lid);
  c.field(e.udp_port);
  c.field(e.qpn);
  c.field(e.psn);
  c.field(e.mtu_bytes);
};

}  // namespace

bool is_known(uint16_t type) { return type >= 1 && type != 2 && type <= static_cast<uint16_t>(MessageType::kRecvCancel); }

std::optional<FrameHeader> decode_header(std::span<const uint8_t, kHeaderBytes> bytes, uint32_t max_payload,
                                         std::string* error) {
  Reader r(bytes);
  FrameHeader h;
  h.length = r.u32();
  h.type = r.u16();
  const uint16_t reserved = r.u16();
  if (reserved != 0) {
    *error = "reserved header bits set";
  } else if (!is_known(h.type)) {
    *error = "unknown frame type " + std::to_string(h.type);
  } else if (h.length > max_payload) {
    *error = "frame of " + std::to_string(h.length) + " bytes exceeds " + std::to_string(max_payload);
  } else {
    return h;
  }
  return std::nullopt;
}

std::vector<uint8_t> encode_frame(MessageType type, std::span<const uint8_t> payload) {
  Writer w;
  w.u32(static_cast<uint32_t>(payload.size()));
  w.u16(static_cast<uint16_t>(type));
  w.u16(0);
  w.bytes(payload);
  return w.take();
}

std::vector<uint8_t> encode(const Hello& m) {
  Writer w;
  w.u32(m.magic);
  w.u16(m.version);
  w.u8(0);  // flags
  w.str8(m.node_id);
  return w.take();
}

std::optional<Hello> decode_hello(std::span<const uint8_t> payload) {
  Reader r(payload);
  Hello m;
  m.magic = r.u32();
  m.version = r.u16();
  if (r.failed()) return std::nullopt;
  // A stranger or another version: return what was read so the caller can say which.
  if (m.magic != kMagic || m.version != kVersion) return m;
  const uint8_t flags = r.u8();
  m.node_id = r.str8();
  if (!r.done() || flags != 0 || m.node_id.empty() || m.node_id.size() > kMaxNodeIdBytes) return std::nullopt;
  return m;
}

std::vector<uint8_t> encode(const Ping& m) { return encode_with(m, kPingLayout); }

std::optional<Ping> decode_ping(std::span<const uint8_t> payload) { return decode_with<Ping>(payload, kPingLayout); }

std::vector<uint8_t> encode(const Endpoints& m) {
  Writer w;
  w.u8(static_cast<uint8_t>(m.kind));
  w.u32(m.session);
  if (is_rebuild(m.kind)) {
    w.u16(m.nic_index);
    w.u8(static_cast<uint8_t>(m.cause));
  }
  RDMAD_ASSERT(m.endpoints.size() <= kMaxEndpoints, "{} endpoints in one message", m.endpoints.size());
  w.u8(static_cast<uint8_t>(m.endpoints.size()));
  for (const NicEndpoint& e : m.endpoints) kNicEndpointLayout(w, e);
  return w.take();
}

std::optional<Endpoints> decode_endpoints(std::span<const uint8_t> payload) {
  Reader r(payload);
  Endpoints m;
  const uint8_t kind = r.u8();
  if (kind > static_cast<uint8_t>(EndpointsKind::kRebuildAck)) return std::nullopt;
  m.kind = static_cast<EndpointsKind>(kind);
  m.session = r.u32();
  if (is_rebuild(m.kind)) {
    m.nic_index = r.u16();
    const uint8_t cause = r.u8();
    if (cause > static_cast<uint8_t>(RebuildCause::kRequestRefused)) return std::nullopt;
    m.cause = static_cast<RebuildCause>(cause);
  }
  const uint8_t n = r.u8();
  for (uint8_t i = 0; i < n && !r.failed(); ++i) {
    NicEndpoint e;
    kNicEndpointLayout(r, e);
    const bool mtu_ok = e.mtu_bytes >= 256 && e.mtu_bytes <= 4096 && (e.mtu_bytes & (e.mtu_bytes - 1)) == 0;
    // InfiniBand ends name a unicast LID; RoCE ends none (they route by GID).
    if (e.link != EndpointLink::kRoce && e.link != EndpointLink::kInfiniband) return std::nullopt;
    const bool lid_ok = e.link == EndpointLink::kInfiniband ? e.lid >= 1 && e.lid <= kMaxUnicastLid : e.lid == 0;
    if (!mtu_ok || !lid_ok || e.qpn > 0xFFFFFF || e.psn > 0xFFFFFF || e.nic_name.empty()) return std::nullopt;
    // A QP named twice: the receiver would pair one of its QPs with either (at most 255 checks of
    // at most 254 each, once per handshake).
    const bool twice = std::any_of(m.endpoints.begin(), m.endpoints.end(), [&](const NicEndpoint& o) {
      return o.nic_index == e.nic_index && o.qp_index == e.qp_index;
    });
    if (twice) return std::nullopt;
    m.endpoints.push_back(std::move(e));
  }
  if (!r.done()) return std::nullopt;
  return m;
}

}  // namespace rdmad::peer
