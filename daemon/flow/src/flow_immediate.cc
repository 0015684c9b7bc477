// Sends by RDMA WRITE with immediate. A SEND of one chunk (one work request) with no WRITE or READ of
// its flow before it left to complete goes as a WRITE with immediate into the receive the peer
// advertised: the immediate (the receive's transfer slot and generation bits) consumes one of the
// receives the peer's lane QP keeps posted (flow_mailbox.cc), so the peer's engine completes the
// receive the moment the data is placed, without waiting for our acknowledgement and a send-done
// after it. This is how NCCL's own IB transport finishes a send. Longer sends, and sends behind an
// unfinished WRITE or READ of their flow (a SEND's notification must not overtake an earlier WRITE,
// which may be on another lane), keep the send-done. Earlier SENDs do not hold it back: each goes
// into its own receive, in order, and receives never completed in order across lanes (send-dones
// take turns over them).
//
// The one hard case is a lane that fails while the WRITE is unacknowledged: the peer may or may not
// have placed it (the ACK may be what was lost), and sending it again after the peer handed the
// receive back to its client could overwrite memory the client uses again. So the send is held and
// the peer is asked (RecvQuery, on the control channel, after our rebuild offer for the lane; it
// names the peer's QP the WRITE went to). The peer first takes the lane's QPs to the error state
// (nothing more of the old QPs executes; when a rebuild of its own replaced them already, it did
// that before destroying them, and the fresh ones stay up), then
// polls its CQs (an immediate that arrived completes its receive now), and answers: still pending
// (we send it again, as WRITEs and a send-done), placed (found in the lane's record of the last
// kImmHistory receives it completed by immediate: the send completes), or unknown (the receive was
// withdrawn: the send fails, as a WRITE into a withdrawn receive does).
#include <algorithm>

#include <spdlog/spdlog.h>

#include "engine_state.h"
#include "rdmad/base/log_fields.h"

namespace rdmad::flow {

bool FlowEngine::use_immediate(const Transfer* t, size_t pieces) const {
  return t->op == ring::Op::kSend && !t->no_imm && t->chunks_total == 1 && pieces == 1 && imm_fits(t->recv_id) &&
         t->flow != nullptr && t->flow->accesses_in_order == 0;
}

void FlowEngine::placed_by_immediate(Peer& p, uint16_t nic, const verbs::WorkCompletion& wc) {
  // The immediate names a receive by slot and generation bits; send_done checks the rest as for a
  // send-done (ours, pending, advertised to this peer).
  const uint32_t slot = imm_slot(wc.imm_data);
  const Transfer* t = slot < transfers_.size() ? transfers_[slot].get() : nullptr;
  const bool names_one =
      t != nullptr && t->op == ring::Op::kRecv && t->flow != nullptr && imm_gen_matches(t->gen, wc.imm_data);
  peer::SendDone done;
  if (names_one) {
    done.channel = t->flow->setup.channel;
    done.recv_id = t->recv_id;
    done.bytes = wc.byte_len;
    done.status = RDMAD_OK;
  }
  if (!names_one || !send_done(p.name, done)) {
    mail_refused(p, nic, "a WRITE with immediate naming no receive advertised to it");
    return;
  }
  auto& lane = p.lanes[nic];
  if (lane.placed_by_imm.size() < kImmHistory) {
    lane.placed_by_imm.push_back(done.recv_id);
  } else {
    lane.placed_by_imm[lane.placed_next] = done.recv_id;
    lane.placed_next = (lane.placed_next + 1) % kImmHistory;
  }
}

void FlowEngine::ask_about(Peer& p, Transfer* t, uint16_t nic) {
  if (!p.asking.emplace(t->recv_id, t).second) return;  // asked already
  peer::RecvQuery q;
  q.channel = t->flow != nullptr ? t->flow->setup.channel : 0;
  q.recv_id = t->recv_id;
  q.nic_index = nic;
  // The lane's QPs are replaced together: any of them names the set the WRITE went to. Asked of
  // the QP here, on this rare path (it is still there: the lane failed, nothing replaced it yet).
  const auto& lane = p.lanes[nic];
  q.qp_num = lane.qp_count > 0 ? lane.qps[0].qp->query().dest_qp_num : 0;
  flow_log()->info("send held peer={} nic={} recv_id={:#x} reason={}", p.name, nic_names_[nic], t->recv_id,
                   base::q("its WRITE with immediate was unacknowledged when the lane failed; asking the peer"));
  hooks_.recv_query(p.name, q);
}

peer::RecvState FlowEngine::recv_query(const std::string& name, const peer::RecvQuery& q) {
  peer::RecvState answer;
  answer.recv_id = q.recv_id;
  answer.state = peer::RecvStateKind::kUnknown;
  Peer* p = find_peer(name);
  if (p == nullptr || q.nic_index >= p->lanes.size()) return answer;
  // Normally failed already (the peer's rebuild offer came first); if not, now: from here on
  // nothing of the lane's QPs executes, so a receive still pending after the poll stays unfilled.
  // Unless the QPs the WRITE went to are gone: a rebuild replaced them after it had stopped them
  // and taken their completions (lane_replacing), and the lane's QPs now are fresh ones, which
  // never saw that WRITE (both nodes saw the lane fail, and ours was rebuilt before the question
  // came). A question that names no QP (0) fails the lane as before.
  auto& lane = p->lanes[q.nic_index];
  const bool went_to_these = q.qp_num == 0 || lane.find_qp(q.qp_num) != nullptr;
  if (!lane.dead && went_to_these)
    lane_failed(*p, q.nic_index, "the peer lost an unacknowledged WRITE with immediate on this path");
  poll_cqs();
  const Transfer* t = transfer_by_recv_id(q.recv_id);
  const auto& placed = p->lanes[q.nic_index].placed_by_imm;
  if (t != nullptr && t->op == ring::Op::kRecv && t->flow->setup.peer == name && t->flow->setup.channel == q.channel) {
    answer.state = peer::RecvStateKind::kPending;
  } else if (std::find(placed.begin(), placed.end(), q.recv_id) != placed.end()) {
    answer.state = peer::RecvStateKind::kPlaced;
  }
  return answer;
}

void FlowEngine::recv_state(const std::string& name, const peer::RecvState& state) {
  Peer* p = find_peer(name);
  if (p == nullptr) return;
  auto it = p->asking.find(state.recv_id);
  if (it == p->asking.end()) return;  // not asked (a stray or repeated answer)
  Transfer* t = it->second;
  p->asking.erase(it);
  counters_.imm_answers[static_cast<size_t>(state.state)].fetch_add(1, std::memory_order_relaxed);
  flow_log()->info("send resumed peer={} recv_id={:#x} receive={}", name, state.recv_id,
                   state.state == peer::RecvStateKind::kPending  ? "pending"
                   : state.state == peer::RecvStateKind::kPlaced ? "placed"
                                                                 : "unknown");
  if (t->flow == nullptr) {  // its flow closed while we asked
    free_transfer(t);
    return;
  }
  switch (state.state) {
    case peer::RecvStateKind::kPending:
      // Never placed: sent again, as WRITEs and a send-done (a second immediate could be lost the
      // same way).
      t->imm = false;
      t->no_imm = true;
      t->chunks_planned = 0;
      p->planning.push_back(t);
      return;
    case peer::RecvStateKind::kPlaced:
      chunk_finished(t, RDMAD_OK);  // t->imm: no send-done
      return;
    case peer::RecvStateKind::kUnknown:
      chunk_finished(t, RDMAD_ERR_REMOTE_ACCESS);
      return;
  }
}

}  // namespace rdmad::flow
