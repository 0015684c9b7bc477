// Flow frames: grants of remote memory, their acknowledgement and revocation, posted receive
// buffers and send completions.
#include "byte_codec.h"
#include "rdmad/daemon/peer/wire.h"

namespace rdmad::peer {
using codec::decode_with;
using codec::encode_with;
using codec::Reader;
using codec::Writer;

namespace {

// Per key: u16 nic index, u32 rkey (slice 0), u64 slice bytes (0: one MR), u8 count + the rkeys of
// slices 1..count.
void keys_field(Writer& w, const std::vector<GrantKey>& keys, uint64_t) {
  w.u8(static_cast<uint8_t>(keys.size()));
  for (const GrantKey& k : keys) {
    w.u16(k.nic_index);
    w.u32(k.rkey);
    w.u64(k.slice_bytes);
    w.u8(static_cast<uint8_t>(k.slice_rkeys.size()));
    for (uint32_t rkey : k.slice_rkeys) w.u32(rkey);
  }
}

// The slices of a key cover exactly `length` bytes: one MR (slice bytes 0, no further rkeys), or
// ceil(length / slice bytes) <= kMaxKeySlices slices.
bool slices_ok(uint64_t slice_bytes, size_t more, uint64_t length) {
  if (slice_bytes == 0) return more == 0;
  if (more == 0 || more + 1 > kMaxKeySlices || length == 0) return false;
  if (slice_bytes > (length - 1) / more) return false;  // slices 1..more would start past the end
  return length - more * slice_bytes <= slice_bytes;
}

// 1..kMaxGrantKeys keys, at most one per NIC, each slicing `length` exactly.
void keys_field(Reader& r, std::vector<GrantKey>& keys, uint64_t length) {
  const uint8_t n = r.u8();
  if (n == 0 || n > kMaxGrantKeys) return r.fail();
  for (uint8_t i = 0; i < n && !r.failed(); ++i) {
    GrantKey k;
    k.nic_index = r.u16();
    k.rkey = r.u32();
    k.slice_bytes = r.u64();
    const uint8_t more = r.u8();
    if (!slices_ok(k.slice_bytes, more, length)) return r.fail();
    for (uint8_t s = 0; s < more && !r.failed(); ++s) k.slice_rkeys.push_back(r.u32());
    for (const GrantKey& other : keys) {
      if (other.nic_index == k.nic_index) return r.fail();
    }
    keys.push_back(std::move(k));
  }
}

// Non-empty and its last byte addressable (it may end at the top of the address space).
bool range_ok(uint64_t iova, uint64_t length) { return length > 0 && length - 1 <= ~uint64_t{0} - iova; }

// The layouts (docs/flows.md, "Peer protocol"), one per message, for both directions.
constexpr auto kGrantLayout = [](auto& c, auto& m) {
  c.field(m.token);
  c.field(m.iova);
  c.field(m.length);
  c.field(m.rights);
  c.field(m.channel_hint);
  keys_field(c, m.keys, m.length);
};
constexpr auto kGrantAckLayout = [](auto& c, auto& m) {
  c.field(m.token);
  c.field(m.status);
};
constexpr auto kRevokeLayout = [](auto& c, auto& m) { c.field(m.token); };
// Which advertised receive: the head of a recv post, and all of a recv cancel.
constexpr auto kRecvCancelLayout = [](auto& c, auto& m) {
  c.field(m.session);
  c.field(m.seq);
  c.field(m.channel);
  c.field(m.owner_uid);
  c.field(m.recv_id);
};
constexpr auto kRecvPostLayout = [](auto& c, auto& m) {
  kRecvCancelLayout(c, m);
  c.field(m.iova);
  c.field(m.length);
  keys_field(c, m.keys, m.length);
};
constexpr auto kSendDoneLayout = [](auto& c, auto& m) {
  c.field(m.channel);
  c.field(m.recv_id);
  c.field(m.bytes);
  c.field(m.status);
};
constexpr auto kRecvQueryLayout = [](auto& c, auto& m) {
  c.field(m.channel);
  c.field(m.recv_id);
  c.field(m.nic_index);
  c.field(m.qp_num);
};
constexpr auto kRecvStateLayout = [](auto& c, auto& m) {
  c.field(m.recv_id);
  c.field(m.state);
};

}  // namespace

std::vector<uint8_t> encode(const Grant& m) { return encode_with(m, kGrantLayout); }

std::optional<Grant> decode_grant(std::span<const uint8_t> payload) {
  auto m = decode_with<Grant>(payload, kGrantLayout);
  if (m && (!range_ok(m->iova, m->length) || m->rights == 0 || (m->rights & ~kGrantRightsMask) != 0))
    return std::nullopt;
  return m;
}

std::vector<uint8_t> encode(const GrantAck& m) { return encode_with(m, kGrantAckLayout); }

std::optional<GrantAck> decode_grant_ack(std::span<const uint8_t> payload) {
  return decode_with<GrantAck>(payload, kGrantAckLayout);
}

std::vector<uint8_t> encode(const Revoke& m) { return encode_with(m, kRevokeLayout); }

std::optional<Revoke> decode_revoke(std::span<const uint8_t> payload) {
  return decode_with<Revoke>(payload, kRevokeLayout);
}

std::vector<uint8_t> encode(const RecvPost& m) { return encode_with(m, kRecvPostLayout); }

std::optional<RecvPost> decode_recv_post(std::span<const uint8_t> payload) {
  auto m = decode_with<RecvPost>(payload, kRecvPostLayout);
  if (m && !range_ok(m->iova, m->length)) return std::nullopt;
  return m;
}

std::vector<uint8_t> encode(const SendDone& m) { return encode_with(m, kSendDoneLayout); }

std::optional<SendDone> decode_send_done(std::span<const uint8_t> payload) {
  return decode_with<SendDone>(payload, kSendDoneLayout);
}

std::vector<uint8_t> encode(const RecvQuery& m) { return encode_with(m, kRecvQueryLayout); }

std::optional<RecvQuery> decode_recv_query(std::span<const uint8_t> payload) {
  return decode_with<RecvQuery>(payload, kRecvQueryLayout);
}

std::vector<uint8_t> encode(const RecvState& m) { return encode_with(m, kRecvStateLayout); }

std::optional<RecvState> decode_recv_state(std::span<const uint8_t> payload) {
  auto m = decode_with<RecvState>(payload, kRecvStateLayout);
  if (m && m->state > RecvStateKind::kUnknown) return std::nullopt;
  return m;
}

std::vector<uint8_t> encode(const RecvCancel& m) { return encode_with(m, kRecvCancelLayout); }

std::optional<RecvCancel> decode_recv_cancel(std::span<const uint8_t> payload) {
  return decode_with<RecvCancel>(payload, kRecvCancelLayout);
}

// The variant's alternatives are in MailKind order, from 1; each kind has its frame type.
static_assert(std::is_same_v<std::variant_alternative_t<0, Mail>, SendDone> &&
              std::is_same_v<std::variant_alternative_t<1, Mail>, RecvPost> &&
              std::is_same_v<std::variant_alternative_t<2, Mail>, RecvCancel>);
constexpr MessageType kMailFrameTypes[] = {MessageType::kSendDone, MessageType::kRecvPost, MessageType::kRecvCancel};

MessageType frame_type(const Mail& m) { return kMailFrameTypes[m.index()]; }

std::vector<uint8_t> encode(const Mail& m) {
  return std::visit([](const auto& msg) { return encode(msg); }, m);
}

std::optional<Mail> decode_mail_frame(MessageType type, std::span<const uint8_t> payload) {
  switch (type) {
    case MessageType::kSendDone:
      if (auto d = decode_send_done(payload)) return Mail{*d};
      return std::nullopt;
    case MessageType::kRecvPost:
      if (auto r = decode_recv_post(payload)) return Mail{std::move(*r)};
      return std::nullopt;
    case MessageType::kRecvCancel:
      if (auto c = decode_recv_cancel(payload)) return Mail{*c};
      return std::nullopt;
    default:
      return std::nullopt;
  }
}

std::vector<uint8_t> encode_mail(const Mail& m) {
  std::vector<uint8_t> out = encode(m);
  out.insert(out.begin(), static_cast<uint8_t>(m.index() + 1));
  return out;
}

std::optional<Mail> decode_mail(std::span<const uint8_t> bytes) {
  if (bytes.empty() || bytes[0] == 0 || bytes[0] > std::size(kMailFrameTypes)) return std::nullopt;
  return decode_mail_frame(kMailFrameTypes[bytes[0] - 1], bytes.subspan(1));
}

bool flow_payload_valid(MessageType type, std::span<const uint8_t> payload) {
  switch (type) {
    case MessageType::kGrant:
      return decode_grant(payload).has_value();
    case MessageType::kGrantAck:
      return decode_grant_ack(payload).has_value();
    case MessageType::kRevoke:
      return decode_revoke(payload).has_value();
    case MessageType::kRecvPost:
    case MessageType::kSendDone:
    case MessageType::kRecvCancel:
      return decode_mail_frame(type, payload).has_value();
    case MessageType::kRecvQuery:
      return decode_recv_query(payload).has_value();
    case MessageType::kRecvState:
      return decode_recv_state(payload).has_value();
    case MessageType::kIdle:
      return payload.empty();
    default:
      return true;
  }
}

const char* to_string(MessageType type) {
  switch (type) {
    case MessageType::kHello:
      return "hello";
    case MessageType::kReady:
      return "ready";
    case MessageType::kPing:
      return "ping";
    case MessageType::kPong:
      return "pong";
    case MessageType::kEndpoints:
      return "endpoints";
    case MessageType::kGrant:
      return "grant";
    case MessageType::kGrantAck:
      return "grant ack";
    case MessageType::kRevoke:
      return "revoke";
    case MessageType::kRecvPost:
      return "recv post";
    case MessageType::kSendDone:
      return "send done";
    case MessageType::kIdle:
      return "idle";
    case MessageType::kRecvQuery:
      return "recv query";
    case MessageType::kRecvState:
      return "recv state";
    case MessageType::kRecvCancel:
      return "recv cancel";
  }
  return "unknown";
}

}  // namespace rdmad::peer
