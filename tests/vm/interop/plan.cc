#include "plan.h"

namespace rdmad::vm {
namespace {

using verbs::WrOpcode;

constexpr WrOpcode kOps[] = {WrOpcode::kRdmaWrite, WrOpcode::kRdmaWriteWithImm, WrOpcode::kSend,
                             WrOpcode::kSendWithImm, WrOpcode::kRdmaRead};

void both_ways(std::vector<Case>& out, WrOpcode op, uint32_t size, uint32_t count) {
  out.push_back({op, size, count, true});
  out.push_back({op, size, count, false});
}

}  // namespace

std::vector<Case> Phase::cases(uint32_t mtu) const {
  std::vector<Case> out;
  if (name == "clean") {
    // Around the MTU (one packet, exactly one, one more) and a few packets with a short tail.
    for (WrOpcode op : kOps) {
      for (uint32_t size : {1u, mtu - 1, mtu, mtu + 1, 3 * mtu + 7, 5u * 4096 + 3})
        both_ways(out, op, size, 1);
    }
  } else if (name == "lossy") {
    // Many packets per message, and several messages in flight, so that losses and reordering hit
    // first, middle and last packets, ACKs, READ responses and the boundaries between messages.
    for (WrOpcode op : kOps) {
      both_ways(out, op, 64 * 1024 + 5, 1);
      both_ways(out, op, 24 * 1024 + 3, 6);
    }
  } else if (name == "ecn") {
    // rxe sends the data (its packets queue in the guest's RED qdisc and are marked): WRITEs and
    // SENDs it posts, READ responses to the soft side's READs. The soft side sends ACKs, READ
    // requests and CNPs only, none of which a burst of its own could lose on the way in.
    out.push_back({WrOpcode::kRdmaWrite, 128 * 1024 + 1, 2, false});
    out.push_back({WrOpcode::kRdmaRead, 128 * 1024 + 1, 2, true});
    out.push_back({WrOpcode::kSendWithImm, 32 * 1024 + 7, 4, false});
  }
  return out;
}

Phase make_phase(const std::string& name, uint32_t max_mtu) {
  Phase p;
  p.name = name;
  if (name == "clean") {
    for (uint32_t mtu = 256; mtu <= max_mtu; mtu *= 2) p.mtus.push_back(mtu);
    // No loss: a resend would mean an ACK took over a second (a timeout is not expected here).
    p.timeout = 18;
  } else if (name == "lossy") {
    p.mtus = {256, 1024};  // 256: 257 packets for 64 KiB, so many losses per message
    if (max_mtu >= 4096) p.mtus.push_back(4096);
    p.timeout = 14;  // 67 ms: a lost last packet or ACK costs one timeout
  } else if (name == "ecn") {
    p.mtus = {1024};
    p.timeout = 18;  // 1.07 s: the RED queue holds up to 160 ms; a timeout would only add load
  } else {
    p.name.clear();
  }
  return p;
}

const char* op_name(verbs::WrOpcode op) {
  switch (op) {
    case WrOpcode::kSend:
      return "send";
    case WrOpcode::kSendWithImm:
      return "send_imm";
    case WrOpcode::kRdmaWrite:
      return "write";
    case WrOpcode::kRdmaWriteWithImm:
      return "write_imm";
    case WrOpcode::kRdmaRead:
      return "read";
  }
  return "?";
}

bool parse_op(const std::string& name, verbs::WrOpcode* op) {
  for (WrOpcode o : kOps) {
    if (name == op_name(o)) {
      *op = o;
      return true;
    }
  }
  return false;
}

}  // namespace rdmad::vm
