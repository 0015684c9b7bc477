#include "admin_commands.h"

#include <fmt/format.h>

#include <charconv>
#include <cstdio>
#include <cstring>

#include "admin_call.h"
#include "output.h"
#include "rdmad/admin.h"

namespace rdmactl {
namespace {

using rdmad::proto::MsgType;

const char* flow_state_name(uint32_t s) {
  static constexpr const char* kNames[] = {"connecting", "connected", "disconnected", "failed"};
  return s < 4 ? kNames[s] : "unknown";
}

std::string access_text(uint32_t a) {
  std::string s;
  auto add = [&](uint32_t bit, const char* name) {
    if (a & bit) s += (s.empty() ? "" : ",") + std::string(name);
  };
  add(RDMAD_ACCESS_LOCAL_WRITE, "local_write");
  add(RDMAD_ACCESS_REMOTE_WRITE, "remote_write");
  add(RDMAD_ACCESS_REMOTE_READ, "remote_read");
  add(RDMAD_ACCESS_REMOTE_ATOMIC, "remote_atomic");
  return s.empty() ? "-" : s;
}

const char* kind_name(uint32_t k) { return k == RDMAD_MEM_GPU ? "gpu" : "host"; }

// Whom an entry's quota counts it against: its pod, else its uid (docs/security.md, "Tenants").
template <size_t N>
std::string tenant_text(const char (&pod)[N], uint32_t uid) {
  const std::string p = field(pod);
  return p.empty() ? "uid " + std::to_string(uid) : "pod " + p;
}

}  // namespace

int cmd_flows(rdmad_client* c, bool json) {
  std::vector<rdmad::proto::FlowEntry> flows;
  int rc = kExitOk;
  if (!list_all(
          c, MsgType::kListFlows, rdmad::proto::kMaxFlowListEntries, "list flows",
          [](const auto& v) { return v.back().flow_id; }, &flows, &rc))
    return rc;
  if (json) {
    std::printf("[");
    for (size_t i = 0; i < flows.size(); ++i) {
      const auto& f = flows[i];
      std::printf(
          "%s{\"flow_id\":%llu,\"peer\":\"%s\",\"channel\":%llu,\"state\":\"%s\",\"in_flight\":%u,"
          "\"sq_depth\":%u,\"cq_depth\":%u,\"owner_uid\":%u,\"owner_pid\":%d,\"tenant\":\"%s\"}",
          i ? "," : "", static_cast<unsigned long long>(f.flow_id), json_escape(f.peer).c_str(),
          static_cast<unsigned long long>(f.channel), flow_state_name(f.state), f.in_flight, f.sq_depth,
          f.cq_depth, f.owner_uid, f.owner_pid, json_escape(tenant_text(f.owner_pod, f.owner_uid)).c_str());
    }
    std::printf("]\n");
    return kExitOk;
  }
  std::printf("%-6s %-20s %-10s %-13s %9s %6s %6s %6s %8s  %s\n", "FLOW", "PEER", "CHANNEL", "STATE",
              "IN-FLIGHT", "SQ", "CQ", "UID", "PID", "TENANT");
  for (const auto& f : flows) {
    std::printf("%-6llu %-20s %-10llu %-13s %9u %6u %6u %6u %8d  %s\n",
                static_cast<unsigned long long>(f.flow_id), f.peer,
                static_cast<unsigned long long>(f.channel), flow_state_name(f.state), f.in_flight, f.sq_depth,
                f.cq_depth, f.owner_uid, f.owner_pid, tenant_text(f.owner_pod, f.owner_uid).c_str());
  }
  if (flows.empty()) std::printf("(no flows)\n");
  return kExitOk;
}

int cmd_registrations(rdmad_client* c, bool json) {
  std::vector<rdmad::proto::RegistrationEntry> regs;
  int rc = kExitOk;
  if (!list_all(
          c, MsgType::kListAllRegistrations, rdmad::proto::kMaxRegistrationListEntries, "list registrations",
          [](const auto& v) { return v.back().handle; }, &regs, &rc))
    return rc;
  if (json) {
    std::printf("[");
    for (size_t i = 0; i < regs.size(); ++i) {
      const auto& r = regs[i];
      std::printf(
          "%s{\"handle\":%llu,\"kind\":\"%s\",\"offset\":%llu,\"length\":%llu,\"access\":\"%s\","
          "\"pinned_bytes\":%llu,\"owner_uid\":%u,\"owner_pid\":%d,\"tenant\":\"%s\"}",
          i ? "," : "", static_cast<unsigned long long>(r.handle), kind_name(r.kind),
          static_cast<unsigned long long>(r.offset), static_cast<unsigned long long>(r.length),
          access_text(r.access).c_str(), static_cast<unsigned long long>(r.pinned_bytes), r.owner_uid,
          r.owner_pid, json_escape(tenant_text(r.owner_pod, r.owner_uid)).c_str());
    }
    std::printf("]\n");
    return kExitOk;
  }
  std::printf("%-8s %-5s %14s %14s %14s %6s %8s  %-40s  %s\n", "HANDLE", "KIND", "OFFSET", "LENGTH", "PINNED",
              "UID", "PID", "TENANT", "ACCESS");
  for (const auto& r : regs) {
    std::printf("%-8llu %-5s %14llu %14llu %14llu %6u %8d  %-40s  %s\n", static_cast<unsigned long long>(r.handle),
                kind_name(r.kind), static_cast<unsigned long long>(r.offset),
                static_cast<unsigned long long>(r.length), static_cast<unsigned long long>(r.pinned_bytes),
                r.owner_uid, r.owner_pid, tenant_text(r.owner_pod, r.owner_uid).c_str(), access_text(r.access).c_str());
  }
  if (regs.empty()) std::printf("(no registrations)\n");
  return kExitOk;
}

namespace {

// The knobs of one NIC as "name=value ..." (text) or "{...}" (json); empty when unavailable.
std::string cc_knobs(rdmad_client* c, const char* nic, bool json, std::string* source) {
  rdmad::proto::CcShowRequest req{};
  rdmad::proto::copy_cstr(req.nic, nic);
  std::vector<std::byte> reply;
  if (rdmad::admin::call(c, MsgType::kCcShow, bytes_of(req), &reply) != RDMAD_OK) return {};
  auto head = load<rdmad::proto::CcShowReply>(reply, 0);
  if (reply.size() != sizeof(head) + size_t{head.knob_count} * sizeof(rdmad::proto::CcKnob)) return {};
  head.source[sizeof(head.source) - 1] = '\0';
  *source = head.source;
  std::string out;
  for (uint32_t i = 0; i < head.knob_count; ++i) {
    auto k = load<rdmad::proto::CcKnob>(reply, sizeof(head) + i * sizeof(rdmad::proto::CcKnob));
    k.name[sizeof(k.name) - 1] = '\0';
    if (k.flags & rdmad::proto::kKnobUnreadable) continue;
    out += json ? fmt::format("{}\"{}\":{}", out.empty() ? "" : ",", json_escape(k.name), k.value)
                : fmt::format("{}{}={}", out.empty() ? "" : " ", k.name, k.value);
  }
  return out;
}

}  // namespace

int cmd_nic_details(rdmad_client* c, bool json) {
  rdmad::proto::NicDetailsRequest req{};
  std::vector<std::byte> reply;
  std::string out;
  const auto gone = out_of_service_nics(c);
  for (bool first = true;; first = false) {
    if (auto st = rdmad::admin::call(c, MsgType::kNicDetails, bytes_of(req), &reply); st != RDMAD_OK) {
      if (first && st == RDMAD_ERR_PERMISSION) return -1;
      if (first && st == RDMAD_ERR_NOT_FOUND) break;  // no NIC opened
      return fail(c, "nic details", st);
    }
    if (reply.size() != sizeof(rdmad::proto::NicDetailsReply)) {
      std::fprintf(stderr, "rdmactl: malformed reply from the daemon\n");
      return kExitDaemonError;
    }
    auto d = load<rdmad::proto::NicDetailsReply>(reply, 0);
    d.nic[sizeof(d.nic) - 1] = d.backend[sizeof(d.backend) - 1] = d.device[sizeof(d.device) - 1] =
        d.gid[sizeof(d.gid) - 1] = '\0';
    std::string source;
    const std::string knobs = cc_knobs(c, d.nic, json, &source);
    const auto why = gone.find(d.nic);
    if (why != gone.end() && !json) {
      out += fmt::format("\nnic {} ({}, device {}): out of service: {}\n", d.nic, d.backend, d.device, why->second);
      if (!knobs.empty()) out += fmt::format("  cc ({})  {}\n", source, knobs);
    } else if (json) {
      out += fmt::format(
          "{}{{\"index\":{},\"name\":\"{}\",\"backend\":\"{}\",\"link\":\"{}\",\"speed_mbps\":{},"
          "\"device\":\"{}\",\"gid\":\"{}\",\"udp_port\":{},\"mtu\":{},\"counters\":{{\"tx_bytes\":{},\"rx_bytes\":{},"
          "\"tx_packets\":{},\"rx_packets\":{},\"np_cnp_sent\":{},\"np_ecn_marked_roce_packets\":{},"
          "\"rp_cnp_handled\":{},\"rp_cnp_ignored\":{},\"retransmitted_packets\":{},\"local_ack_timeout_err\":{},"
          "\"out_of_sequence\":{},\"rx_dropped\":{}}},\"dcqcn\":{{\"qps\":{},\"rate_min_mbps\":{},"
          "\"rate_mean_mbps\":{},\"alpha_max\":{}}},\"cc_source\":\"{}\",\"cc\":{{{}}}{}}}",
          first ? "" : ",", req.cursor, json_escape(d.nic), json_escape(d.backend),
          link_name(static_cast<rdmad_link_state>(d.link_state)), d.speed_mbps, json_escape(d.device),
          json_escape(d.gid), d.udp_port,
          d.mtu_bytes, d.tx_bytes, d.rx_bytes, d.tx_packets, d.rx_packets, d.np_cnp_sent,
          d.np_ecn_marked_roce_packets, d.rp_cnp_handled, d.rp_cnp_ignored, d.retransmitted_packets,
          d.local_ack_timeout_err, d.out_of_sequence, d.rx_dropped, d.dcqcn_qps, d.dcqcn_rate_min_mbps,
          d.dcqcn_rate_mean_mbps, d.dcqcn_alpha_max, json_escape(source), knobs,
          why == gone.end() ? std::string() : fmt::format(",\"out_of_service\":\"{}\"", json_escape(why->second)));
    } else {
      out += fmt::format("\nnic {} ({}, device {}): {} {} Mb/s, gid {} udp {} mtu {}\n", d.nic, d.backend, d.device,
                         link_name(static_cast<rdmad_link_state>(d.link_state)), d.speed_mbps, d.gid, d.udp_port,
                         d.mtu_bytes);
      out += fmt::format("  traffic      tx {} bytes / {} packets, rx {} bytes / {} packets\n", d.tx_bytes,
                         d.tx_packets, d.rx_bytes, d.rx_packets);
      out += fmt::format("  congestion   cnp sent {}, cnp handled {}, cnp ignored {}, ecn marked {}\n", d.np_cnp_sent,
                         d.rp_cnp_handled, d.rp_cnp_ignored, d.np_ecn_marked_roce_packets);
      if (d.dcqcn_qps > 0)
        out += fmt::format("  dcqcn        {} QPs: rate min {:.0f} Mb/s, mean {:.0f} Mb/s; alpha max {:.3f}\n",
                           d.dcqcn_qps, d.dcqcn_rate_min_mbps, d.dcqcn_rate_mean_mbps, d.dcqcn_alpha_max);
      out += fmt::format("  reliability  retransmitted {}, ack timeouts {}, out of sequence {}, dropped {}\n",
                         d.retransmitted_packets, d.local_ack_timeout_err, d.out_of_sequence, d.rx_dropped);
      if (!knobs.empty()) out += fmt::format("  cc ({})  {}\n", source, knobs);
    }
    if (!d.more) break;
    ++req.cursor;
  }
  std::printf(json ? "[%s]\n" : "%s", out.c_str());
  return kExitOk;
}

int fetch_cc_show(rdmad_client* c, const std::string& nic, uint32_t cursor, CcShownNic* out) {
  rdmad::proto::CcShowRequest req{};
  rdmad::proto::copy_cstr(req.nic, nic.c_str());
  req.cursor = cursor;
  std::vector<std::byte> reply;
  if (auto st = rdmad::admin::call(c, MsgType::kCcShow, bytes_of(req), &reply); st != RDMAD_OK)
    return fail(c, "cc show", st);
  const auto head = load<rdmad::proto::CcShowReply>(reply, 0);
  if (reply.size() != sizeof(head) + size_t{head.knob_count} * sizeof(rdmad::proto::CcKnob) ||
      !rdmad::proto::is_terminated(head.nic) || !rdmad::proto::is_terminated(head.source) ||
      !rdmad::proto::is_terminated(head.backend)) {
    std::fprintf(stderr, "rdmactl: malformed reply from the daemon\n");
    return kExitDaemonError;
  }
  *out = CcShownNic{head.nic, head.backend, head.source, (head.flags & rdmad::proto::kCcSoftware) != 0,
                    head.more != 0, {}};
  for (uint32_t i = 0; i < head.knob_count; ++i) {
    auto k = load<rdmad::proto::CcKnob>(reply, sizeof(head) + i * sizeof(rdmad::proto::CcKnob));
    k.name[sizeof(k.name) - 1] = '\0';
    out->knobs.emplace_back(k.name, (k.flags & rdmad::proto::kKnobUnreadable) ? std::nullopt
                                                                                 : std::optional<int64_t>(k.value));
  }
  return kExitOk;
}

int cmd_cc_show(rdmad_client* c, const std::string& nic, bool json) {
  std::string out;
  CcShownNic shown;
  for (uint32_t cursor = 0;; ++cursor) {
    if (int rc = fetch_cc_show(c, nic, cursor, &shown); rc != kExitOk) return rc;
    const bool first = cursor == 0;
    if (json) {
      out +=
          fmt::format("{}{{\"nic\":\"{}\",\"backend\":\"{}\",\"source\":\"{}\",\"software\":{},\"knobs\":{{",
                      first ? "" : ",", json_escape(shown.nic), json_escape(shown.backend),
                      json_escape(shown.source), shown.software);
    } else {
      out += fmt::format("{}nic {} ({}): {}\n", first ? "" : "\n", shown.nic, shown.backend, shown.source);
    }
    std::string unreadable;
    bool any = false;
    for (const auto& [name, value] : shown.knobs) {
      if (!value) {
        unreadable += fmt::format("{}\"{}\"", unreadable.empty() ? "" : ",", json_escape(name));
        if (!json) out += fmt::format("  {:<32} (unreadable)\n", name);
        continue;
      }
      if (json)
        out += fmt::format("{}\"{}\":{}", any ? "," : "", json_escape(name), *value);
      else
        out += fmt::format("  {:<32} {}\n", name, *value);
      any = true;
    }
    if (json) out += fmt::format("}},\"unreadable\":[{}]}}", unreadable);
    if (!shown.more) break;
  }
  std::printf(json ? "[%s]\n" : "%s", out.c_str());
  return kExitOk;
}

std::string check_assignments(const std::vector<std::string>& assignments) {
  if (assignments.empty()) return "cc set needs at least one KNOB=VALUE, or --profile FILE";
  if (assignments.size() > rdmad::proto::kMaxCcSetKnobs)
    return fmt::format("at most {} knobs at once", rdmad::proto::kMaxCcSetKnobs);
  for (const auto& a : assignments) {
    const size_t eq = a.find('=');
    if (eq == 0 || eq == std::string::npos) return "'" + a + "' is not KNOB=VALUE";
    if (eq >= rdmad::proto::kMaxKnobNameBytes) return "'" + a.substr(0, eq) + "' is too long for a knob name";
    int64_t v = 0;
    const char* end = a.data() + a.size();
    auto [p, ec] = std::from_chars(a.data() + eq + 1, end, v);
    if (ec != std::errc() || p != end || eq + 1 == a.size())
      return "'" + a + "': the value must be an integer";
  }
  return {};
}

int cmd_cc_set(rdmad_client* c, const std::string& nic, const std::vector<std::string>& assignments,
               bool json) {
  rdmad::proto::CcSetRequest req{};
  rdmad::proto::copy_cstr(req.nic, nic.c_str());
  req.count = static_cast<uint32_t>(assignments.size());
  for (size_t i = 0; i < assignments.size(); ++i) {
    const auto& a = assignments[i];
    const size_t eq = a.find('=');
    rdmad::proto::copy_cstr(req.knobs[i].name, a.substr(0, eq).c_str());
    std::from_chars(a.data() + eq + 1, a.data() + a.size(), req.knobs[i].value);
  }
  std::vector<std::byte> reply;
  if (auto st = rdmad::admin::call(c, MsgType::kCcSet, bytes_of(req), &reply); st != RDMAD_OK)
    return fail(c, "cc set", st);
  const auto r = load<rdmad::proto::CcSetReply>(reply, 0);
  if (json)
    std::printf("{\"nics\":%u,\"knobs\":%u}\n", r.nics, req.count);
  else
    std::printf("set %u knob(s) on %u NIC(s)\n", req.count, r.nics);
  return kExitOk;
}

int cmd_reload(rdmad_client* c, bool json) {
  std::vector<std::byte> reply;
  if (auto st = rdmad::admin::call(c, MsgType::kReload, {}, &reply); st != RDMAD_OK)
    return fail(c, "reload", st);
  std::printf(json ? "{\"reloaded\":true}\n" : "configuration reloaded\n");
  return kExitOk;
}

int cmd_debug_stall(rdmad_client* c, const std::string& thread, uint32_t seconds, bool json) {
  rdmad::proto::TestStallRequest req{};
  rdmad::proto::copy_cstr(req.thread, thread.c_str());
  req.seconds = seconds;
  std::vector<std::byte> reply;
  if (auto st = rdmad::admin::call(c, MsgType::kTestStall, bytes_of(req), &reply); st != RDMAD_OK)
    return fail(c, "debug stall", st);
  if (json)
    std::printf("{\"stalled\":\"%s\",\"seconds\":%u}\n", thread.c_str(), seconds);
  else
    std::printf("stalling %s for %u s\n", thread.c_str(), seconds);
  return kExitOk;
}

}  // namespace rdmactl
