// Responder side of RC (IB spec 9.7.5): PSN checking with duplicate detection and one sequence NAK
// per gap, SEND placement into posted receives (RNR NAK when none), WRITE and READ with rkey/bounds/
// access checks (remote access NAK, target memory untouched, QP to ERR), coalesced ACKs, and READ
// responses emitted in order with the ACKs so an ACK never overtakes a response.
#include <algorithm>
#include <cstring>

#include "datapath.h"

namespace rdmad::verbs::engine {
namespace {

using roce::Opcode;
using roce::psn_add;
using roce::psn_diff;

uint32_t packets_for(uint32_t len, uint32_t mtu) { return len == 0 ? 1 : (len + mtu - 1) / mtu; }

bool is_send(Opcode op) { return op <= Opcode::kSendOnlyImm; }
bool is_write(Opcode op) { return op >= Opcode::kWriteFirst && op <= Opcode::kWriteOnlyImm; }
bool has_imm(Opcode op) {
  return op == Opcode::kSendLastImm || op == Opcode::kSendOnlyImm || op == Opcode::kWriteLastImm ||
         op == Opcode::kWriteOnlyImm;
}

}  // namespace

void Datapath::push_response(QpContext& qp, const Response& r) {
  if (qp.resp_count == kResponseDepth) return;  // dropped: the requester's timer recovers
  qp.responses[(qp.resp_head + qp.resp_count) % kResponseDepth] = r;
  ++qp.resp_count;
}

void Datapath::ack_coalesced(QpContext& qp, uint32_t psn) {
  if (qp.resp_count > 0) {
    Response& tail = qp.responses[(qp.resp_head + qp.resp_count - 1) % kResponseDepth];
    if (tail.kind == Response::Kind::kAck) {
      tail.psn = psn;
      return;
    }
  }
  Response r;
  r.kind = Response::Kind::kAck;
  r.psn = psn;
  push_response(qp, r);
}

void Datapath::on_request(QpContext& qp, const roce::Packet& pkt, TimeNs now) {
  (void)now;
  const Opcode op = pkt.bth.opcode;
  const roce::OpcodeInfo& info = roce::opcode_info(op);
  const uint32_t psn = pkt.bth.psn;
  int32_t d = psn_diff(psn, qp.epsn);
  // Requests outside the expected PSN get only the duplicate and sequence handling of IB 9.7.5.1,
  // which never moves the QP to ERR: only the request at epsn can fail it.
  if (d < 0) {
    ++counters_.duplicate_request;
    if (op == Opcode::kReadRequest) {  // responses were lost: serve the re-request again
      // A re-request lies inside a READ answered before, so its responses end before epsn; one
      // reaching further would answer with PSNs of requests not received yet.
      if (packets_for(pkt.reth.dma_length, qp.mtu) > static_cast<uint32_t>(-d)) return drop(RxDropReason::kOutOfWindow);
      if (!check_remote(qp, pkt.reth.va, pkt.reth.dma_length, pkt.reth.rkey, kAccessRemoteRead)) return;
      // The requester ignores every response after its gap and re-requests the later READs too, so
      // a READ still being answered restarts at the requested PSN and everything queued after it
      // is dropped, instead of being sent (stale) before the answer to this request.
      for (uint32_t k = 0; k < qp.resp_count; ++k) {
        Response& r = qp.responses[(qp.resp_head + k) % kResponseDepth];
        if (r.kind != Response::Kind::kRead) continue;
        bool covers = psn_diff(psn, r.first_psn) >= 0 && psn_diff(psn, r.last_psn) <= 0;
        if (!covers && psn_diff(r.first_psn, psn) <= 0) continue;
        if (covers) {
          if (psn_diff(psn, r.psn) < 0) r.psn = psn;
          qp.resp_count = k + 1;
          return;
        }
        qp.resp_count = k;  // a later READ: drop it and the rest
        break;
      }
      uint32_t n = packets_for(pkt.reth.dma_length, qp.mtu);
      push_response(qp, {Response::Kind::kRead, 0, psn, psn_add(psn, n - 1), psn, pkt.reth.va,
                         pkt.reth.dma_length, pkt.reth.rkey});
    } else {
      ack_coalesced(qp, psn_add(qp.epsn, roce::kPsnMask));  // re-ACK everything up to epsn - 1
    }
    return;
  }
  if (d > 0) {
    ++counters_.out_of_sequence;
    if (!qp.nak_sent) {
      push_response(qp, {Response::Kind::kNak, roce::Aeth::nak(0, roce::NakCode::kPsnSequenceError).syndrome,
                         qp.epsn, 0, 0, 0, 0});
      qp.nak_sent = true;
    }
    return;
  }
  auto nak = [&](roce::NakCode code) {
    set_error(qp);
    push_response(qp, {Response::Kind::kNak, roce::Aeth::nak(0, code).syndrome, psn, 0, 0, 0, 0});
  };
  auto& rq = qp.shared->rq;
  auto rnr_nak = [&] {
    push_response(qp, {Response::Kind::kNak, roce::Aeth::rnr_nak(0, qp.attr.min_rnr_timer).syndrome, psn, 0,
                       0, 0, 0});
  };
  const size_t n = pkt.payload.size();
  if (op == Opcode::kReadRequest) {
    if (!check_remote(qp, pkt.reth.va, pkt.reth.dma_length, pkt.reth.rkey, kAccessRemoteRead)) {
      ++counters_.resp_remote_access_errors;
      nak(roce::NakCode::kRemoteAccessError);
      return;
    }
    if (qp.resp_count == kResponseDepth) return;  // no room: the requester retries
    uint32_t npk = packets_for(pkt.reth.dma_length, qp.mtu);
    push_response(qp, {Response::Kind::kRead, 0, psn, psn_add(psn, npk - 1), psn, pkt.reth.va,
                       pkt.reth.dma_length, pkt.reth.rkey});
    qp.epsn = psn_add(psn, npk);
    qp.msn = (qp.msn + 1) & roce::kPsnMask;
    qp.nak_sent = false;
    return;
  }
  if (is_send(op)) {
    if (info.first) {
      if (rq.empty()) return rnr_nak();
      if (!check_local(qp, rq.at(rq.head()).sge, true)) return nak(roce::NakCode::kRemoteOperationalError);
      qp.recv_active = true;
      qp.recv_offset = 0;
    } else if (!qp.recv_active) {
      return nak(roce::NakCode::kInvalidRequest);
    }
    const RecvWr& rwr = rq.at(rq.head());
    // Checked for every packet, not only the first: the receive buffer's region may have been
    // deregistered (and its memory unmapped) since the message began.
    if (!info.first && !check_local(qp, rwr.sge, true)) {
      push_completion(*qp.recv_cq, {rwr.wr_id, WcStatus::kLocalProtectionError, WcOpcode::kRecv, false, qp.qpn,
                                    0, 0});
      rq.release();
      qp.recv_active = false;
      return nak(roce::NakCode::kRemoteOperationalError);
    }
    if (qp.recv_offset + n > rwr.sge.length) {
      push_completion(*qp.recv_cq, {rwr.wr_id, WcStatus::kLocalLengthError, WcOpcode::kRecv, false, qp.qpn, 0, 0});
      rq.release();
      return nak(roce::NakCode::kInvalidRequest);
    }
    if (n != 0) std::memcpy(reinterpret_cast<void*>(rwr.sge.addr + qp.recv_offset), pkt.payload.data(), n);
    qp.recv_offset += static_cast<uint32_t>(n);
    if (info.last) {
      push_completion(*qp.recv_cq, {rwr.wr_id, WcStatus::kSuccess, WcOpcode::kRecv, has_imm(op), qp.qpn,
                                    qp.recv_offset, pkt.imm_data});
      rq.release();
      qp.recv_active = false;
    }
  } else if (is_write(op)) {
    if (info.first) {
      if (!check_remote(qp, pkt.reth.va, pkt.reth.dma_length, pkt.reth.rkey, kAccessRemoteWrite)) {
        ++counters_.resp_remote_access_errors;
        return nak(roce::NakCode::kRemoteAccessError);
      }
      qp.write_va = pkt.reth.va;
      qp.write_left = pkt.reth.dma_length;
      qp.write_len = pkt.reth.dma_length;
      qp.write_rkey = pkt.reth.rkey;
    } else if (n != 0 && !check_remote(qp, qp.write_va, static_cast<uint32_t>(std::min<size_t>(n, qp.write_left)),
                                       qp.write_rkey, kAccessRemoteWrite)) {
      // The region went away (deregistered, perhaps unmapped) while the WRITE was arriving: refuse
      // the rest as a NIC refuses packets for an invalidated key.
      ++counters_.resp_remote_access_errors;
      return nak(roce::NakCode::kRemoteAccessError);
    }
    if (n > qp.write_left || (info.last && n != qp.write_left)) return nak(roce::NakCode::kInvalidRequest);
    // Check for a receive before placing anything so an RNR retry finds the same state.
    if (has_imm(op) && rq.empty()) return rnr_nak();
    if (n != 0) std::memcpy(reinterpret_cast<void*>(qp.write_va), pkt.payload.data(), n);
    qp.write_va += n;
    qp.write_left -= static_cast<uint32_t>(n);
    if (has_imm(op)) {
      const RecvWr& rwr = rq.at(rq.head());
      push_completion(*qp.recv_cq, {rwr.wr_id, WcStatus::kSuccess, WcOpcode::kRecvRdmaWithImm, true, qp.qpn,
                                    qp.write_len, pkt.imm_data});
      rq.release();
    }
  } else {
    return drop(RxDropReason::kMalformed);  // no request this responder serves (atomics)
  }
  if (info.last) qp.msn = (qp.msn + 1) & roce::kPsnMask;
  qp.epsn = psn_add(psn, 1);
  qp.nak_sent = false;
  if (pkt.bth.ack_req) ack_coalesced(qp, psn);
}

bool Datapath::responder_tx(QpContext& qp, TimeNs now, int budget) {
  int sent = 0;
  while (sent < budget && qp.resp_count > 0) {
    Response& r = qp.responses[qp.resp_head];
    roce::Packet p;
    p.bth.dest_qp = qp.attr.dest_qp_num;
    p.bth.psn = r.psn;
    bool done = true;
    size_t data_bytes = 0;
    if (r.kind != Response::Kind::kRead) {
      p.bth.opcode = Opcode::kAcknowledge;
      p.aeth = r.kind == Response::Kind::kAck ? roce::Aeth::ack(qp.msn) : roce::Aeth{r.syndrome, qp.msn};
    } else {
      if (!may_send_data(qp, now)) break;
      const uint64_t offset = static_cast<uint64_t>(psn_diff(r.psn, r.first_psn)) * qp.mtu;
      const auto bytes = static_cast<uint32_t>(std::min<uint64_t>(qp.mtu, r.length - offset));
      if (!check_remote(qp, r.va + offset, bytes, r.rkey, kAccessRemoteRead)) {
        // The region was deregistered while its READ was being answered: NAK the rest instead of
        // reading memory that may be gone.
        ++counters_.resp_remote_access_errors;
        const uint32_t at = r.psn;
        set_error(qp);
        push_response(qp, {Response::Kind::kNak, roce::Aeth::nak(0, roce::NakCode::kRemoteAccessError).syndrome,
                           at, 0, 0, 0, 0, 0});
        continue;
      }
      const bool first = r.psn == r.first_psn;
      const bool last = r.psn == r.last_psn;
      p.bth.opcode = roce::read_response_opcode(first, last);
      p.aeth = roce::Aeth::ack(qp.msn);
      p.payload = {reinterpret_cast<const uint8_t*>(r.va + offset), bytes};
      r.psn = psn_add(r.psn, 1);
      done = last;
      data_bytes = bytes + kWireOverheadBytes;
    }
    send_packet(qp, p, roce::kEcnEct0);
    if (data_bytes != 0) on_data_sent(qp, now, data_bytes);
    if (done) {
      qp.resp_head = (qp.resp_head + 1) % kResponseDepth;
      --qp.resp_count;
    }
    ++sent;
  }
  return sent > 0;
}

}  // namespace rdmad::verbs::engine
