// Flow frames: grants of remote memory, their acknowledgement and revocation, posted receive
// buffers and send completions.
#include "byte_codec.h"
#include "rdmad/peer/wire.h"

namespace rdmad::peer {
using codec::Reader;
using codec::Writer;

namespace {

void put_keys(Writer& w, const std::vector<GrantKey>& keys) {
  w.u8(static_cast<uint8_t>(keys.size()));
  for (const GrantKey& k : keys) {
    w.u16(k.nic_index);
    w.u32(k.rkey);
  }
}

// 1..kMaxGrantKeys keys, at most one per NIC.
bool get_keys(Reader& r, std::vector<GrantKey>& keys) {
  const uint8_t n = r.u8();
  if (n == 0 || n > kMaxGrantKeys) return false;
  for (uint8_t i = 0; i < n && !r.failed(); ++i) {
    GrantKey k;
    k.nic_index = r.u16();
    k.rkey = r.u32();
    for (const GrantKey& other : keys) {
      if (other.nic_index == k.nic_index) return false;
    }
    keys.push_back(k);
  }
  return !r.failed();
}

// Non-empty and its last byte addressable (it may end at the top of the address space).
bool range_ok(uint64_t iova, uint64_t length) { return length > 0 && length - 1 <= ~uint64_t{0} - iova; }

}  // namespace

std::vector<uint8_t> encode(const Grant& m) {
  Writer w;
  w.bytes(m.token);
  w.u64(m.iova);
  w.u64(m.length);
  w.u32(m.rights);
  w.u64(m.channel_hint);
  put_keys(w, m.keys);
  return w.take();
}

std::optional<Grant> decode_grant(std::span<const uint8_t> payload) {
  Reader r(payload);
  Grant m;
  r.bytes(m.token);
  m.iova = r.u64();
  m.length = r.u64();
  m.rights = r.u32();
  m.channel_hint = r.u64();
  if (!get_keys(r, m.keys) || !r.done()) return std::nullopt;
  if (!range_ok(m.iova, m.length) || m.rights == 0 || (m.rights & ~kGrantRightsMask) != 0)
    return std::nullopt;
  return m;
}

std::vector<uint8_t> encode(const GrantAck& m) {
  Writer w;
  w.bytes(m.token);
  w.u32(m.status);
  return w.take();
}

std::optional<GrantAck> decode_grant_ack(std::span<const uint8_t> payload) {
  Reader r(payload);
  GrantAck m;
  r.bytes(m.token);
  m.status = r.u32();
  if (!r.done()) return std::nullopt;
  return m;
}

std::vector<uint8_t> encode(const Revoke& m) {
  Writer w;
  w.bytes(m.token);
  return w.take();
}

std::optional<Revoke> decode_revoke(std::span<const uint8_t> payload) {
  Reader r(payload);
  Revoke m;
  r.bytes(m.token);
  if (!r.done()) return std::nullopt;
  return m;
}

std::vector<uint8_t> encode(const RecvPost& m) {
  Writer w;
  w.u64(m.channel);
  w.u64(m.recv_id);
  w.u64(m.iova);
  w.u64(m.length);
  put_keys(w, m.keys);
  return w.take();
}

std::optional<RecvPost> decode_recv_post(std::span<const uint8_t> payload) {
  Reader r(payload);
  RecvPost m;
  m.channel = r.u64();
  m.recv_id = r.u64();
  m.iova = r.u64();
  m.length = r.u64();
  if (!get_keys(r, m.keys) || !r.done() || !range_ok(m.iova, m.length)) return std::nullopt;
  return m;
}

std::vector<uint8_t> encode(const SendDone& m) {
  Writer w;
  w.u64(m.channel);
  w.u64(m.recv_id);
  w.u64(m.bytes);
  w.u32(static_cast<uint32_t>(m.status));
  return w.take();
}

std::optional<SendDone> decode_send_done(std::span<const uint8_t> payload) {
  Reader r(payload);
  SendDone m;
  m.channel = r.u64();
  m.recv_id = r.u64();
  m.bytes = r.u64();
  m.status = static_cast<int32_t>(r.u32());
  if (!r.done()) return std::nullopt;
  return m;
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
      return decode_recv_post(payload).has_value();
    case MessageType::kSendDone:
      return decode_send_done(payload).has_value();
    default:
      return true;
  }
}

const char* to_string(MessageType type) {
  switch (type) {
    case MessageType::kHello:
      return "hello";
    case MessageType::kAuth:
      return "auth";
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
  }
  return "unknown";
}

}  // namespace rdmad::peer
