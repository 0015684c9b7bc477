// Wire protocol between librdmad and rdmad over a SOCK_SEQPACKET Unix socket (docs/protocol.md).
//
// One datagram is one frame: a 24-byte Header followed by a fixed-layout little-endian body whose
// size is fixed per type (or fixed + count * entry for lists). File descriptors ride along with
// SCM_RIGHTS. Both sides include this header; its layouts are the protocol, so every struct has a
// static_assert'ed size and explicit reserved fields (no implicit padding).
#pragma once

#include <sys/socket.h>
#include <unistd.h>

#include <bit>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "rdmad/rdmad.h"

namespace rdmad::proto {

static_assert(std::endian::native == std::endian::little, "the wire format is little-endian");

inline constexpr uint32_t kMagic = 0x444d4452;  // "RDMD" in memory order
inline constexpr uint16_t kVersionMin = 1;
// Version 2: the hello reply carries a session token (HelloReplyV2), and kResume and
// kQueryRegistration exist (a session survives a daemon restart). Version 3: kFlowOpen may carry a
// nic_mask (FlowOpenRequest, 88 bytes; the 80-byte FlowOpenRequestV1 stays valid at every
// version). A client of an older version is served as before.
inline constexpr uint16_t kVersionMax = 3;
inline constexpr uint16_t kVersionSessions = 2;
inline constexpr uint16_t kVersionFlowNics = 3;
inline constexpr size_t kMaxFrameBytes = 4096;
inline constexpr size_t kMaxFdsPerFrame = 4;  // the receive cmsg buffer holds this many
inline constexpr uint32_t kMaxNics = RDMAD_MAX_NICS;
inline constexpr uint32_t kMaxListEntries = 64;
inline constexpr uint16_t kReplyBit = 0x8000;

enum class MsgType : uint16_t {
  kHello = 1,
  kQueryNics = 2,
  kNearestNics = 3,
  kRegisterHost = 4,
  kRegisterDmabuf = 5,
  kDeregister = 6,
  kListRegistrations = 7,
  kDiagnose = 8,
  kFlowOpen = 9,
  kFlowClose = 10,
  kExport = 11,
  kImport = 12,
  kRevoke = 13,
  // Admin requests (rdmactl): uid 0 or the daemon's own uid only.
  kListFlows = 14,
  kListAllRegistrations = 15,
  kCcShow = 16,
  kCcSet = 17,
  kReload = 18,
  kNicDetails = 19,
  kListPeers = 20,
  kListGids = 21,
  kStatus = 22,
  // Version 2: take back a session of the daemon's previous run; a registration's current keys.
  kResume = 23,
  kQueryRegistration = 24,
  // The node id this daemon's flows come from (empty body; flows must be on).
  kNodeId = 25,
  // Test hook, refused unless rdmad runs with --enable-test-hooks (rdmactl's hidden `debug stall`).
  // Numbered apart from the admin range so that new admin types do not meet it.
  kTestStall = 90,
  kError = 0xffff,  // reply to any request that failed
};
inline constexpr uint16_t kMaxRequestType = 25;
inline constexpr uint16_t kFirstAdminType = 14;
inline constexpr uint16_t kLastAdminType = 22;
inline constexpr uint16_t kTestStallType = 90;

constexpr bool is_admin_request(uint16_t type) {
  return (type >= kFirstAdminType && type <= kLastAdminType) || type == kTestStallType;
}
// Request types a connection may send only once version 2 is negotiated.
constexpr bool needs_sessions(uint16_t type) {
  return type == static_cast<uint16_t>(MsgType::kResume) || type == static_cast<uint16_t>(MsgType::kQueryRegistration);
}

constexpr uint16_t reply_type(MsgType t) {
  return static_cast<uint16_t>(static_cast<uint16_t>(t) | kReplyBit);
}

struct Header {
  uint32_t magic;
  uint16_t version;  // kVersionMin before the hello exchange, the negotiated version after
  uint16_t type;     // MsgType, | kReplyBit for replies
  uint32_t length;   // body bytes after this header; must equal the datagram size - 24
  uint32_t flags;    // reserved, 0
  uint64_t request_id;
};
static_assert(sizeof(Header) == 24);

struct HelloRequest {
  uint16_t min_version;
  uint16_t max_version;
  uint32_t flags;  // reserved, 0
};
static_assert(sizeof(HelloRequest) == 8);

struct HelloReply {
  uint16_t version;
  uint16_t reserved;
  uint32_t max_frame_bytes;
  uint64_t instance_id;  // random per daemon start: a changed value means a restart
};
static_assert(sizeof(HelloReply) == 16);

inline constexpr size_t kSessionTokenBytes = 16;

// The hello reply when version 2 is negotiated: the connection's session token. Only this
// connection learns it; with it (and the same uid) a connection to the daemon's next run takes the
// session's registrations and exports back (kResume).
struct HelloReplyV2 {
  uint16_t version;
  uint16_t reserved;
  uint32_t max_frame_bytes;
  uint64_t instance_id;
  uint8_t session[kSessionTokenBytes];
};
static_assert(sizeof(HelloReplyV2) == 32);

struct ResumeRequest {
  uint8_t session[kSessionTokenBytes];  // the token of a connection to the daemon's previous run
};
static_assert(sizeof(ResumeRequest) == 16);

struct ResumeReply {
  uint32_t resumed;  // 1: this connection now holds the session's handles and exports (its token too)
  uint32_t handles;  // how many handles it holds now
  uint64_t reserved;
};
static_assert(sizeof(ResumeReply) == 16);

struct QueryRegistrationRequest {  // answered with a RegisterReply
  uint64_t handle;
};
static_assert(sizeof(QueryRegistrationRequest) == 8);

struct NicEntry {
  char name[32];  // NUL-terminated
  char backend[16];
  char pci_address[16];
  uint32_t link_state;  // rdmad_link_state
  uint32_t speed_mbps;
  int32_t numa_node;
  uint32_t index;
};
static_assert(sizeof(NicEntry) == 80);

struct NicListReply {  // followed by `count` NicEntry
  uint32_t count;
  uint32_t reserved;
};
static_assert(sizeof(NicListReply) == 8);

struct NearestNicsRequest {
  uint32_t kind;  // rdmad_mem_kind
  int32_t numa_node;
  char pci_address[16];
};
static_assert(sizeof(NearestNicsRequest) == 24);

struct RegisterHostRequest {  // + exactly one fd: a memfd sealed with F_SEAL_SHRINK
  uint64_t offset;
  uint64_t length;
  uint32_t access;    // RDMAD_ACCESS_*
  uint32_t nic_mask;  // 0: every NIC
};
static_assert(sizeof(RegisterHostRequest) == 24);

struct RegisterDmabufRequest {  // + exactly one fd: a dma-buf
  uint64_t offset;              // into the dma-buf
  uint64_t length;
  uint64_t iova;  // the address the MR answers to (the device pointer)
  uint32_t access;
  uint32_t nic_mask;
  char gpu_pci_address[16];  // the GPU's PCI address ("" unknown): flows prefer the NICs nearest to it
};
static_assert(sizeof(RegisterDmabufRequest) == 48);

struct NicKey {
  uint32_t nic_index;
  uint32_t lkey;
  uint32_t rkey;
  uint32_t reserved;
};
static_assert(sizeof(NicKey) == 16);

inline constexpr uint32_t kRegisterShared = 1;  // RegisterReply.flags: deduplicated with an existing MR

struct RegisterReply {
  uint64_t handle;
  uint64_t iova;
  uint64_t length;
  uint32_t nic_count;
  uint32_t flags;
  NicKey keys[kMaxNics];
};
static_assert(sizeof(RegisterReply) == 32 + 16 * kMaxNics);

struct DeregisterRequest {
  uint64_t handle;
};
static_assert(sizeof(DeregisterRequest) == 8);

struct ListRequest {
  uint64_t after_handle;  // 0 for the first page
  uint32_t max_entries;   // 1..kMaxListEntries
  uint32_t reserved;
};
static_assert(sizeof(ListRequest) == 16);

struct ListEntry {
  uint64_t handle;
  uint64_t offset;
  uint64_t length;
  uint32_t kind;  // rdmad_mem_kind
  uint32_t access;
};
static_assert(sizeof(ListEntry) == 32);

struct ListReply {  // followed by `count` ListEntry
  uint32_t count;
  uint32_t more;  // 1 when entries after the last one exist
};
static_assert(sizeof(ListReply) == 8);
static_assert(sizeof(Header) + sizeof(ListReply) + kMaxListEntries * sizeof(ListEntry) <= kMaxFrameBytes);
static_assert(sizeof(Header) + sizeof(NicListReply) + kMaxNics * sizeof(NicEntry) <= kMaxFrameBytes);

// Diagnose reply body: UTF-8 text, one "<ok|warn|fail|info> <check>: <detail>\n" line per check.

struct ErrorReply {
  int32_t status;  // rdmad_status
  uint32_t reserved;
  char message[248];  // NUL-terminated
};
static_assert(sizeof(ErrorReply) == 256);

inline constexpr size_t kMaxNodeIdBytes = 64;

// kFlowOpen as versions 1 and 2 send it (accepted at every version: it means nic_mask 0).
struct FlowOpenRequestV1 {
  char peer[kMaxNodeIdBytes];  // NUL-terminated node id of the peer daemon
  uint64_t channel;            // sends on this flow match receives on the peer's flow of the same channel
  uint32_t sq_depth;           // 0: the daemon's default; else a power of two
  uint32_t cq_depth;
};
static_assert(sizeof(FlowOpenRequestV1) == 80);

// kFlowOpen from version 3: FlowOpenRequestV1's fields, then the NICs the flow is pinned to.
struct FlowOpenRequest {
  char peer[kMaxNodeIdBytes];
  uint64_t channel;
  uint32_t sq_depth;
  uint32_t cq_depth;
  uint32_t nic_mask;  // bit i: NIC i of kQueryNics carries the flow while one of them is up; 0: every NIC
  uint32_t reserved;
};
static_assert(sizeof(FlowOpenRequest) == 88);
static_assert(offsetof(FlowOpenRequest, nic_mask) == sizeof(FlowOpenRequestV1));

// Reply to kFlowOpen; carries three fds: the ring memfd, the doorbell eventfd (client → daemon)
// and the completion eventfd (daemon → client).
struct FlowOpenReply {
  uint64_t flow_id;
  uint64_t ring_bytes;  // size of the memfd mapping
  uint32_t sq_depth;
  uint32_t cq_depth;
  uint32_t state;  // ring::FlowState at open
  uint32_t reserved;
};
static_assert(sizeof(FlowOpenReply) == 32);
inline constexpr size_t kFlowOpenFds = 3;

// Reply to kNodeId.
struct NodeIdReply {
  char node_id[kMaxNodeIdBytes];  // NUL-terminated
};
static_assert(sizeof(NodeIdReply) == 64);

struct FlowCloseRequest {
  uint64_t flow_id;
};
static_assert(sizeof(FlowCloseRequest) == 8);

struct ExportRequest {
  uint64_t handle;  // a registration of this connection
  uint64_t offset;  // bytes into it
  uint64_t length;
  uint32_t rights;  // RDMAD_ACCESS_REMOTE_WRITE | RDMAD_ACCESS_REMOTE_READ
  uint32_t reserved;
  char peer[kMaxNodeIdBytes];  // the only node that may use the token
};
static_assert(sizeof(ExportRequest) == 96);

struct ExportReply {
  uint8_t token[16];
};
static_assert(sizeof(ExportReply) == 16);

struct ImportRequest {
  uint64_t flow_id;  // a flow to the node that exported the token
  uint8_t token[16];
};
static_assert(sizeof(ImportRequest) == 24);

struct ImportReply {
  uint64_t remote_handle;  // for Sqe::remote_handle on that flow
  uint64_t length;
  uint32_t rights;
  uint32_t reserved;
};
static_assert(sizeof(ImportReply) == 24);

struct RevokeRequest {
  uint8_t token[16];
};
static_assert(sizeof(RevokeRequest) == 16);

// ---- admin requests ----
// kListFlows and kListAllRegistrations take a ListRequest (after_handle: the last flow id or
// handle of the previous page) and answer a ListReply followed by `count` entries.

inline constexpr uint32_t kMaxFlowListEntries = 24;  // max_entries of a kListFlows page
inline constexpr uint32_t kMaxRegistrationListEntries = 40;  // max_entries of a kListAllRegistrations page
inline constexpr size_t kPodUidBytes = 40;  // a pod UID (36 characters) and its NUL, padded

struct FlowEntry {
  uint64_t flow_id;
  uint64_t channel;
  char peer[kMaxNodeIdBytes];  // NUL-terminated node id
  uint32_t owner_uid;
  int32_t owner_pid;
  uint32_t state;      // ring::FlowState
  uint32_t in_flight;  // requests the client submitted whose completion it has not been given
  uint32_t sq_depth;
  uint32_t cq_depth;
  char owner_pod[kPodUidBytes];  // the owner's tenant: its pod's UID, or "" (the tenant is owner_uid)
};
static_assert(sizeof(FlowEntry) == 144);
static_assert(sizeof(Header) + sizeof(ListReply) + kMaxFlowListEntries * sizeof(FlowEntry) <= kMaxFrameBytes);

struct RegistrationEntry {
  uint64_t handle;
  uint64_t offset;
  uint64_t length;
  uint64_t pinned_bytes;  // bytes the daemon keeps mapped for the region behind the handle
  uint32_t owner_uid;
  int32_t owner_pid;
  uint32_t kind;  // rdmad_mem_kind
  uint32_t access;
  char owner_pod[kPodUidBytes];  // as FlowEntry::owner_pod
};
static_assert(sizeof(RegistrationEntry) == 88);
static_assert(sizeof(Header) + sizeof(ListReply) + kMaxRegistrationListEntries * sizeof(RegistrationEntry) <=
              kMaxFrameBytes);

inline constexpr size_t kMaxKnobNameBytes = 40;
inline constexpr uint32_t kMaxCcKnobs = 32;     // knobs in one kCcShow reply
inline constexpr uint32_t kMaxCcSetKnobs = 16;  // knobs in one kCcSet request
inline constexpr uint32_t kKnobUnreadable = 1;  // CcKnob.flags (kCcShow): the NIC did not give a value

struct CcKnob {
  char name[kMaxKnobNameBytes];  // NUL-terminated mlx5 knob name (cc::mlx5_knobs())
  int64_t value;                 // in the knob's units
  uint32_t flags;                // kKnobUnreadable in replies; 0 in requests
  uint32_t reserved;
};
static_assert(sizeof(CcKnob) == 56);

inline constexpr size_t kMaxNicNameBytes = 32;

// Shows one NIC's DCQCN parameters: `nic` names it ([[nic]] name), or, when empty, `cursor` walks
// the node's NICs from 0 (the reply's `more` says whether cursor + 1 exists).
struct CcShowRequest {
  char nic[kMaxNicNameBytes];
  uint32_t cursor;  // 0 when nic is set
  uint32_t reserved;
};
static_assert(sizeof(CcShowRequest) == 40);

inline constexpr uint32_t kCcSoftware = 1;  // CcShowReply.flags: DCQCN runs in the daemon (soft NIC)

struct CcShowReply {  // followed by `knob_count` CcKnob
  char nic[kMaxNicNameBytes];
  char backend[16];
  char source[96];  // where the values come from ("soft datapath", "vendor sysfs /sys/...")
  uint32_t flags;
  uint32_t more;
  uint32_t knob_count;
  uint32_t reserved;
};
static_assert(sizeof(CcShowReply) == 160);
static_assert(sizeof(Header) + sizeof(CcShowReply) + kMaxCcKnobs * sizeof(CcKnob) <= kMaxFrameBytes);

// Sets knobs on one NIC (`nic`) or, when empty, every NIC; all-or-nothing validation, then applied
// live (soft NICs on their datapath, hardware NICs written and read back).
struct CcSetRequest {
  char nic[kMaxNicNameBytes];
  uint32_t count;  // 1..kMaxCcSetKnobs entries of knobs are used; the rest are zero
  uint32_t reserved;
  CcKnob knobs[kMaxCcSetKnobs];
};
static_assert(sizeof(CcSetRequest) == 40 + 56 * kMaxCcSetKnobs);

struct CcSetReply {
  uint32_t nics;  // NICs changed
  uint32_t reserved;
};
static_assert(sizeof(CcSetReply) == 8);

// kReload: empty request and reply body; an error reply carries the configuration errors.

// kTestStall (test hook): the daemon's thread named `thread` ("datapath:NIC", "flow-engine")
// spins busy for `seconds`; the reply comes at once, empty. Refused with
// RDMAD_ERR_NOT_SUPPORTED unless the daemon runs with --enable-test-hooks.
struct TestStallRequest {
  char thread[64];
  uint32_t seconds;  // 1..3600
  uint32_t reserved;
};
static_assert(sizeof(TestStallRequest) == 72);

// One NIC's details for operators: `nic` names it ([[nic]] name), or, when empty, `cursor` walks
// the NICs the daemon opened from 0 (the reply's `more` says whether cursor + 1 exists).
struct NicDetailsRequest {
  char nic[kMaxNicNameBytes];
  uint32_t cursor;  // 0 when nic is set
  uint32_t reserved;
};
static_assert(sizeof(NicDetailsRequest) == 40);

struct NicDetailsReply {
  char nic[kMaxNicNameBytes];
  char backend[16];
  char device[32];
  char gid[48];  // the RoCEv2 address in use, as text
  uint32_t link_state;  // rdmad_link_state
  uint32_t speed_mbps;
  uint32_t mtu_bytes;   // active RoCE MTU
  uint32_t udp_port;
  uint32_t more;
  uint32_t dcqcn_qps;  // QPs whose software DCQCN state was sampled (soft NICs; 0 otherwise)
  double dcqcn_rate_min_mbps;
  double dcqcn_rate_mean_mbps;
  double dcqcn_alpha_max;
  // The device's counters (node_exporter / mlx5 meanings).
  uint64_t tx_bytes, rx_bytes, tx_packets, rx_packets;
  uint64_t np_cnp_sent, np_ecn_marked_roce_packets, rp_cnp_handled, rp_cnp_ignored;
  uint64_t retransmitted_packets, local_ack_timeout_err, out_of_sequence, rx_dropped;
};
static_assert(sizeof(NicDetailsReply) == 272);

// kListPeers and kListGids take a ListRequest whose after_handle is the number of entries of the
// previous pages (0 first) and answer a ListReply followed by `count` entries.
inline constexpr uint32_t kMaxPeerListEntries = 8;  // max_entries of a kListPeers page
inline constexpr uint32_t kMaxGidListEntries = 32;  // max_entries of a kListGids page

// PeerEntry.state.
enum class PeerState : uint32_t {
  kDown = 0,        // no connection (this node redials it with back-off; an accepting peer dials back)
  kConnecting = 1,  // TCP connect or handshake in progress
  kConnected = 2,   // the channel is up, its queue pairs are not (yet) ready
  kReady = 3,       // the channel is up and its queue pairs carry traffic
};

// PeerEntry.dialled: where this node knows the peer from.
enum class PeerSource : uint32_t {
  kAccepted = 0,  // it dialled this node
  kStatic = 1,    // a [[peers]] entry: this node dials it
  kDns = 2,       // found through [peer] discover (node_id empty: an address not identified yet)
};

// One peer daemon this node knows: dialled ([[peers]]), discovered, or connected to it at some point.
struct PeerEntry {
  char node_id[kMaxNodeIdBytes];
  char address[64];      // "host:port" it is dialled at, or "ip:port" of its connection; NUL-terminated
  char last_error[128];  // why its last connection closed or its last dial failed; empty: none
  uint64_t since_unix_ms;  // when it last came up or went down (the channel's start for one never up)
  uint64_t rtt_us;         // the last keepalive round trip on its connection; 0: none measured
  uint32_t state;          // PeerState
  uint32_t dialled;        // PeerSource (1: this node dials it, 0: it dialled this node, 2: discovered)
  uint32_t rails_up;       // local NICs whose queue pairs to it are connected
  uint32_t rails;          // local NICs (the most rails it can have)
};
static_assert(sizeof(PeerEntry) == 288);
static_assert(sizeof(Header) + sizeof(ListReply) + kMaxPeerListEntries * sizeof(PeerEntry) <= kMaxFrameBytes);

// One entry of a port's GID table (as show_gids prints it).
struct GidEntry {
  char nic[kMaxNicNameBytes];  // the [[nic]] on this port; empty: no [[nic]] names it
  char device[32];             // RDMA device ("mlx5_0"; a soft NIC's name)
  char netdev[16];             // the netdev the GID belongs to; empty: none (InfiniBand, soft)
  char type[16];               // "IB", "RoCE v1" or "RoCE v2"
  uint8_t gid[16];             // network order; IPv4 addresses in the ::ffff:a.b.c.d form
  uint32_t port;
  uint32_t index;
};
static_assert(sizeof(GidEntry) == 120);
static_assert(sizeof(Header) + sizeof(ListReply) + kMaxGidListEntries * sizeof(GidEntry) <= kMaxFrameBytes);

// StatusReply.health.
enum class Health : uint32_t { kOk = 0, kDegraded = 1, kFailing = 2 };

// kStatus: empty request. What the daemon is and how it is doing.
struct StatusReply {
  char version[32];
  char commit[48];
  char node_id[kMaxNodeIdBytes];
  char config_path[256];  // empty: running on the embedded default
  char reasons[1024];     // why health is not ok: "; "-separated findings, NUL-terminated
  char last_reload_error[512];  // the errors of the last reload when it failed; empty otherwise
  uint64_t start_time_unix_ms;
  uint64_t uptime_ms;
  uint64_t reloads_ok;
  uint64_t reloads_failed;
  uint32_t health;  // Health
  uint32_t nics;    // [[nic]] slots
  uint32_t nics_up;  // in service with the link up
  uint32_t peers;    // peers known (PeerEntry)
  uint32_t peers_ready;
  uint32_t peer_enabled;  // [peer] enabled
};
static_assert(sizeof(StatusReply) == 32 + 48 + 64 + 256 + 1024 + 512 + 32 + 24);

// Body size of a request type as this version of the protocol sends it, or -1 for an unknown
// type. Every request body is fixed, except that kFlowOpen may also be the older
// FlowOpenRequestV1 (request_body_valid).
constexpr long request_body_bytes(uint16_t type) {
  switch (static_cast<MsgType>(type)) {
    case MsgType::kHello:
      return sizeof(HelloRequest);
    case MsgType::kQueryNics:
      return 0;
    case MsgType::kNearestNics:
      return sizeof(NearestNicsRequest);
    case MsgType::kRegisterHost:
      return sizeof(RegisterHostRequest);
    case MsgType::kRegisterDmabuf:
      return sizeof(RegisterDmabufRequest);
    case MsgType::kDeregister:
      return sizeof(DeregisterRequest);
    case MsgType::kListRegistrations:
      return sizeof(ListRequest);
    case MsgType::kDiagnose:
      return 0;
    case MsgType::kFlowOpen:
      return sizeof(FlowOpenRequest);
    case MsgType::kFlowClose:
      return sizeof(FlowCloseRequest);
    case MsgType::kExport:
      return sizeof(ExportRequest);
    case MsgType::kImport:
      return sizeof(ImportRequest);
    case MsgType::kRevoke:
      return sizeof(RevokeRequest);
    case MsgType::kListFlows:
    case MsgType::kListAllRegistrations:
      return sizeof(ListRequest);
    case MsgType::kCcShow:
      return sizeof(CcShowRequest);
    case MsgType::kCcSet:
      return sizeof(CcSetRequest);
    case MsgType::kNicDetails:
      return sizeof(NicDetailsRequest);
    case MsgType::kReload:
    case MsgType::kStatus:
    case MsgType::kNodeId:
      return 0;
    case MsgType::kResume:
      return sizeof(ResumeRequest);
    case MsgType::kQueryRegistration:
      return sizeof(QueryRegistrationRequest);
    case MsgType::kTestStall:
      return sizeof(TestStallRequest);
    case MsgType::kListPeers:
    case MsgType::kListGids:
      return sizeof(ListRequest);
    case MsgType::kError:
      return -1;
  }
  return -1;
}

// Whether `bytes` is a valid body size for a known request type on a connection of `version`
// (before hello: kVersionMin). kFlowOpen: FlowOpenRequestV1 at every version, FlowOpenRequest
// (with its nic_mask) from kVersionFlowNics.
constexpr bool request_body_valid(uint16_t type, size_t bytes, uint16_t version) {
  if (type == static_cast<uint16_t>(MsgType::kFlowOpen))
    return bytes == sizeof(FlowOpenRequestV1) || (bytes == sizeof(FlowOpenRequest) && version >= kVersionFlowNics);
  const long expected = request_body_bytes(type);
  return expected >= 0 && bytes == static_cast<size_t>(expected);
}

// Number of fds a request type carries.
constexpr size_t request_fd_count(uint16_t type) {
  return type == static_cast<uint16_t>(MsgType::kRegisterHost) ||
                 type == static_cast<uint16_t>(MsgType::kRegisterDmabuf)
             ? 1
             : 0;
}

constexpr Header make_header(uint16_t version, uint16_t type, uint32_t length, uint64_t request_id) {
  return Header{kMagic, version, type, length, 0, request_id};
}

// Copies a NUL-terminated string into a fixed field, truncating and always terminating.
template <size_t N>
void copy_cstr(char (&dst)[N], const char* src) {
  size_t n = src ? std::strlen(src) : 0;
  if (n >= N) n = N - 1;
  std::memcpy(dst, src ? src : "", n);
  std::memset(dst + n, 0, N - n);
}

// True when a fixed string field holds a NUL within its bounds.
template <size_t N>
constexpr bool is_terminated(const char (&s)[N]) {
  for (size_t i = 0; i < N; ++i)
    if (s[i] == '\0') return true;
  return false;
}

// Receives one frame and the fds riding with it (MSG_CMSG_CLOEXEC; room for kMaxFdsPerFrame,
// more sets MSG_CTRUNC in msg.msg_flags). Retries EINTR. msg stays valid for take_fds().
class FrameReceiver {
 public:
  ssize_t receive(int fd, void* buf, size_t len, int flags) {
    iov_ = iovec{buf, len};
    msg = msghdr{};
    msg.msg_iov = &iov_;
    msg.msg_iovlen = 1;
    msg.msg_control = control_;
    msg.msg_controllen = sizeof(control_);
    ssize_t n;
    do n = ::recvmsg(fd, &msg, flags | MSG_CMSG_CLOEXEC);
    while (n < 0 && errno == EINTR);
    if (n < 0) msg.msg_controllen = 0;  // nothing arrived: no fds to take
    return n;
  }
  msghdr msg{};

 private:
  alignas(cmsghdr) char control_[CMSG_SPACE(sizeof(int) * kMaxFdsPerFrame)];
  iovec iov_{};
};

// Takes every SCM_RIGHTS fd out of a received message: the first `capacity` go to `out`, the
// rest are closed at once so that no fd a peer sent can leak. Returns how many went to `out`.
inline size_t take_fds(msghdr& msg, int* out, size_t capacity) {
  size_t n = 0;
  for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
    size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (size_t k = 0; k < count; ++k) {
      int fd;
      std::memcpy(&fd, CMSG_DATA(c) + k * sizeof(int), sizeof(int));
      if (n < capacity)
        out[n++] = fd;
      else
        ::close(fd);
    }
  }
  return n;
}

}  // namespace rdmad::proto
