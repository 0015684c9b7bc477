#include "session.h"

#include <algorithm>
#include <cstdio>

namespace rdmad::vm {
namespace {

using verbs::Status;

constexpr std::chrono::seconds kCaseSeconds{30};

// Each case gets its own bytes, so a WR that landed in the wrong case's slot shows.
uint64_t case_seed(const std::string& phase, uint32_t mtu, size_t index) {
  uint64_t h = 1469598103934665603ull;
  for (char c : phase) h = (h ^ static_cast<uint8_t>(c)) * 1099511628211ull;
  return h ^ (uint64_t{mtu} << 32) ^ index;
}

// The next line, which must start with `word`; a "fail" from the peer becomes this side's error.
Status expect(Channel& ch, const std::string& word, Clock::time_point deadline, std::string* line) {
  std::string err;
  auto got = ch.receive(deadline, &err);
  if (!got) return Status::error("waiting for '" + word + "': " + err);
  if (got->rfind("fail", 0) == 0)
    return Status::error("the peer failed: " + got->substr(std::min<size_t>(5, got->size())));
  if (got->rfind(word, 0) != 0) return Status::error("expected '" + word + "', got '" + *got + "'");
  if (line != nullptr) *line = *got;
  return Status::success();
}

std::string announce(size_t i, const Case& c, uint64_t seed) {
  return "case " + std::to_string(i) + " " + op_name(c.op) + " " + std::to_string(c.size) + " " +
         std::to_string(c.count) + " " + std::to_string(seed);
}

Status run_case(Peer& peer, Channel& ch, size_t i, const Case& c, uint64_t seed, bool initiator,
                const RegionInfo& remote, Clock::time_point deadline) {
  if (initiator) {
    if (!ch.send(announce(i, c, seed))) return Status::error("channel closed");
    if (Status st = expect(ch, "ready", deadline, nullptr); !st.ok()) return st;
    if (Status st = peer.initiate(c, seed, remote, deadline); !st.ok()) return fail(ch, st);
    if (!ch.send("check")) return Status::error("channel closed");
    return expect(ch, "ok", deadline, nullptr);
  }
  std::string line;
  if (Status st = expect(ch, "case", deadline, &line); !st.ok()) return st;
  if (line != announce(i, c, seed))
    return fail(ch,
                Status::error("plans differ: got '" + line + "', expected '" + announce(i, c, seed) + "'"));
  if (Status st = peer.prepare(c, seed); !st.ok()) return fail(ch, st);
  if (!ch.send("ready")) return Status::error("channel closed");
  if (Status st = expect(ch, "check", deadline, nullptr); !st.ok()) return st;
  if (Status st = peer.check(c, seed, deadline); !st.ok()) return fail(ch, st);
  return ch.send("ok") ? Status::success() : Status::error("channel closed");
}

// Both QPs are created, their numbers exchanged (soft side first), both taken to RTS, and neither
// side sends before the other is there ("rts" both ways): a packet for a QP still in INIT is
// dropped, and the clean phase allows no resends.
Status connect_mtu(Peer& peer, Channel& ch, const Phase& phase, uint32_t mtu, bool soft,
                   Clock::time_point deadline) {
  if (Status st = peer.create_qp(static_cast<uint32_t>(case_seed(phase.name, mtu, 0xABCDEF))); !st.ok())
    return fail(ch, st);
  std::string line;
  QpInfo remote;
  if (soft) ch.send(peer.local().to_line());
  if (Status st = expect(ch, "qp", deadline, &line); !st.ok()) return st;
  if (!QpInfo::parse(line, &remote)) return fail(ch, Status::error("bad qp line '" + line + "'"));
  if (!soft) ch.send(peer.local().to_line());
  if (Status st = peer.connect(remote, mtu, phase.timeout); !st.ok()) return fail(ch, st);
  ch.send("rts");
  return expect(ch, "rts", deadline, nullptr);
}

}  // namespace

Status fail(Channel& ch, const Status& st) {
  ch.send("fail " + st.message());
  return st;
}

Status run_phase(Peer& peer, Channel& ch, const Phase& phase, bool soft, const RegionInfo& remote,
                 Clock::time_point deadline) {
  for (uint32_t mtu : phase.mtus) {
    const auto start = Clock::now();
    if (Status st = connect_mtu(peer, ch, phase, mtu, soft, deadline); !st.ok()) {
      return Status::error(phase.name + " mtu " + std::to_string(mtu) + ": " + st.message());
    }
    const auto cases = phase.cases(mtu);
    for (size_t i = 0; i < cases.size(); ++i) {
      const Case& c = cases[i];
      // A case that cannot finish in 30 s (a few timeouts at most, even on a loaded host) is broken:
      // fail it then, with the counters, rather than at the phase's end.
      const auto case_deadline = std::min(deadline, Clock::now() + kCaseSeconds);
      const Status st = run_case(peer, ch, i, c, case_seed(phase.name, mtu, i), c.soft_initiates == soft,
                                 remote, case_deadline);
      if (!st.ok()) {
        return Status::error(phase.name + " mtu " + std::to_string(mtu) + " case " + std::to_string(i) +
                             " (" + (c.soft_initiates ? "soft -> rxe" : "rxe -> soft") +
                             "): " + st.message());
      }
    }
    const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
    std::printf("interop: %s: mtu %u: %zu cases passed in %.2f s\n", phase.name.c_str(), mtu, cases.size(),
                seconds);
    std::fflush(stdout);
  }
  return Status::success();
}

}  // namespace rdmad::vm
