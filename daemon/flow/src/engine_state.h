// The engine's private records: flows, peers (one balancer each) and transfers.
#pragma once

#include <algorithm>
#include <array>
#include <deque>
#include <map>
#include <optional>
#include <span>
#include <vector>

#include <spdlog/spdlog.h>

#include "flow_engine.h"
#include "peer_domain.h"
#include "rdmad/daemon/peer/qp_connector.h"

namespace rdmad::flow {

// What pairs a send with a receive: the uid that opened both flows (one numeric uid on both nodes)
// and the client's channel id. Another local user's flows never share it, whatever channel they name.
struct ChannelKey {
  uint32_t uid = 0;
  uint64_t channel = 0;
  auto operator<=>(const ChannelKey&) const = default;
};

struct FlowEngine::Transfer {
  uint32_t slot = 0;
  uint32_t gen = 0;
  Flow* flow = nullptr;
  ring::Sqe sqe{};
  ring::Op op = ring::Op::kWrite;
  clients::PinnedRange local{};
  std::array<uint32_t, proto::kMaxNics> lkeys{};  // of `local` in the peer's domain, by NIC
  std::unique_ptr<ExactRegion> recv_mrs;  // kRecv: exactly the buffer, in the peer's domain
  uint8_t recv_peer_slot = 0;  // kRecv: whose advertised-receive count it is in
  uint32_t recv_peer_gen = 0;
  // kRecv: what the peer is told if the receive goes unfilled (withdrawn: its flow closed), so that
  // it drops the credit; reset once the peer filled it, or when the session ends.
  std::optional<peer::RecvCancel> unfilled;
  std::array<balancer::PciDistance, proto::kMaxNics> distance{};  // local buffer to each NIC
  balancer::LaneMask lanes = balancer::kEveryLane;  // its flow's nic_mask
  RemoteRange remote{};       // kWrite/kRead: the import; kSend: the receive credit
  uint64_t recv_id = 0;       // kSend: the peer's receive; kRecv: ours
  uint32_t chunks_total = 0;
  uint32_t chunks_planned = 0;
  uint32_t chunks_done = 0;
  rdmad_status status = RDMAD_OK;
  bool placed = false;  // every chunk finished (or the request failed before any was posted)
  // kSend (flow_immediate.cc): its one chunk went as a WRITE with immediate, which completes the
  // peer's receive by itself (no send-done); `no_imm`: sent again as WRITEs and a send-done after
  // its immediate's lane failed and the peer said the receive was still pending.
  bool imm = false;
  bool no_imm = false;
  uint64_t result_bytes = 0;
  uint64_t started_us = 0;
};

struct FlowEngine::Flow {
  FlowSetup setup;
  ring::Header* header = nullptr;
  ring::Consumer<ring::Sqe> sq;
  ring::Producer<ring::Cqe> cq;
  Peer* peer = nullptr;  // nullptr while the peer is not connected
  std::deque<Transfer*> order;  // taken requests other than receives, in submission order
  // WRITEs and READs among them: a SEND is notified by its WRITE with immediate only when none
  // is before it (flow_immediate.cc; counting later ones too only keeps the send-done more often).
  uint32_t accesses_in_order = 0;
  uint32_t uncompleted = 0;     // requests taken whose completion is not written yet
  bool failed = false;
  bool sleeping = false;
  bool spilled = false;  // pinned, and its last chunk went outside its NICs (all of them were down)
  std::map<uint64_t, RemoteRange> imports;  // remote handle -> range
};

struct FlowEngine::Peer {
  // One of a lane's RC QPs.
  struct LaneQp {
    verbs::QueuePair* qp = nullptr;
    uint32_t qp_num = 0;
    uint32_t posted = 0;  // chunks outstanding on it
    // Mail (send-dones, receive advertisements) sent on it as SENDs and not yet acknowledged,
    // oldest first, with their outbox slot (flow_mailbox.cc): sent again another way if the lane
    // fails first.
    std::deque<std::pair<uint16_t, peer::Mail>> outbox;
    uint16_t next_out = 0;  // the outbox slot the next one takes
  };
  // A local NIC's path to the peer: qps_per_lane RC QPs to the peer's NIC of the same index (fewer
  // when the peer has fewer), which go down, and are rebuilt, together.
  struct Lane {
    std::array<LaneQp, peer::kMaxQpsPerNic> qps{};
    uint8_t qp_count = 0;
    uint8_t next_qp = 0;  // where pick_qp() starts looking
    uint8_t epoch = 0;    // bumped whenever the QPs change
    uint32_t posted = 0;  // chunks outstanding on all its QPs (the lane's window)
    bool dead = true;     // no usable QPs (failed, being rebuilt, or none)
    std::deque<balancer::Chunk> backlog;  // assigned to this lane, waiting for window space
    // The lane's mailbox (flow_mailbox.cc): per QP, kMailSlots inbox buffers, each always under a
    // posted receive, then kMailSlots outbox buffers; registered for local access only in the
    // peer's domain (the peer can SEND into a posted receive, never write into it).
    std::vector<uint8_t> mail;
    std::unique_ptr<verbs::MemoryRegion> mail_mr;
    // Our receives the peer's WRITEs with immediate completed on this lane, the last
    // kImmHistory (a ring): what a RecvQuery about a send on the lane is answered from.
    std::vector<uint64_t> placed_by_imm;
    uint32_t placed_next = 0;
    uint8_t checks_out = 0;  // path checks posted before a rejoin, not yet completed

    void set_qps(std::span<verbs::QueuePair* const> from) {
      qp_count = static_cast<uint8_t>(std::min(from.size(), qps.size()));
      for (auto& q : qps) q = LaneQp{};
      for (uint8_t j = 0; j < qp_count; ++j) qps[j] = LaneQp{from[j], from[j]->qp_num(), 0, {}, 0};
      next_qp = 0;
      posted = 0;
      checks_out = 0;
    }
    LaneQp* find_qp(uint32_t qp_num) {
      for (uint8_t j = 0; j < qp_count; ++j)
        if (qps[j].qp_num == qp_num) return &qps[j];
      return nullptr;
    }
    // The QP with the fewest chunks outstanding, looking from one past the last pick so that equal
    // ones take turns (a lightly loaded lane still uses every QP). Least-outstanding rather than
    // plain round robin: a QP that drains slower than its siblings — its DCQCN reaction point cut
    // its rate, or its UDP source port hashed onto a congested ECMP path — then gets fewer of the
    // lane's chunks, where round robin would hand it 1/k of them whatever its pace and the lane
    // would move at k times its slowest QP's rate. Needs qp_count > 0 (a lane that is not dead).
    uint8_t pick_qp() {
      uint8_t best = next_qp % qp_count;
      for (uint8_t i = 1; i < qp_count; ++i) {
        const auto j = static_cast<uint8_t>((next_qp + i) % qp_count);
        if (qps[j].posted < qps[best].posted) best = j;
      }
      next_qp = static_cast<uint8_t>((best + 1) % qp_count);
      return best;
    }
  };
  struct ChunkInfo {
    balancer::ChunkId id = 0;
    Transfer* transfer = nullptr;
    uint32_t index = 0;
    uint64_t posted_us = 0;
  };

  std::string name;
  uint8_t slot = 0;
  uint32_t gen = 0;
  uint32_t session = 0;   // the peer session's number (both nodes know it): RecvPost::session
  uint64_t ready_us = 0;  // when this session's QPs came up (imports wait for grants from then)
  const PeerDomain* domain = nullptr;
  uint16_t next_mail_lane = 0;  // where send_done_on_lane() starts looking
  uint32_t receives_out = 0;  // our receives advertised to it, not yet filled
  uint32_t credits_held = 0;  // its receives advertised to us, not yet used
  std::unique_ptr<balancer::Balancer> balancer;
  std::vector<Lane> lanes;
  std::vector<ChunkInfo> chunks;  // by balancer slot (id & mask)
  std::deque<Transfer*> planning;  // transfers with chunks left to plan
  std::vector<balancer::Chunk> orphans;  // lost their lane while no other was up
  // Both keyed by the flows' owner uid and channel: a send takes only a receive its own uid posted.
  std::map<ChannelKey, std::deque<RemoteRange>> credits;  // posted receives (recv_id in token)
  // Receive advertisements by number (RecvPost::seq, flow_submit.cc): ours to it so far (the next
  // one's number), the number of its next one we take, and those of its that came before an
  // earlier one (on another lane, or that one was sent again after its lane failed); an entry
  // without keys is a number whose receive was withdrawn (RecvCancel) before it came.
  uint64_t posts_sent = 0;
  uint64_t posts_next = 0;
  std::map<uint64_t, peer::RecvPost> posts_early;
  std::map<ChannelKey, std::deque<Transfer*>> waiting_sends;  // sends without a receive yet
  // Sends whose WRITE with immediate lost its lane unacknowledged, by the peer's recv_id: asked
  // about (RecvQuery), waiting for the answer (flow_immediate.cc).
  std::map<uint64_t, Transfer*> asking;
  std::vector<Flow*> flows;
};

std::shared_ptr<spdlog::logger> flow_log();

// A work request that failed for what it asked (retrying it on another lane would fail the same way).
bool request_error(verbs::WcStatus s);

// Chunk tags carry the transfer slot and the chunk's index in it.
inline uint64_t chunk_tag(uint32_t transfer_slot, uint32_t index) { return uint64_t{transfer_slot} << 32 | index; }
inline uint32_t tag_slot(uint64_t tag) { return static_cast<uint32_t>(tag >> 32); }
inline uint32_t tag_index(uint64_t tag) { return static_cast<uint32_t>(tag); }

// Work request ids: peer slot, the lane's QP epoch (QP numbers may be reused by a rebuilt QP),
// peer generation and the balancer's chunk id. Which of the lane's QPs a completion comes from is
// its qp_num (Lane::find_qp).
inline uint64_t make_wr_id(uint8_t peer_slot, uint8_t lane_epoch, uint32_t peer_gen, balancer::ChunkId id) {
  return uint64_t{peer_slot} << 56 | uint64_t{lane_epoch} << 48 | uint64_t{peer_gen & 0xFFFF} << 32 | id;
}
inline constexpr uint32_t kChunkSlotMask = (1u << 24) - 1;

// Mail on the lanes (flow_mailbox.cc). Mailbox work requests carry kMailTag in the top byte
// (no peer has that slot), then the peer slot, the lane's QP epoch, the peer generation's low
// byte, outbox (1) or inbox (0), the QP's index in its lane and the mailbox slot.
inline constexpr uint8_t kMailTag = 0xFF;
inline constexpr uint16_t kPathCheckSlot = 0xFFFF;  // an outbox "slot" no mail takes: a path check
inline constexpr uint16_t kMailSlots = 64;  // per QP, each way (QpConnectorOptions::max_recv_wr is 256)
using peer::kMailBytes;  // a SendDone is 29 bytes, a RecvPost of n keys without slices 50 + 15n
inline uint64_t make_mail_wr_id(uint8_t peer_slot, uint8_t lane_epoch, uint32_t peer_gen, bool outbox, uint8_t qp,
                                uint16_t mail_slot) {
  return uint64_t{kMailTag} << 56 | uint64_t{peer_slot} << 48 | uint64_t{lane_epoch} << 40 |
         uint64_t{peer_gen & 0xFF} << 32 | uint64_t{outbox} << 31 | uint64_t{qp} << 16 | mail_slot;
}

// WRITEs with immediate (flow_immediate.cc): the immediate names the receive by its transfer slot
// (20 bits: a receive of a higher slot gets a send-done instead) and the low 12 bits of its
// generation. The ring of receives each lane records as placed by them covers the largest
// lane_window_chunks: a sender never has more unacknowledged on a lane.
inline constexpr uint32_t kImmSlotBits = 20;
inline constexpr uint32_t kImmHistory = 1024;
inline bool imm_fits(uint64_t recv_id) { return static_cast<uint32_t>(recv_id) < (1u << kImmSlotBits); }
inline uint32_t make_imm(uint64_t recv_id) {
  return static_cast<uint32_t>(recv_id) | static_cast<uint32_t>(recv_id >> 32) << kImmSlotBits;
}
inline uint32_t imm_slot(uint32_t imm) { return imm & ((1u << kImmSlotBits) - 1); }
inline uint32_t imm_gen_bits(uint32_t imm) { return imm >> kImmSlotBits; }
inline bool imm_gen_matches(uint32_t gen, uint32_t imm) {
  return (gen & ((1u << (32 - kImmSlotBits)) - 1)) == imm_gen_bits(imm);
}

}  // namespace rdmad::flow
