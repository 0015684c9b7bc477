// libFuzzer target for the peer protocol's decoders, which read what other nodes send inside TLS
// (or over plain TCP with insecure = true): a peer that passed TLS is still not trusted to be well-formed.
// The first 8 bytes of an input are a frame header, the rest a payload that every payload decoder
// reads (a connection only calls the one the header names; trying all of them covers more per
// input), and as lane mail. Nothing may crash; whatever decodes must re-encode to bytes that decode to the same
// message; flow_payload_valid must agree with the flow decoders.
#include <cstdint>
#include <cstdlib>
#include <span>
#include <string>

#include "rdmad/daemon/peer/wire.h"

namespace {

using namespace rdmad::peer;

void check(bool ok) {
  if (!ok) std::abort();
}

bool same(const Hello& a, const Hello& b) {
  return a.magic == b.magic && a.version == b.version && a.node_id == b.node_id;
}

bool same(const Endpoints& a, const Endpoints& b) {
  return a.kind == b.kind && a.session == b.session && a.nic_index == b.nic_index && a.endpoints == b.endpoints;
}

bool same(const Ping& a, const Ping& b) { return a.seq == b.seq; }

template <typename T>
bool same(const T& a, const T& b) {
  return a == b;
}

// Decodes with `decode`; if that succeeds, the message must survive encode → decode unchanged.
// Returns whether the payload decoded.
template <typename Decode>
bool round_trips(Decode decode, std::span<const uint8_t> payload) {
  const auto m = decode(payload);
  if (!m) return false;
  const std::vector<uint8_t> bytes = encode(*m);
  const auto again = decode(std::span<const uint8_t>(bytes));
  check(again.has_value());
  check(same(*again, *m));
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < kHeaderBytes) return 0;
  std::string error;
  const auto header = decode_header(std::span<const uint8_t, kHeaderBytes>(data, kHeaderBytes), 1u << 20, &error);
  check(header.has_value() == error.empty());
  const std::span<const uint8_t> payload(data + kHeaderBytes, size - kHeaderBytes);
  if (header) {
    check(is_known(header->type));
    const std::vector<uint8_t> frame = encode_frame(static_cast<MessageType>(header->type), payload);
    std::string e2;
    const auto h2 = decode_header(std::span<const uint8_t, kHeaderBytes>(frame.data(), kHeaderBytes),
                                  1u << 20, &e2);
    check(h2 && h2->type == header->type && h2->length == payload.size());
  }
  round_trips(decode_hello, payload);
  round_trips(decode_ping, payload);
  round_trips(decode_endpoints, payload);
  const bool grant = round_trips(decode_grant, payload);
  const bool ack = round_trips(decode_grant_ack, payload);
  const bool revoke = round_trips(decode_revoke, payload);
  const bool post = round_trips(decode_recv_post, payload);
  const bool done = round_trips(decode_send_done, payload);
  const bool query = round_trips(decode_recv_query, payload);
  const bool state = round_trips(decode_recv_state, payload);
  const bool cancel = round_trips(decode_recv_cancel, payload);
  check(flow_payload_valid(MessageType::kGrant, payload) == grant);
  check(flow_payload_valid(MessageType::kGrantAck, payload) == ack);
  check(flow_payload_valid(MessageType::kRevoke, payload) == revoke);
  check(flow_payload_valid(MessageType::kRecvPost, payload) == post);
  check(flow_payload_valid(MessageType::kSendDone, payload) == done);
  check(flow_payload_valid(MessageType::kRecvQuery, payload) == query);
  check(flow_payload_valid(MessageType::kRecvState, payload) == state);
  check(flow_payload_valid(MessageType::kRecvCancel, payload) == cancel);
  // The same messages as control frames: decode_mail_frame agrees with the decoders.
  check(decode_mail_frame(MessageType::kSendDone, payload).has_value() == done);
  check(decode_mail_frame(MessageType::kRecvPost, payload).has_value() == post);
  check(decode_mail_frame(MessageType::kRecvCancel, payload).has_value() == cancel);
  check(!decode_mail_frame(MessageType::kGrant, payload).has_value());
  check(flow_payload_valid(MessageType::kPing, payload));  // not a flow frame
  // Lane mail: what a peer SENDs into our lane QPs' receives.
  if (const auto mail = decode_mail(payload)) {
    const std::vector<uint8_t> bytes = encode_mail(*mail);
    const auto again = decode_mail(std::span<const uint8_t>(bytes));
    check(again.has_value() && *again == *mail);
  }
  return 0;
}
