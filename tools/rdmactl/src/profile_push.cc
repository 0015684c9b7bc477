#include "profile_push.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "admin_call.h"
#include "admin_commands.h"
#include "output.h"
#include "rdmad/admin.h"

namespace rdmactl {

namespace cc = rdmad::cc;
namespace {

using rdmad::proto::MsgType;

// A profile file is a few hundred bytes; anything this big is not one.
constexpr size_t kMaxProfileBytes = 1 << 20;

// Sends the profile's knobs to one NIC, kMaxCcSetKnobs per request. The daemon checks each request
// whole before it changes anything; the knobs were checked here already (names, ranges), so what
// it refuses is the NIC (no DCQCN to set) or, for a hardware NIC, values it did not take: the
// push goes on and the read-back shows what the NIC runs. Returns the daemon's complaints.
std::string push(rdmad_client* c, const std::string& nic, const cc::DcqcnProfile& profile) {
  std::string errors;
  const auto& knobs = profile.knobs;
  for (size_t first = 0; first < knobs.size(); first += rdmad::proto::kMaxCcSetKnobs) {
    rdmad::proto::CcSetRequest req{};
    rdmad::proto::copy_cstr(req.nic, nic.c_str());
    req.count = static_cast<uint32_t>(std::min<size_t>(rdmad::proto::kMaxCcSetKnobs, knobs.size() - first));
    for (uint32_t i = 0; i < req.count; ++i) {
      rdmad::proto::copy_cstr(req.knobs[i].name, std::string(knobs[first + i].knob->name).c_str());
      req.knobs[i].value = knobs[first + i].value;
    }
    std::vector<std::byte> reply;
    if (auto st = rdmad::admin::call(c, MsgType::kCcSet, bytes_of(req), &reply); st != RDMAD_OK)
      errors += fmt::format("{}{}: {}", errors.empty() ? "" : "; ", rdmad_strerror(st), rdmad_last_error(c));
  }
  return errors;
}

}  // namespace

size_t NicReadback::differing() const {
  return static_cast<size_t>(std::count_if(knobs.begin(), knobs.end(), [](const KnobReadback& k) { return k.differs(); }));
}

std::vector<KnobReadback> compare_knobs(const cc::DcqcnProfile& profile,
                                        const std::vector<std::pair<std::string, std::optional<int64_t>>>& shown) {
  std::vector<KnobReadback> out;
  for (const cc::ProfileKnob& k : profile.knobs) {
    KnobReadback r{std::string(k.knob->name), k.value, std::nullopt};
    for (const auto& [name, value] : shown)
      if (cc::find_mlx5_knob(name) == k.knob) r.now = value;
    out.push_back(std::move(r));
  }
  return out;
}

std::string readback_text(const cc::DcqcnProfile& profile, const std::string& file, const std::vector<NicReadback>& nics) {
  std::string out = fmt::format("profile {}{} (base {}, {} knobs)\n", file,
                                profile.name.empty() ? "" : " \"" + profile.name + "\"", profile.base,
                                profile.knobs.size());
  size_t differ = 0;
  for (const NicReadback& n : nics) {
    out += fmt::format("\nnic {} ({}): {}\n", n.nic, n.backend, n.source);
    if (!n.error.empty()) out += fmt::format("  the daemon said: {}\n", n.error);
    for (const KnobReadback& k : n.knobs) {
      if (!k.now)
        out += fmt::format("  {:<32} (unreadable; wanted {})\n", k.name, k.wanted);
      else if (*k.now != k.wanted)
        out += fmt::format("  {:<32} {}  (wanted {}: the NIC rounded or clamped it)\n", k.name, *k.now, k.wanted);
      else
        out += fmt::format("  {:<32} {}\n", k.name, *k.now);
    }
    differ += n.differing();
  }
  out += differ == 0 ? fmt::format("\nevery NIC runs the profile ({} NIC(s))\n", nics.size())
                     : fmt::format("\n{} knob value(s) on the NICs differ from the profile\n", differ);
  return out;
}

std::string readback_json(const cc::DcqcnProfile& profile, const std::string& file, const std::vector<NicReadback>& nics) {
  std::string out = fmt::format("{{\"profile\":\"{}\",\"name\":\"{}\",\"base\":\"{}\",\"nics\":[", json_escape(file),
                                json_escape(profile.name), json_escape(profile.base));
  for (size_t i = 0; i < nics.size(); ++i) {
    const NicReadback& n = nics[i];
    out += fmt::format("{}{{\"nic\":\"{}\",\"backend\":\"{}\",\"source\":\"{}\",\"error\":\"{}\",\"knobs\":{{", i ? "," : "",
                       json_escape(n.nic), json_escape(n.backend), json_escape(n.source), json_escape(n.error));
    std::string differs;
    for (size_t k = 0; k < n.knobs.size(); ++k) {
      const KnobReadback& r = n.knobs[k];
      out += fmt::format("{}\"{}\":{{\"wanted\":{},\"now\":{}}}", k ? "," : "", json_escape(r.name), r.wanted,
                         r.now ? std::to_string(*r.now) : std::string("null"));
      if (r.differs()) differs += fmt::format("{}\"{}\"", differs.empty() ? "" : ",", json_escape(r.name));
    }
    out += fmt::format("}},\"differs\":[{}]}}", differs);
  }
  return out + "]}\n";
}

int cmd_cc_set_profile(rdmad_client* c, const std::string& nic, const std::string& file, bool json) {
  std::ifstream in(file, std::ios::binary);
  if (!in) {
    std::fprintf(stderr, "rdmactl: cc set: cannot read profile %s\n", file.c_str());
    return kExitUsage;
  }
  std::ostringstream text;
  text << in.rdbuf();
  if (text.str().size() > kMaxProfileBytes) {
    std::fprintf(stderr, "rdmactl: cc set: %s is larger than a profile file can be (%zu bytes)\n", file.c_str(),
                 kMaxProfileBytes);
    return kExitUsage;
  }
  const cc::ProfileParse parsed = cc::parse_dcqcn_profile(text.str(), file);
  for (const cc::ProfileError& e : parsed.errors) std::fprintf(stderr, "rdmactl: cc set: %s\n", e.to_string(file).c_str());
  if (!parsed.ok()) return kExitUsage;

  // The NICs: the one named, or every NIC the daemon has (cc show's cursor walks them).
  std::vector<CcShownNic> targets;
  for (uint32_t cursor = 0;; ++cursor) {
    CcShownNic shown;
    if (int rc = fetch_cc_show(c, nic, cursor, &shown); rc != kExitOk) return rc;
    targets.push_back(std::move(shown));
    if (!nic.empty() || !targets.back().more) break;
  }
  std::vector<NicReadback> report;
  for (const CcShownNic& t : targets) {
    NicReadback r{t.nic, t.backend, t.source, push(c, t.nic, parsed.profile), {}};
    CcShownNic after;
    if (int rc = fetch_cc_show(c, t.nic, 0, &after); rc != kExitOk) return rc;
    r.source = after.source;
    r.knobs = compare_knobs(parsed.profile, after.knobs);
    report.push_back(std::move(r));
  }
  const std::string out = json ? readback_json(parsed.profile, file, report) : readback_text(parsed.profile, file, report);
  std::fputs(out.c_str(), stdout);
  const bool all = std::all_of(report.begin(), report.end(),
                               [](const NicReadback& r) { return r.differing() == 0 && r.error.empty(); });
  return all ? kExitOk : kExitDaemonError;
}

}  // namespace rdmactl
