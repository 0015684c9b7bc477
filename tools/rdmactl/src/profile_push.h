// `rdmactl cc set --profile FILE`: pushes a DCQCN profile file (rdmad-sim tune's) to the NICs and
// reads back what each one runs now.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "rdmad/cc/dcqcn_profile.h"
#include "rdmad/rdmad.h"

namespace rdmactl {

// One knob of the profile on one NIC after the push.
struct KnobReadback {
  std::string name;
  int64_t wanted = 0;
  std::optional<int64_t> now;  // nullopt: the NIC did not give it back
  bool differs() const { return !now || *now != wanted; }
};

// What one NIC reported back: its knobs (the profile's, in the profile's order), and the daemon's
// complaint about the push when it had one (a hardware NIC that did not take a value says which).
struct NicReadback {
  std::string nic, backend, source;
  std::string error;
  std::vector<KnobReadback> knobs;
  size_t differing() const;
};

// Matches the profile's knobs with a NIC's read-back `shown` (name, value; nullopt: unreadable).
std::vector<KnobReadback> compare_knobs(const rdmad::cc::DcqcnProfile& profile,
                                        const std::vector<std::pair<std::string, std::optional<int64_t>>>& shown);
// The text and JSON reports of a push (also used by the tests with made-up read-backs).
std::string readback_text(const rdmad::cc::DcqcnProfile& profile, const std::string& file, const std::vector<NicReadback>& nics);
std::string readback_json(const rdmad::cc::DcqcnProfile& profile, const std::string& file, const std::vector<NicReadback>& nics);

// Reads and checks FILE (problems: "file:line:column: key: message" on stderr, kExitUsage), pushes
// the profile's knobs to `nic` or every NIC, reads every NIC back and prints the report. kExitOk when
// every NIC runs every knob as the profile says, else kExitDaemonError.
int cmd_cc_set_profile(rdmad_client* c, const std::string& nic, const std::string& file, bool json);

}  // namespace rdmactl
