#include "checks.h"

namespace rdmad::vm {
namespace {

void must_be_zero(const CounterMap& m, std::initializer_list<const char*> names, const char* who,
                  std::vector<std::string>& out) {
  for (const char* n : names) {
    if (at(m, n) != 0)
      out.push_back(std::string(who) + " " + n + " = " + std::to_string(at(m, n)) + ", expected 0");
  }
}

void must_be_positive(const CounterMap& m, const char* name, const char* who, const char* why,
                      std::vector<std::string>& out) {
  if (at(m, name) == 0) out.push_back(std::string(who) + " " + name + " = 0: " + why);
}

void must_equal(uint64_t a, const std::string& a_name, uint64_t b, const std::string& b_name,
                std::vector<std::string>& out) {
  if (a != b)
    out.push_back(a_name + " = " + std::to_string(a) + " but " + b_name + " = " + std::to_string(b));
}

}  // namespace

std::vector<std::string> check_soft(const std::string& phase, const CounterMap& soft) {
  std::vector<std::string> out;
  // A healthy peer never produces these, lossy link or not (docs/verbs.md, "Drop reasons").
  must_be_zero(soft,
               {"drop_bad_icrc", "drop_malformed", "drop_truncated", "drop_unknown_qp", "drop_wrong_source"},
               "soft", out);
  if (phase == "clean") {
    must_be_zero(soft,
                 {"drop_bad_state", "drop_out_of_window", "retransmitted_packets", "local_ack_timeout_err",
                  "packet_seq_err", "out_of_sequence", "duplicate_request", "implied_nak_seq_err",
                  "rnr_nak_retry_err", "np_ecn_marked_roce_packets"},
                 "soft", out);
  } else if (phase == "lossy") {
    must_be_positive(soft, "retransmitted_packets", "soft",
                     "no loss reached the soft requester (is netem on?)", out);
  } else if (phase == "ecn") {
    must_be_positive(soft, "np_ecn_marked_roce_packets", "soft",
                     "no CE mark arrived (is the RED qdisc marking?)", out);
    must_be_positive(soft, "np_cnp_sent", "soft", "the notification point sent no CNP", out);
  }
  return out;
}

std::vector<std::string> check_rxe(const std::string& phase, const CounterMap& rxe, const CounterMap& soft) {
  std::vector<std::string> out;
  // rxe has no ICRC counter: a packet failing its ICRC check (or any header check) is dropped
  // before rcvd_pkts counts it. So on a lossless link every packet the soft NIC sent must be
  // counted, and every packet rxe sent must have reached the soft NIC's QPs.
  must_be_zero(rxe, {"retry_exceeded_err", "retry_rnr_exceeded_err"}, "rxe", out);
  if (phase == "clean") {
    must_be_zero(rxe,
                 {"duplicate_request", "out_of_seq_request", "rcvd_seq_err", "rcvd_rnr_err", "send_rnr_err",
                  "completer_retry_err", "send_err"},
                 "rxe", out);
    must_equal(at(rxe, "rcvd_pkts"), "rxe rcvd_pkts", at(soft, "tx_packets"), "soft tx_packets", out);
    must_equal(at(rxe, "sent_pkts"), "rxe sent_pkts", at(soft, "rx_packets"), "soft rx_packets", out);
  } else if (phase == "ecn") {
    // The RED queue is on the guest's egress only, so nothing the soft NIC sent is lost: rxe counts
    // every packet but the CNPs, which it drops as packets of no RC opcode (it has no DCQCN).
    must_equal(at(rxe, "rcvd_pkts"), "rxe rcvd_pkts", at(soft, "tx_packets") - at(soft, "np_cnp_sent"),
               "soft tx_packets - np_cnp_sent", out);
  }
  return out;
}

}  // namespace rdmad::vm
