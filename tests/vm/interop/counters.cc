#include "counters.h"

#include <dirent.h>

#include <fstream>

#include "channel.h"

namespace rdmad::vm {

CounterMap soft_counters(const verbs::NicCounters& c) {
  CounterMap m{{"np_ecn_marked_roce_packets", c.np_ecn_marked_roce_packets},
               {"np_cnp_sent", c.np_cnp_sent},
               {"rp_cnp_handled", c.rp_cnp_handled},
               {"rp_cnp_ignored", c.rp_cnp_ignored},
               {"out_of_sequence", c.out_of_sequence},
               {"packet_seq_err", c.packet_seq_err},
               {"local_ack_timeout_err", c.local_ack_timeout_err},
               {"duplicate_request", c.duplicate_request},
               {"rnr_nak_retry_err", c.rnr_nak_retry_err},
               {"req_remote_access_errors", c.req_remote_access_errors},
               {"resp_remote_access_errors", c.resp_remote_access_errors},
               {"implied_nak_seq_err", c.implied_nak_seq_err},
               {"tx_packets", c.tx_packets},
               {"rx_packets", c.rx_packets},
               {"retransmitted_packets", c.retransmitted_packets}};
  for (size_t i = 0; i < verbs::kRxDropReasons; ++i) {
    m[std::string("drop_") + verbs::kRxDropReasonNames[i]] = c.rx_dropped_by_reason[i];
  }
  return m;
}

CounterMap read_hw_counters(const std::string& dir) {
  CounterMap m;
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return m;
  while (dirent* e = readdir(d)) {
    if (e->d_name[0] == '.') continue;
    std::ifstream in(dir + "/" + e->d_name);
    uint64_t v = 0;
    if (in >> v) m[e->d_name] = v;
  }
  closedir(d);
  return m;
}

CounterMap delta(const CounterMap& before, const CounterMap& after) {
  CounterMap out;
  for (const auto& [name, v] : after) out[name] = v - at(before, name);
  return out;
}

std::string to_line(const CounterMap& m, bool all) {
  std::string out;
  for (const auto& [name, v] : m) {
    if (v == 0 && !all) continue;
    if (!out.empty()) out += ' ';
    out += name + "=" + std::to_string(v);
  }
  return out;
}

CounterMap from_line(const std::string& line) {
  CounterMap m;
  for (const std::string& w : words(line)) {
    const auto eq = w.find('=');
    if (eq == std::string::npos) continue;
    m[w.substr(0, eq)] = std::stoull(w.substr(eq + 1));
  }
  return m;
}

}  // namespace rdmad::vm
