#pragma once
// The peer protocol on the wire, inside TLS 1.3 (or plain TCP with insecure = true). Every frame
// is an 8-byte header (big-endian: u32 payload length, u16 type, u16 reserved = 0) and a payload.
// A frame with a bad header or payload is a protocol error: the connection it came on is closed,
// the others are untouched.
//
//   hello     u32 magic "RDMP", u16 version, u8 flags (0), u8 id length, id
//   ready     empty: I have checked your hello (and that your credential names that id)
//   ping/pong u64 sequence
//   endpoints u8 kind (offer, answer, ack, rebuild offer/answer/ack), u32 session, [u16 nic
//             index, u8 cause: rebuild kinds only], u8 count, then per QP: u8 name length, name,
//             u16 nic index, u16 qp index, u8 link (0 RoCE, 1 InfiniBand), 16-byte GID, u16 LID
//             (InfiniBand: 1..0xbfff; RoCE: 0), u16 UDP port, u32 QPN, u32 PSN, u32 MTU bytes
// Version 2 added the rebuild cause; version 3 moved authentication into TLS (type 2, the HMAC
// proof, and the hello's key flag and nonce are gone); version 4 added the endpoint's link and LID
// (InfiniBand routes by LID) and the per-slice rkeys of grant and receive keys (a registration
// the NIC holds as several MRs); version 5 added the owner uid of a recv post (channels are scoped
// to the uid that opened the flows); version 6 sends send-dones on the lanes' QPs too, as SENDs
// of the send-done encoding below into receives each side keeps posted on every lane QP (a peer
// without them would hold those SENDs in RNR retries for ever); version 7 sends a SEND of one chunk
// as an RDMA WRITE with immediate into the receive (the immediate consumes one of those receives
// and completes the receive without a send-done) and adds recv query and recv state (13, 14: was
// such a send placed, when its lane failed before it was acknowledged); version 8 advertises
// receives on the lanes too (lane mail, below: every message sent there starts with its kind, and
// a lane receive is kMailBytes), and a recv post carries the session it belongs to and its number
// among the receives advertised in that session (the sender takes them in that order, once each,
// whichever way and however often they came), and adds recv cancel (15: a receive advertised and
// withdrawn unfilled, whose credit the sender drops); version 9 adds to a recv query the number of
// the receiver's QP the WRITE went to (the receiver fails the lane for it only while that QP is
// still the lane's). A peer speaking another version is refused at hello.
// Several QPs per NIC pair ([flow] qps_per_lane) need no new field and no new version: every
// endpoint has named its (nic index, qp index) since version 1. Each side offers or answers its own
// qps_per_lane QPs per NIC and pairs QP j only with the other's QP j of the same NIC, so a lane gets
// min(k_a, k_b) QPs, and a daemon that predates the key (one QP, index 0) pairs exactly as before.
// An endpoints message names a (nic, qp) at most once, and at most kMaxEndpoints QPs.
//   grant, grant ack, revoke, recv post, send done, recv query, recv state: see the structs below
//   (wire_flow.cc).
//   idle      empty (type 12, added within version 4: a daemon that predates it closes the
//             connection on the unknown type, which ends the session as asked)
#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <variant>
#include <vector>

#include "rdmad/verbs/types.h"

namespace rdmad::peer {

inline constexpr uint32_t kMagic = 0x52444D50;  // "RDMP"
inline constexpr uint16_t kVersion = 9;
inline constexpr size_t kHeaderBytes = 8;
inline constexpr size_t kMaxNodeIdBytes = 64;

enum class MessageType : uint16_t {
  kHello = 1,
  // 2 was the HMAC proof (version 2); unknown since version 3.
  kReady = 3,
  kPing = 4,
  kPong = 5,
  kEndpoints = 6,
  kGrant = 7,
  kGrantAck = 8,
  kRevoke = 9,
  kRecvPost = 10,
  kSendDone = 11,
  // Empty: "this node has used our session for nothing (no flow, export or grant) for its
  // idle_session_ms; close it unless you use it". The receiver closes the connection or ignores it.
  kIdle = 12,
  // A SEND that went as a WRITE with immediate lost its lane before it was acknowledged: was it
  // placed? (version 7; flows.md, "Sends by WRITE with immediate")
  kRecvQuery = 13,
  kRecvState = 14,
  kRecvCancel = 15,
};

/// True for the types above (not 2).
bool is_known(uint16_t type);

struct FrameHeader {
  uint32_t length = 0;
  uint16_t type = 0;
};

/// Parses a header; nullopt (with `error` set) when reserved bits are set, the type is unknown or
/// the length exceeds max_payload.
std::optional<FrameHeader> decode_header(std::span<const uint8_t, kHeaderBytes> bytes, uint32_t max_payload,
                                         std::string* error);

/// A whole frame (header + payload).
std::vector<uint8_t> encode_frame(MessageType type, std::span<const uint8_t> payload);

struct Hello {
  uint32_t magic = kMagic;
  uint16_t version = kVersion;
  std::string node_id;
};
std::vector<uint8_t> encode(const Hello& m);
/// nullopt when the payload is malformed (magic and version are checked by the caller, so a
/// stranger can be told apart from a broken frame).
std::optional<Hello> decode_hello(std::span<const uint8_t> payload);

struct Ping {
  uint64_t seq = 0;
};
std::vector<uint8_t> encode(const Ping& m);
std::optional<Ping> decode_ping(std::span<const uint8_t> payload);

/// How a NIC's port is addressed: RoCE by GID (every packet carries a GRH), InfiniBand by LID
/// (a GRH only where the peer is in another subnet).
enum class EndpointLink : uint8_t { kRoce = 0, kInfiniband = 1 };

/// The largest unicast LID (0xc000 and up are multicast, 0xffff the permissive LID).
inline constexpr uint16_t kMaxUnicastLid = 0xbfff;

/// The most QP endpoints one endpoints message carries (its count is one byte).
inline constexpr size_t kMaxEndpoints = 255;

/// One RC QP's end as the other side needs it to connect.
struct NicEndpoint {
  std::string nic_name;
  uint16_t nic_index = 0;
  uint16_t qp_index = 0;
  EndpointLink link = EndpointLink::kRoce;
  verbs::Gid gid;       // RoCE: the source address; InfiniBand: the port GID (subnet prefix + GUID)
  uint16_t lid = 0;     // InfiniBand: the port's LID (1..kMaxUnicastLid); RoCE: 0
  uint16_t udp_port = 0;
  uint32_t qpn = 0;
  uint32_t psn = 0;  // 24 bits: the first PSN this end sends
  uint32_t mtu_bytes = 0;
  bool operator==(const NicEndpoint&) const = default;
};

enum class EndpointsKind : uint8_t {
  kOffer = 0,
  kAnswer = 1,
  kAck = 2,
  // Rebuild of one NIC's QPs on a ready session. An empty endpoint list in a rebuild answer or
  // ack means "this side failed: abandon the rebuild".
  kRebuildOffer = 3,
  kRebuildAnswer = 4,
  kRebuildAck = 5,
};

/// True for the three rebuild kinds (their message carries nic_index and cause).
inline bool is_rebuild(EndpointsKind k) { return k >= EndpointsKind::kRebuildOffer; }

/// Why a NIC's QPs are rebuilt, so that both sides judge the path alike: after a path fault
/// (retries exhausted, port down) the lane fails over and rejoins after a back-off on both sides;
/// after a request the peer refused (remote access or operation error: the QP went to ERR, the
/// path is fine) neither side counts a failover and the lane rejoins at once.
enum class RebuildCause : uint8_t {
  kPathFault = 0,
  kRequestRefused = 1,
};

struct Endpoints {
  EndpointsKind kind = EndpointsKind::kOffer;
  uint32_t session = 0;
  uint16_t nic_index = 0;  // rebuild kinds only: the NIC being rebuilt
  RebuildCause cause = RebuildCause::kPathFault;  // rebuild kinds only
  std::vector<NicEndpoint> endpoints;
};
/// At most kMaxEndpoints endpoints (more is a bug of the caller: QpConnector refuses to make them).
std::vector<uint8_t> encode(const Endpoints& m);
/// nullopt when malformed, including a (nic index, qp index) named twice.
std::optional<Endpoints> decode_endpoints(std::span<const uint8_t> payload);

// ---- Flow frames (exchanged between the flow engines of two daemons) ----

using Token = std::array<uint8_t, 16>;
inline constexpr size_t kMaxGrantKeys = 32;
/// Slices one key may have: a registration larger than the NIC's per-MR limit is held as several
/// MRs (rdma_core: 3.5 GiB each, at most 64 per registration).
inline constexpr size_t kMaxKeySlices = 64;
/// Rights a grant may give: verbs::kAccessRemoteWrite and kAccessRemoteRead (the same bits as
/// RDMAD_ACCESS_REMOTE_WRITE and RDMAD_ACCESS_REMOTE_READ of the client API).
inline constexpr uint32_t kGrantRightsMask = verbs::kAccessRemoteWrite | verbs::kAccessRemoteRead;

/// The rkey(s) of a registration on one of the exporter's NICs. Where the NIC holds the range as
/// one MR, `rkey` covers all of it and slice_bytes is 0. Where it holds several (slices), slice k
/// covers bytes [k·slice_bytes, (k+1)·slice_bytes) of the range (the last one the rest): `rkey` is
/// slice 0's and slice_rkeys those of slices 1..n-1, so n = ceil(length / slice_bytes) is at most
/// kMaxKeySlices. An access must use the rkey of the slice its bytes are in.
struct GrantKey {
  uint16_t nic_index = 0;
  uint32_t rkey = 0;
  uint64_t slice_bytes = 0;
  std::vector<uint32_t> slice_rkeys = {};
  bool operator==(const GrantKey&) const = default;
};

/// Exporter → importer: memory the importer may access. A valid grant has 1..kMaxGrantKeys keys
/// on distinct NICs, non-zero rights within kGrantRightsMask, length > 0 and iova + length not
/// wrapping.
struct Grant {
  Token token{};
  uint64_t iova = 0;
  uint64_t length = 0;
  uint32_t rights = 0;
  uint64_t channel_hint = 0;
  std::vector<GrantKey> keys;
  bool operator==(const Grant&) const = default;
};
std::vector<uint8_t> encode(const Grant& m);
std::optional<Grant> decode_grant(std::span<const uint8_t> payload);

/// Importer → exporter: the grant was received. status 0: stored.
struct GrantAck {
  Token token{};
  uint32_t status = 0;
  bool operator==(const GrantAck&) const = default;
};
std::vector<uint8_t> encode(const GrantAck& m);
std::optional<GrantAck> decode_grant_ack(std::span<const uint8_t> payload);

/// Exporter → importer: the grant is withdrawn.
struct Revoke {
  Token token{};
  bool operator==(const Revoke&) const = default;
};
std::vector<uint8_t> encode(const Revoke& m);
std::optional<Revoke> decode_revoke(std::span<const uint8_t> payload);

/// Receiver → sender: a receive buffer is posted on a channel. Keys as in a grant; length > 0,
/// iova + length not wrapping. `session` is the peer session's number (endpoints), `seq` the
/// receive's place among those the receiver advertised to this peer in that session (0, 1, ...):
/// sent again after a lane failed holding it, or overtaken on another lane, it is still taken once
/// and in order.
struct RecvPost {
  uint32_t session = 0;
  uint64_t seq = 0;
  uint64_t channel = 0;
  // The uid of the client whose flow posted it: a send matches only receives of its own flow's
  // owner (the same numeric uid on both nodes), so another local user cannot fill or take them.
  uint32_t owner_uid = 0;
  uint64_t recv_id = 0;
  uint64_t iova = 0;
  uint64_t length = 0;
  std::vector<GrantKey> keys;
  bool operator==(const RecvPost&) const = default;
};
std::vector<uint8_t> encode(const RecvPost& m);
std::optional<RecvPost> decode_recv_post(std::span<const uint8_t> payload);

/// Sender → receiver: a send was placed into recv_id (status 0) or failed.
struct SendDone {
  uint64_t channel = 0;
  uint64_t recv_id = 0;
  uint64_t bytes = 0;
  int32_t status = 0;
  bool operator==(const SendDone&) const = default;
};
std::vector<uint8_t> encode(const SendDone& m);
std::optional<SendDone> decode_send_done(std::span<const uint8_t> payload);

/// Sender → receiver: a send into recv_id went as an RDMA WRITE with immediate on the lane of NIC
/// `nic_index`, which failed before the WRITE was acknowledged. The receiver stops that lane's QPs
/// (nothing of them executes any more), then answers with a RecvState. `qp_num` (version 9) is the
/// receiver's QP of that lane the sender's QPs were connected to (0: not known): when the lane
/// has other QPs now, those were stopped and their completions taken before the rebuild that
/// replaced them, and the fresh ones stay up.
struct RecvQuery {
  uint64_t channel = 0;
  uint64_t recv_id = 0;
  uint16_t nic_index = 0;
  uint32_t qp_num = 0;
  bool operator==(const RecvQuery&) const = default;
};
std::vector<uint8_t> encode(const RecvQuery& m);
std::optional<RecvQuery> decode_recv_query(std::span<const uint8_t> payload);

/// Receiver → sender: the answer to a RecvQuery.
enum class RecvStateKind : uint8_t {
  kPending = 0,  // still posted, nothing placed: send it again
  kPlaced = 1,   // the immediate arrived: the receive completed with the send's bytes
  kUnknown = 2,  // neither (withdrawn, or out of the lane's record): the send failed
};
struct RecvState {
  uint64_t recv_id = 0;
  RecvStateKind state = RecvStateKind::kUnknown;
  bool operator==(const RecvState&) const = default;
};
std::vector<uint8_t> encode(const RecvState& m);
std::optional<RecvState> decode_recv_state(std::span<const uint8_t> payload);

/// Receiver → sender (version 8): the receive advertised as `seq` in `session` was withdrawn before
/// anything filled it (its flow closed, or it failed): the sender drops its credit, or the
/// advertisement when it comes. Channel and owner uid as in the RecvPost.
struct RecvCancel {
  uint32_t session = 0;
  uint64_t seq = 0;
  uint64_t channel = 0;
  uint32_t owner_uid = 0;
  uint64_t recv_id = 0;
  bool operator==(const RecvCancel&) const = default;
};
std::vector<uint8_t> encode(const RecvCancel& m);
std::optional<RecvCancel> decode_recv_cancel(std::span<const uint8_t> payload);

/// Lane mail: what one side SENDs on a lane QP into one of the receives the other keeps posted on
/// each of them (kMailBytes each, so a longer message goes on the control channel): u8 kind, then
/// the message's own encoding.
inline constexpr uint32_t kMailBytes = 256;
enum class MailKind : uint8_t { kSendDone = 1, kRecvPost = 2, kRecvCancel = 3 };
using Mail = std::variant<SendDone, RecvPost, RecvCancel>;
std::vector<uint8_t> encode_mail(const Mail& m);
/// nullopt: an unknown kind, or a message that does not decode.
std::optional<Mail> decode_mail(std::span<const uint8_t> bytes);
/// The same messages as control-channel frames, when no lane can take them: the frame's type and
/// payload (the message's encoding, without the kind byte), and back (nullopt: `type` is not one
/// of theirs, or the payload does not decode).
MessageType frame_type(const Mail& m);
std::vector<uint8_t> encode(const Mail& m);
std::optional<Mail> decode_mail_frame(MessageType type, std::span<const uint8_t> payload);

/// True when `type` is not a flow frame, or its payload decodes. The connection closes on a
/// malformed flow frame before it reaches the handlers.
bool flow_payload_valid(MessageType type, std::span<const uint8_t> payload);
/// "grant", "recv post", ... for log lines.
const char* to_string(MessageType type);

}  // namespace rdmad::peer
