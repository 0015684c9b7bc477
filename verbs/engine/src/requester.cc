// Requester side of RC (IB spec 9.7): PSN assignment, segmentation at the path MTU, the send window,
// ACK/NAK processing, go-back-N, retransmission timeout with retry_cnt, RNR back-off with rnr_retry,
// and in-order completions.
#include <algorithm>
#include <cstring>

#include "datapath.h"

namespace rdmad::verbs::engine {
namespace {

using roce::psn_add;
using roce::psn_diff;

constexpr uint32_t kMaxMessageBytes = 1u << 31;
constexpr uint32_t kAckReqEvery = 32;  // ask for an ACK at least every this many packets
constexpr uint32_t kReadChunkPackets = 64;

// RNR NAK timer codes in ns (IB spec table 45: code 0 is the longest, 655.36 ms).
constexpr TimeNs kRnrTimerNs[32] = {
    655'360'000, 10'000,     20'000,     30'000,     40'000,     60'000,      80'000,      120'000,
    160'000,     240'000,    320'000,    480'000,    640'000,    960'000,     1'280'000,   1'920'000,
    2'560'000,   3'840'000,  5'120'000,  7'680'000,  10'240'000, 15'360'000,  20'480'000,  30'720'000,
    40'960'000,  61'440'000, 81'920'000, 122'880'000, 163'840'000, 245'760'000, 327'680'000, 491'520'000};

// The retransmit timeout of the QP's timeout attribute (IB: 4.096 µs · 2^timeout).
TimeNs timeout_ns(uint8_t timeout) { return TimeNs{4096} << std::min<uint8_t>(timeout, 31); }
// A data packet asks for an ACK at least this often, so that ACKs reach the retransmit timer
// several times per timeout even when pacing spreads kAckReqEvery packets over longer than that.
TimeNs ack_req_interval_ns(uint8_t timeout) { return timeout_ns(timeout) / 8; }

uint32_t packets_for(uint32_t len, uint32_t mtu) { return len == 0 ? 1 : (len + mtu - 1) / mtu; }

uint32_t end_psn(const SendSlot& s) { return psn_add(s.first_psn, s.npkts); }

uint32_t chunks(int32_t psns) { return psns <= 0 ? 0 : (static_cast<uint32_t>(psns) + kReadChunkPackets - 1) / kReadChunkPackets; }

// READ requests the QP has sent that are not fully answered, counted up to `limit`: each READ WR's
// chunk requests issued so far (all of them before send_idx, up to send_psn for the WR being sent)
// minus the chunks whose responses have all arrived.
uint32_t outstanding_reads(QpContext& qp, uint32_t limit) {
  auto& sq = qp.shared->sq;
  uint32_t n = 0;
  for (uint64_t i = sq.head(); i < qp.accepted && i <= qp.send_idx && n < limit; ++i) {
    if (sq.at(i).opcode != WrOpcode::kRdmaRead) continue;
    const SendSlot& s = qp.slots[sq.slot(i)];
    const uint32_t issued_end = i < qp.send_idx ? end_psn(s) : qp.send_psn;
    const uint32_t issued = chunks(psn_diff(issued_end, s.first_psn));
    // Chunk k ends at min((k + 1) · 64, npkts): the last one may be short.
    const auto answered_psns = psn_diff(s.read_next_psn, s.first_psn);
    const uint32_t answered = answered_psns >= static_cast<int32_t>(s.npkts) ? chunks(static_cast<int32_t>(s.npkts))
                              : answered_psns <= 0                           ? 0
                                  : static_cast<uint32_t>(answered_psns) / kReadChunkPackets;
    if (issued > answered) n += issued - answered;
  }
  return n;
}

WcOpcode wc_opcode(WrOpcode op) {
  switch (op) {
    case WrOpcode::kRdmaWrite:
    case WrOpcode::kRdmaWriteWithImm: return WcOpcode::kRdmaWrite;
    case WrOpcode::kRdmaRead: return WcOpcode::kRdmaRead;
    default: return WcOpcode::kSend;
  }
}

}  // namespace

void Datapath::accept_new_wrs(QpContext& qp) {
  auto& sq = qp.shared->sq;
  uint64_t tail = sq.tail();
  for (; qp.accepted < tail; ++qp.accepted) {
    const SendWr& wr = sq.at(qp.accepted);
    SendSlot& s = qp.slots[sq.slot(qp.accepted)];
    s = SendSlot{};
    bool read = wr.opcode == WrOpcode::kRdmaRead;
    if (wr.sge.length > kMaxMessageBytes) {
      s.error = WcStatus::kLocalLengthError;
    } else if (!check_local(qp, wr.sge, read)) {
      s.error = WcStatus::kLocalProtectionError;
    }
    if (s.error != WcStatus::kSuccess) continue;
    s.first_psn = qp.next_assign_psn;
    s.npkts = packets_for(wr.sge.length, qp.mtu);
    s.read_next_psn = s.first_psn;
    qp.next_assign_psn = psn_add(qp.next_assign_psn, s.npkts);
  }
}

void Datapath::complete_sends(QpContext& qp) {
  auto& sq = qp.shared->sq;
  while (sq.head() < qp.accepted && qp.state == QpState::kRts) {
    const SendWr& wr = sq.at(sq.head());
    const SendSlot& s = qp.slots[sq.slot(sq.head())];
    if (s.error != WcStatus::kSuccess) {
      fail_head(qp, s.error);
      return;
    }
    if (qp.send_idx == sq.head() || psn_diff(qp.una_psn, end_psn(s)) < 0) return;
    if (wr.signaled) {
      WorkCompletion wc{wr.wr_id, WcStatus::kSuccess, wc_opcode(wr.opcode), false, qp.qpn,
                        wr.opcode == WrOpcode::kRdmaRead ? wr.sge.length : 0, 0};
      if (!push_completion(*qp.send_cq, wc)) {
        qp.cq_full = true;  // retry on the next pass
        return;
      }
    }
    release_send(*qp.shared);
  }
}

void Datapath::fail_head(QpContext& qp, WcStatus status) {
  auto& sq = qp.shared->sq;
  if (!sq.empty()) {
    const SendWr& wr = sq.at(sq.head());
    push_completion(*qp.send_cq, {wr.wr_id, status, wc_opcode(wr.opcode), false, qp.qpn, 0, 0});
    release_send(*qp.shared);
  }
  set_error(qp);
}

bool Datapath::requester_tx(QpContext& qp, TimeNs now, int budget) {
  if (qp.state == QpState::kError) {
    flush(qp);
    return false;
  }
  if (qp.state != QpState::kRts) return false;
  accept_new_wrs(qp);
  complete_sends(qp);
  if (qp.state != QpState::kRts || now < qp.rnr_until_ns) return false;
  auto& sq = qp.shared->sq;
  int sent = 0;
  while (sent < budget && qp.send_idx < qp.accepted) {
    if (psn_diff(qp.send_psn, qp.una_psn) >= static_cast<int32_t>(window_psns(qp.mtu))) break;
    if (!may_send_data(qp, now)) break;
    const SendWr& wr = sq.at(qp.send_idx);
    SendSlot& s = qp.slots[sq.slot(qp.send_idx)];
    // The local region is checked again for every packet: it may have been deregistered (and its
    // memory unmapped) since the WR was accepted. The WR then fails when it reaches the head.
    if (s.error == WcStatus::kSuccess && !check_local(qp, wr.sge, wr.opcode == WrOpcode::kRdmaRead)) {
      s.error = WcStatus::kLocalProtectionError;
    }
    if (s.error != WcStatus::kSuccess) break;
    if (wr.opcode == WrOpcode::kRdmaRead && psn_diff(s.read_next_psn, qp.send_psn) > 0) {
      qp.send_psn = s.read_next_psn;  // re-request only what has not arrived
      if (psn_diff(qp.send_psn, end_psn(s)) >= 0) {
        // Every response arrived after a rewind into this READ: nothing to re-request. (Sending on
        // would issue a zero-length READ at the next WR's first PSN, which the responder takes in
        // sequence; the next WRITE then arrives without its first packet and fails.)
        ++qp.send_idx;
        continue;
      }
    }
    uint32_t seg = static_cast<uint32_t>(psn_diff(qp.send_psn, s.first_psn));
    uint64_t offset = static_cast<uint64_t>(seg) * qp.mtu;
    roce::Packet p;
    const uint32_t* payload_crc = nullptr;
    p.bth.dest_qp = qp.attr.dest_qp_num;
    p.bth.psn = qp.send_psn;
    size_t bytes = 0;
    if (wr.opcode == WrOpcode::kRdmaRead) {
      // max_rd_atomic bounds the READ requests in flight (the responder's resources); 0 is taken as
      // 1, the least a READ needs.
      const uint32_t max_reads = std::max<uint32_t>(1, qp.attr.max_rd_atomic);
      if (outstanding_reads(qp, max_reads) >= max_reads) break;
      p.bth.opcode = roce::Opcode::kReadRequest;
      p.bth.ack_req = true;
      // Large READs go out as several READ requests of at most kReadChunkPackets responses each:
      // every request is a valid RoCEv2 READ for the next PSNs of the WR, the send window then
      // bounds READ responses like any other traffic, and a lost response costs one chunk.
      // A re-request ends where the original request ended: the responder allocated PSNs per
      // request, and a request straddling two of them would be answered beyond its expected PSN.
      uint32_t left = s.npkts - seg;
      uint32_t chunk = std::min(left, kReadChunkPackets - seg % kReadChunkPackets);
      uint64_t chunk_bytes = std::min<uint64_t>(wr.sge.length - offset, uint64_t{chunk} * qp.mtu);
      p.reth = {wr.remote_addr + offset, wr.rkey, static_cast<uint32_t>(chunk_bytes)};
      qp.send_psn = psn_add(qp.send_psn, chunk);
      if (chunk == left) ++qp.send_idx;
    } else {
      bool first = seg == 0;
      bool last = seg + 1 == s.npkts;
      bool imm = wr.opcode == WrOpcode::kSendWithImm || wr.opcode == WrOpcode::kRdmaWriteWithImm;
      bool write = wr.opcode == WrOpcode::kRdmaWrite || wr.opcode == WrOpcode::kRdmaWriteWithImm;
      p.bth.opcode = write ? roce::write_opcode(first, last, imm) : roce::send_opcode(first, last, imm);
      // Also by time: a QP paced far below line rate may take longer than its timeout to send
      // kAckReqEvery packets, and its timer must see ACKs for packets that merely wait their turn.
      // Only while packets are unacknowledged and neither an ACK nor a request for one came for
      // that long (a message that starts an idle QP asks on its last packet, as before).
      const bool ack_due = qp.attr.timeout != 0 && psn_diff(qp.sent_hi, qp.una_psn) > 0 &&
                           now - std::max(qp.last_ack_req_ns, qp.last_progress_ns) >=
                               ack_req_interval_ns(qp.attr.timeout);
      p.bth.ack_req = last || (seg % kAckReqEvery) == kAckReqEvery - 1 || ack_due;
      if (write && first) p.reth = {wr.remote_addr, wr.rkey, wr.sge.length};
      p.imm_data = wr.imm_data;
      bytes = std::min<uint64_t>(qp.mtu, wr.sge.length - offset);
      p.payload = {reinterpret_cast<const uint8_t*>(wr.sge.addr + offset), bytes};
      // The CRC computed at post is used on the first transmission only: a retransmission reads
      // the memory again, so a buffer the application changed too early still gets through.
      const PostCrc& pc = qp.shared->post_crc[sq.slot(qp.send_idx)];
      if (seg < pc.count && pc.mtu == qp.mtu && psn_diff(qp.send_psn, qp.sent_hi) >= 0) {
        payload_crc = &qp.shared->crc_ring.at(pc.first + seg);
        ++counters_.crc_at_post_packets;
      }
      qp.send_psn = psn_add(qp.send_psn, 1);
      if (last) ++qp.send_idx;
    }
    if (p.bth.ack_req) qp.last_ack_req_ns = now;
    if (qp.una_psn == qp.sent_hi) {  // the timer starts with the first packet
      qp.last_progress_ns = now;
      if (qp.attr.timeout != 0) arm(qp, kRetransmitTimer, now + timeout_ns(qp.attr.timeout));
    }
    if (psn_diff(qp.send_psn, qp.sent_hi) > 0) {
      qp.sent_hi = qp.send_psn;
    } else {
      ++counters_.retransmitted_packets;
    }
    send_packet(qp, p, roce::kEcnEct0, payload_crc);
    on_data_sent(qp, now, bytes + kWireOverheadBytes);
    ++sent;
  }
  // The loop may have stepped over a READ already answered in full (its responses came after a
  // rewind) or found the head's region gone: complete or fail it now. No packet or timer may
  // bring the QP back for it (everything sent can already be acknowledged).
  complete_sends(qp);
  return sent > 0;
}

void Datapath::go_back_n(QpContext& qp, uint32_t psn) {
  if (qp.gbn_active && qp.gbn_psn == psn) return;
  qp.gbn_active = true;
  qp.gbn_psn = psn;
  auto& sq = qp.shared->sq;
  uint64_t idx = sq.head();
  while (idx < qp.accepted && psn_diff(psn, end_psn(qp.slots[sq.slot(idx)])) >= 0) ++idx;
  qp.send_idx = idx;
  qp.send_psn = psn;
  if (idx < qp.accepted) {
    SendSlot& s = qp.slots[sq.slot(idx)];
    if (psn_diff(psn, s.first_psn) < 0) qp.send_psn = s.first_psn;
  }
}

// `psn` moved past every READ at it whose responses already arrived in order (see advance_una).
uint32_t Datapath::past_received_reads(QpContext& qp, uint32_t psn) {
  auto& sq = qp.shared->sq;
  for (uint64_t i = sq.head(); i < qp.accepted; ++i) {
    const SendSlot& s = qp.slots[sq.slot(i)];
    if (s.error != WcStatus::kSuccess || psn_diff(end_psn(s), psn) <= 0) continue;  // before psn
    if (sq.at(i).opcode != WrOpcode::kRdmaRead || psn_diff(s.first_psn, psn) > 0 ||
        psn_diff(s.read_next_psn, psn) <= 0) {
      break;
    }
    psn = s.read_next_psn;
    if (psn != end_psn(s)) break;  // still missing responses
  }
  return psn;
}

void Datapath::advance_una(QpContext& qp, uint32_t psn, TimeNs now) {
  if (psn_diff(psn, qp.una_psn) <= 0) return;
  auto& sq = qp.shared->sq;
  bool implied_nak = false;
  // An ACK beyond a READ whose responses are missing means they were lost (IB spec 9.7.5.1.3).
  for (uint64_t i = sq.head(); i < qp.accepted; ++i) {
    const SendSlot& s = qp.slots[sq.slot(i)];
    if (psn_diff(s.first_psn, psn) >= 0) break;
    if (sq.at(i).opcode == WrOpcode::kRdmaRead && psn_diff(s.read_next_psn, end_psn(s)) < 0 &&
        psn_diff(psn, s.read_next_psn) > 0) {
      psn = s.read_next_psn;
      implied_nak = true;
      break;
    }
  }
  // READ responses are taken per WR in order, also for a READ after one still missing responses,
  // so a later READ may have all its data before una reaches it (a responder that answers the
  // re-request of an earlier READ and goes on serving the READs queued after it, as rxe does).
  // Nothing more will arrive for it: una moves over what such READs received.
  if (!implied_nak) psn = past_received_reads(qp, psn);
  if (psn_diff(psn, qp.una_psn) > 0) {
    qp.una_psn = psn;
    qp.last_progress_ns = now;
    qp.retries_left = qp.attr.retry_cnt;
    qp.rnr_left = qp.attr.rnr_retry;
    if (qp.gbn_active && psn_diff(psn, qp.gbn_psn) > 0) qp.gbn_active = false;
    // Nothing outstanding: the timeout would find nothing to do, and a live entry would cut the
    // loop's idle sleeps short as its due time nears (BENCHMARKS.md, "Round-trip tail").
    if (qp.una_psn == qp.sent_hi) disarm(qp, kRetransmitTimer);
  }
  if (implied_nak) {
    ++counters_.implied_nak_seq_err;
    go_back_n(qp, psn);
  }
  complete_sends(qp);
}

// ACKs, NAKs and READ responses are believed only for PSNs outstanding, [una, sent_hi): one for a
// PSN never sent must not complete a WR, one for a PSN already acknowledged must not rewind or fail
// anything. (An ACK names the last PSN it covers, so una - 1 is a repeat of the last ACK, which a
// responder sends for duplicates.) What lands inside the window is believed: RoCE has no integrity
// check an on-path attacker cannot redo (docs/verbs.md, "What the datapath cannot protect").
void Datapath::on_ack(QpContext& qp, const roce::Packet& pkt, TimeNs now) {
  if (qp.state != QpState::kRts) return drop(RxDropReason::kBadState);
  uint32_t psn = pkt.bth.psn;
  const roce::Aeth& a = pkt.aeth;
  if (psn_diff(psn, qp.sent_hi) >= 0) return drop(RxDropReason::kOutOfWindow);
  if (a.type() == roce::AckType::kAck) {
    if (psn_diff(psn, qp.una_psn) < -1) return drop(RxDropReason::kOutOfWindow);
    advance_una(qp, psn_add(psn, 1), now);
    return;
  }
  if (psn_diff(psn, qp.una_psn) < 0) return drop(RxDropReason::kOutOfWindow);
  advance_una(qp, psn, now);
  if (qp.state != QpState::kRts) return;
  if (a.type() == roce::AckType::kRnrNak) {
    ++counters_.rnr_nak_retry_err;
    if (qp.attr.rnr_retry != 7) {  // 7 means retry forever
      if (qp.rnr_left == 0) {
        fail_head(qp, WcStatus::kRnrRetryExceeded);
        return;
      }
      --qp.rnr_left;
    }
    qp.rnr_until_ns = now + kRnrTimerNs[a.value()];
    qp.last_progress_ns = qp.rnr_until_ns;
    qp.gbn_active = false;
    go_back_n(qp, psn);
    return;
  }
  if (a.type() != roce::AckType::kNak) return;
  switch (a.nak_code()) {
    case roce::NakCode::kPsnSequenceError:
      ++counters_.packet_seq_err;
      go_back_n(qp, psn);
      return;
    case roce::NakCode::kRemoteAccessError:
      ++counters_.req_remote_access_errors;
      fail_head(qp, WcStatus::kRemoteAccessError);
      return;
    case roce::NakCode::kRemoteOperationalError:
      fail_head(qp, WcStatus::kRemoteOperationalError);
      return;
    default:
      fail_head(qp, WcStatus::kRemoteInvalidRequest);
      return;
  }
}

void Datapath::on_read_response(QpContext& qp, const roce::Packet& pkt, TimeNs now) {
  if (qp.state != QpState::kRts) return drop(RxDropReason::kBadState);
  uint32_t psn = pkt.bth.psn;
  if (psn_diff(psn, qp.una_psn) < 0 || psn_diff(psn, qp.sent_hi) >= 0) return drop(RxDropReason::kOutOfWindow);
  auto& sq = qp.shared->sq;
  for (uint64_t i = sq.head(); i < qp.send_idx || i < qp.accepted; ++i) {
    const SendWr& wr = sq.at(i);
    SendSlot& s = qp.slots[sq.slot(i)];
    if (psn_diff(psn, end_psn(s)) >= 0) continue;
    // A PSN of a SEND or WRITE (or of a failed WR, which has none) is no READ response of ours.
    if (wr.opcode != WrOpcode::kRdmaRead || psn_diff(psn, s.first_psn) < 0) return drop(RxDropReason::kOutOfWindow);
    int32_t d = psn_diff(psn, s.read_next_psn);
    if (d < 0) return;  // duplicate response
    if (d > 0) {        // a response went missing: re-request from the gap
      ++counters_.implied_nak_seq_err;
      go_back_n(qp, s.read_next_psn);
      return;
    }
    uint64_t offset = static_cast<uint64_t>(psn_diff(psn, s.first_psn)) * qp.mtu;
    uint64_t expect = std::min<uint64_t>(qp.mtu, wr.sge.length - offset);
    if (pkt.payload.size() != expect) return drop(RxDropReason::kMalformed);
    if (!check_local(qp, wr.sge, true)) {  // deregistered while the READ was answered
      s.error = WcStatus::kLocalProtectionError;
      return;
    }
    if (expect != 0) std::memcpy(reinterpret_cast<void*>(wr.sge.addr + offset), pkt.payload.data(), expect);
    s.read_next_psn = psn_add(psn, 1);
    advance_una(qp, s.read_next_psn, now);
    return;
  }
  drop(RxDropReason::kOutOfWindow);
}

// The retransmit timer is armed when a packet goes out with nothing outstanding and stays armed
// while anything is; ACKs only move last_progress_ns, and the timer, when it fires, re-arms at the
// deadline that moved (one wheel operation per timeout, not one per ACK). The ACK that leaves
// nothing outstanding cancels it (advance_una), so an idle QP has no timer waking the loop.
void Datapath::retransmit_timer(QpContext& qp, TimeNs now) {
  if (qp.state != QpState::kRts || psn_diff(qp.sent_hi, qp.una_psn) <= 0 || qp.attr.timeout == 0) return;
  const TimeNs timeout = timeout_ns(qp.attr.timeout);
  const TimeNs deadline = qp.last_progress_ns + timeout;
  if (now < deadline) return arm(qp, kRetransmitTimer, deadline);
  ++counters_.local_ack_timeout_err;
  activate(qp);  // to resend, or to flush what fail_head left for a full CQ
  if (qp.retries_left == 0) {
    fail_head(qp, WcStatus::kRetryExceeded);
    return;
  }
  --qp.retries_left;
  qp.gbn_active = false;
  go_back_n(qp, qp.una_psn);
  qp.last_progress_ns = now;
  arm(qp, kRetransmitTimer, now + timeout);
}

}  // namespace rdmad::verbs::engine
