// Mail on the lanes: send-dones and receive advertisements. A receiver's flow completes a RECV
// when the sender's daemon says the SEND's data is placed (SendDone), and a sender's flow can start
// a SEND only once the receiver's daemon advertised a receive (RecvPost). Both take the lanes' own
// QPs, as SENDs into one of the receives each side keeps posted on every lane QP: on the NICs' data
// path they cost what a short RDMA message costs, where the control channel (TLS, the control
// thread, the engine thread, on both nodes) cost ~55 µs a way on soft NICs. The control channel
// still carries one when no lane can take it (none up, every QP busy with our data, which a message
// would queue behind, their mailboxes full, or a RecvPost longer than kMailBytes: many NICs or
// sliced keys), and again each one a lane was holding unacknowledged
// when it failed: a send-done on the control channel (the receiver ignores a second copy: the
// receive it names is gone), an advertisement on another lane if one can take it.
//
// Advertisements go on whichever lane has room, so they can overtake each other, and one sent
// again may have arrived the first time (only its acknowledgement was lost). Each carries its
// number in the session (RecvPost::seq) and the session's: the sender takes them in number order,
// each number once, and holds those that came early (at most max_receives_per_peer; the receiver
// never has more advertised). A message in one of our inbox buffers whose receive succeeded is
// taken even when the lane has failed since: the peer saw it acknowledged and will not send it
// again; lane_replacing polls the CQs before a rebuild destroys the QPs that hold such completions.
//
// A done is sent only after every chunk of its transfer completed (the peer acknowledged the
// WRITEs), as on the control channel, so the receiver's data is placed before the done arrives
// on whichever lane. What arrives in an inbox is checked like a control-channel message: a done
// must name one of our receives advertised to that peer, on the flow of that channel; an
// advertisement is that peer's and counts against what it may hold.
#include <cstring>

#include <spdlog/spdlog.h>

#include "engine_state.h"
#include "rdmad/base/log_fields.h"
#include "rdmad/base/log_limiter.h"
#include "rdmad/base/trace_points.h"

namespace rdmad::flow {
namespace {

base::LogLimiter g_mail_log;

constexpr uint8_t kNoQp = 0xFF;

uint8_t* mail_slot(FlowEngine::Peer::Lane& lane, uint8_t qp, bool outbox, uint16_t slot) {
  const size_t index = (size_t{qp} * 2 + (outbox ? 1 : 0)) * kMailSlots + slot;
  return lane.mail.data() + index * kMailBytes;
}

}  // namespace

bool FlowEngine::open_mailbox(Peer& p, uint16_t nic) {
  auto& lane = p.lanes[nic];
  lane.mail_mr.reset();
  if (lane.qp_count == 0) return true;
  verbs::ProtectionDomain* pd = p.domain != nullptr ? p.domain->pd(nic) : nullptr;
  std::string why;
  if (pd == nullptr) {
    why = "no protection domain for the peer on this NIC";
  } else {
    lane.mail.assign(size_t{lane.qp_count} * 2 * kMailSlots * kMailBytes, 0);
    auto mr = pd->reg_mr(lane.mail.data(), lane.mail.size(), verbs::kAccessLocalWrite);
    if (mr.ok()) {
      lane.mail_mr = std::move(mr.value());
      for (uint8_t q = 0; q < lane.qp_count && why.empty(); ++q)
        for (uint16_t m = 0; m < kMailSlots && why.empty(); ++m)
          if (!post_inbox(p, nic, q, m)) why = "posting the mailbox's receives failed";
    } else {
      why = "registering the mailbox: " + mr.status().message();
    }
  }
  if (why.empty()) return true;
  // Without its receives the peer's dones on this lane would wait for ever (RNR): the lane fails
  // and is rebuilt.
  lane.mail_mr.reset();
  lane_failed(p, nic, why);
  return false;
}

bool FlowEngine::post_inbox(Peer& p, uint16_t nic, uint8_t qp, uint16_t slot) {
  auto& lane = p.lanes[nic];
  verbs::RecvWr wr;
  wr.wr_id = make_mail_wr_id(p.slot, lane.epoch, p.gen, false, qp, slot);
  wr.sge.addr = reinterpret_cast<uintptr_t>(mail_slot(lane, qp, false, slot));
  wr.sge.length = kMailBytes;
  wr.sge.lkey = lane.mail_mr->lkey();
  size_t posted = 0;
  return lane.qps[qp].qp->post_recv({&wr, 1}, &posted).ok() && posted == 1;
}

bool FlowEngine::mail_on_lane(Peer& p, const peer::Mail& mail, balancer::LaneMask prefer) {
  const std::vector<uint8_t> payload = peer::encode_mail(mail);
  if (payload.size() > kMailBytes) return false;
  const auto lanes = static_cast<uint16_t>(p.lanes.size());
  // Two rounds: the flow's own lanes (a flow pinned to NICs keeps its traffic there), then the others.
  const uint32_t rounds = prefer == balancer::kEveryLane ? 1 : 2;
  for (uint32_t i = 0; i < rounds * lanes; ++i) {
    const auto nic = static_cast<uint16_t>((p.next_mail_lane + i) % lanes);
    const bool own = prefer == balancer::kEveryLane || (prefer >> nic & 1u) != 0;
    if (own != (i < lanes)) continue;
    auto& lane = p.lanes[nic];
    // Only a lane that is up: a recovering one's path may still be broken (not checked yet), and
    // a message on it would wait out the QP's retries before it went again another way.
    if (lane.dead || !lane.mail_mr || lane.qp_count == 0 || p.balancer->state(nic) != balancer::LaneState::kUp)
      continue;
    // A QP with none of our chunks outstanding: behind them (up to lane_window_chunks of data, in
    // order on the QP) a short message waits longer than the control channel takes.
    uint8_t q = kNoQp;
    for (uint8_t j = 0; j < lane.qp_count; ++j)
      if (lane.qps[j].posted == 0 && lane.qps[j].outbox.size() < kMailSlots &&
          (q == kNoQp || lane.qps[j].outbox.size() < lane.qps[q].outbox.size()))
        q = j;
    if (q == kNoQp) continue;  // each busy, or its oldest outbox slot still in flight
    Peer::LaneQp& lq = lane.qps[q];
    const uint16_t m = lq.next_out;
    uint8_t* buf = mail_slot(lane, q, true, m);
    std::memcpy(buf, payload.data(), payload.size());
    verbs::SendWr wr;
    wr.wr_id = make_mail_wr_id(p.slot, lane.epoch, p.gen, true, q, m);
    wr.opcode = verbs::WrOpcode::kSend;
    wr.sge.addr = reinterpret_cast<uintptr_t>(buf);
    wr.sge.length = static_cast<uint32_t>(payload.size());
    wr.sge.lkey = lane.mail_mr->lkey();
    wr.signaled = true;
    size_t posted = 0;
    if (!lq.qp->post_send({&wr, 1}, &posted).ok() || posted != 1) continue;
    lq.next_out = static_cast<uint16_t>((m + 1) % kMailSlots);
    lq.outbox.emplace_back(m, mail);
    ++mail_unacked_;
    p.next_mail_lane = static_cast<uint16_t>((nic + 1) % lanes);
    return true;
  }
  return false;
}

void FlowEngine::send_done_on_control(Peer& p, const peer::SendDone& done) {
  counters_.dones_on_control.fetch_add(1, std::memory_order_relaxed);
  hooks_.mail(p.name, done);
}

void FlowEngine::send_done_to(Peer& p, const peer::SendDone& done, balancer::LaneMask prefer) {
  if (!mail_on_lane(p, done, prefer)) {
    send_done_on_control(p, done);
    return;
  }
  base::trace::mark(base::trace::Point::kDonePosted);
  counters_.dones_on_lanes.fetch_add(1, std::memory_order_relaxed);
}

void FlowEngine::send_mail(Peer& p, const peer::Mail& mail, balancer::LaneMask prefer) {
  if (const auto* done = std::get_if<peer::SendDone>(&mail)) {
    send_done_to(p, *done, prefer);
    return;
  }
  const bool lane = mail_on_lane(p, mail, prefer);
  if (std::holds_alternative<peer::RecvPost>(mail))
    (lane ? counters_.posts_on_lanes : counters_.posts_on_control).fetch_add(1, std::memory_order_relaxed);
  if (!lane) hooks_.mail(p.name, mail);
}

void FlowEngine::resend_lane_mail(Peer& p, uint16_t nic) {
  std::vector<peer::Mail> again;
  for (auto& q : p.lanes[nic].qps) {
    for (auto& [slot, mail] : q.outbox) again.push_back(std::move(mail));
    mail_unacked_ -= q.outbox.size();
    q.outbox.clear();
  }
  for (const peer::Mail& m : again) {
    if (const auto* done = std::get_if<peer::SendDone>(&m))
      send_done_on_control(p, *done);
    else
      send_mail(p, m, balancer::kEveryLane);  // this lane is dead: another, or the control channel
  }
}

void FlowEngine::on_mail_completion(uint16_t nic, const verbs::WorkCompletion& wc) {
  const auto slot = static_cast<uint8_t>(wc.wr_id >> 48);
  const auto epoch = static_cast<uint8_t>(wc.wr_id >> 40);
  const auto gen = static_cast<uint8_t>(wc.wr_id >> 32);
  const bool outbox = ((wc.wr_id >> 31) & 1) != 0;
  const auto q = static_cast<uint8_t>((wc.wr_id >> 16) & 0x7F);
  const auto m = static_cast<uint16_t>(wc.wr_id);
  if (slot >= peers_.size() || !peers_[slot] || (peers_[slot]->gen & 0xFF) != gen) return;  // a lost peer's
  Peer& p = *peers_[slot];
  if (nic >= p.lanes.size()) return;
  auto& lane = p.lanes[nic];
  if (outbox && m == kPathCheckSlot) {
    path_check_completed(p, nic, epoch, q, wc);
    return;
  }
  const bool current = !lane.dead && epoch == lane.epoch && q < lane.qp_count && lane.qps[q].qp_num == wc.qp_num &&
                       m < kMailSlots && lane.mail_mr;
  if (!outbox && wc.status == verbs::WcStatus::kSuccess && wc.opcode == verbs::WcOpcode::kRecvRdmaWithImm) {
    // A WRITE with immediate placed a send's data (flow_immediate.cc): the receive completes
    // whatever became of the lane since.
    placed_by_immediate(p, nic, wc);
    if (current && !post_inbox(p, nic, q, m)) lane_failed(p, nic, "reposting a mailbox receive failed");
    return;
  }
  // Mail placed in one of our inbox buffers: taken whatever became of the lane since, as long as
  // the buffer is still the one it was placed in (the lane was not rebuilt: same epoch).
  const bool inbox_buffer = epoch == lane.epoch && m < kMailSlots &&
                            (size_t{q} * 2 + 1) * kMailSlots * kMailBytes <= lane.mail.size();
  if (!outbox && wc.status == verbs::WcStatus::kSuccess && inbox_buffer) {
    // Decoded (copied out) before the slot takes its next receive.
    std::optional<peer::Mail> mail =
        peer::decode_mail({mail_slot(lane, q, false, m), std::min<size_t>(wc.byte_len, kMailBytes)});
    if (current && !post_inbox(p, nic, q, m)) lane_failed(p, nic, "reposting a mailbox receive failed");
    if (!mail) {
      mail_refused(p, nic, "malformed (" + std::to_string(wc.byte_len) + " bytes)");
      return;
    }
    take_mail(p, std::move(*mail));
    return;
  }
  // From QPs already given up (flushed receives, mail sent again another way): ignored.
  if (!current) return;
  if (!outbox && wc.status == verbs::WcStatus::kWrFlushed) {
    // The QP went to the error state for a reason reported elsewhere: a failed request of ours
    // (its own completion failed the lane already), or, on the responder side, a request of the
    // peer's that we refused (the peer rebuilds the lane and tells us why). The receives are
    // always posted, so every such QP flushes them: they say nothing more.
    return;
  }
  if (wc.status != verbs::WcStatus::kSuccess) {
    lane_failed(p, nic, std::string("mailbox work request failed: ") + std::string(verbs::to_string(wc.status)),
                request_error(wc.status) ? balancer::Balancer::Fault::kRequest : balancer::Balancer::Fault::kPath);
    return;
  }
  if (outbox) {
    auto& sent = lane.qps[q].outbox;
    // A QP's sends complete in order: the oldest is this one.
    if (!sent.empty() && sent.front().first == m) {
      sent.pop_front();
      --mail_unacked_;
    }
  }
}

void FlowEngine::check_path(Peer& p, uint16_t nic) {
  auto& lane = p.lanes[nic];
  if (lane.dead || lane.qp_count == 0) return;  // failed since: its next recovery asks again
  lane.checks_out = 0;
  for (uint8_t q = 0; q < lane.qp_count; ++q) {
    verbs::SendWr wr;
    wr.wr_id = make_mail_wr_id(p.slot, lane.epoch, p.gen, true, q, kPathCheckSlot);
    wr.opcode = verbs::WrOpcode::kRdmaWrite;  // zero bytes: no address or key is checked (IBA C9-88)
    wr.signaled = true;
    size_t posted = 0;
    if (!lane.qps[q].qp->post_send({&wr, 1}, &posted).ok() || posted != 1) {
      lane_counters_[nic]->rejoin_checks_failed.fetch_add(1, std::memory_order_relaxed);
      lane_failed(p, nic, "posting the rejoin path check failed");
      return;
    }
    ++lane.checks_out;
  }
}

void FlowEngine::path_check_completed(Peer& p, uint16_t nic, uint8_t epoch, uint8_t q,
                                      const verbs::WorkCompletion& wc) {
  auto& lane = p.lanes[nic];
  // From QPs given up since (the lane failed, or was rebuilt): ignored.
  if (lane.dead || epoch != lane.epoch || q >= lane.qp_count || lane.qps[q].qp_num != wc.qp_num ||
      lane.checks_out == 0)
    return;
  if (wc.status != verbs::WcStatus::kSuccess) {
    lane.checks_out = 0;
    // A NAK (a NIC that checks the key of a zero-length WRITE after all) came back over the path:
    // the path works. The QP is in the error state, so the lane is rebuilt, and rejoins without a
    // check, as after any refused request; a lane is never kept out by its NIC's reading of C9-88.
    const bool refused = request_error(wc.status);
    (refused ? lane_counters_[nic]->rejoin_checks_ok : lane_counters_[nic]->rejoin_checks_failed)
        .fetch_add(1, std::memory_order_relaxed);
    lane_failed(p, nic, std::string("rejoin path check failed: ") + std::string(verbs::to_string(wc.status)),
                refused ? balancer::Balancer::Fault::kRequest : balancer::Balancer::Fault::kPath);
    return;
  }
  if (--lane.checks_out > 0) return;
  lane_counters_[nic]->rejoin_checks_ok.fetch_add(1, std::memory_order_relaxed);
  p.balancer->path_checked(nic);
}

void FlowEngine::mail(const std::string& name, peer::Mail m) {
  if (Peer* p = find_peer(name)) take_mail(*p, std::move(m));
}

void FlowEngine::take_mail(Peer& p, peer::Mail m) {
  if (auto* done = std::get_if<peer::SendDone>(&m)) {
    send_done(p.name, *done);
  } else if (auto* post = std::get_if<peer::RecvPost>(&m)) {
    base::trace::mark(base::trace::Point::kRecvPostArrived);
    take_post(p, std::move(*post));
  } else {
    take_cancel(p, std::get<peer::RecvCancel>(m));
  }
}

void FlowEngine::mail_refused(const Peer& p, uint16_t nic, const std::string& reason) {
  counters_.dones_refused.fetch_add(1, std::memory_order_relaxed);
  base::log_limited(*flow_log(), g_mail_log, spdlog::level::warn, "lane mail refused peer={} nic={} reason={}", p.name,
                    nic_names_[nic], base::q(reason));
}

}  // namespace rdmad::flow
