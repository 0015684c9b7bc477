#include "rdmad/daemon/admin_service.h"

#include <fmt/format.h>

#include "rdmad/base/log.h"
#include "rdmad/base/log_fields.h"
#include "rdmad/nic_cc/cc_port_status.h"

namespace rdmad::daemon {
namespace {

proto::CcKnob knob_entry(const cc::Mlx5Knob& k, std::optional<int64_t> value) {
  proto::CcKnob e{};
  proto::copy_cstr(e.name, std::string(k.name).c_str());
  e.value = value.value_or(0);
  e.flags = value ? 0 : proto::kKnobUnreadable;
  return e;
}

}  // namespace

AdminService::AdminService(const config::Config& config, NodeNics& nics, flow::FlowService* flows,
                           std::function<clients::Result<clients::Ok>()> reload, DaemonFacts facts,
                           const ReloadRecord& reloads)
    : config_(config),
      nics_(nics),
      flows_(flows),
      reload_(std::move(reload)),
      facts_(std::move(facts)),
      reloads_(reloads) {}

std::vector<proto::FlowEntry> AdminService::list_flows(uint64_t after, uint32_t max_entries, bool* more) {
  *more = false;
  return flows_ != nullptr ? flows_->list_flows(after, max_entries, more) : std::vector<proto::FlowEntry>{};
}

clients::Result<clients::Ok> AdminService::reload() { return reload_(); }

clients::Result<clients::Ok> AdminService::test_stall(const std::string& thread, uint32_t seconds) {
  if (!stall_hook_) return clients::AdminHandler::test_stall(thread, seconds);
  return stall_hook_(thread, seconds);
}

AdminService::CcTarget AdminService::resolve(const config::NicSection& nic) const {
  CcTarget t;
  t.nic = &nic;
  if (const Nic* n = nics_.slots().find(nic.name); n != nullptr && n->in_service() && n->device->dcqcn_params()) {
    t.soft = n->device.get();
    return t;
  }
  // Only NICs whose ports the kernel has keep DCQCN in firmware, managed through sysfs.
  const verbs::BackendInfo* b = nics_.slots().backends().find(nic.backend);
  if (b == nullptr || !b->caps.sysfs_ports) {
    t.unavailable = fmt::format("backend {} runs no DCQCN of its own", nic.backend);
    return t;
  }
  if (const verbs::HostNic* p = nics_.host_port(nic.device, static_cast<unsigned>(nic.port)); p != nullptr) {
    auto status = nic_cc::inspect_cc(nic_cc::SysfsRoot(config_.daemon.sysfs_root), p->netdev, p->pci);
    if (status.location)
      t.hardware = status.location;
    else
      t.unavailable = status.summary();
    return t;
  }
  t.unavailable = fmt::format("device {} port {} not found", nic.device, nic.port);
  return t;
}

clients::Result<clients::CcShown> AdminService::cc_show(const proto::CcShowRequest& req) {
  const auto& all = config_.nics;
  size_t index = req.cursor;
  if (req.nic[0] != '\0') {
    index = all.size();
    for (size_t i = 0; i < all.size(); ++i)
      if (all[i].name == req.nic) index = i;
    if (index == all.size())
      return clients::Error{RDMAD_ERR_NOT_FOUND, fmt::format("no [[nic]] named {}", req.nic)};
  } else if (index >= all.size()) {
    return clients::Error{RDMAD_ERR_NOT_FOUND, all.empty() ? "no NICs configured" : "cursor past the last NIC"};
  }
  const CcTarget t = resolve(all[index]);
  clients::CcShown out;
  proto::copy_cstr(out.head.nic, t.nic->name.c_str());
  proto::copy_cstr(out.head.backend, t.nic->backend.c_str());
  out.head.more = req.nic[0] == '\0' && index + 1 < all.size() ? 1 : 0;
  if (t.soft != nullptr) {
    const cc::DcqcnParams p = *t.soft->dcqcn_params();
    out.head.flags = proto::kCcSoftware;
    proto::copy_cstr(out.head.source, "soft datapath (live)");
    for (const auto& k : cc::mlx5_knobs()) out.knobs.push_back(knob_entry(k, k.get(p)));
  } else if (t.hardware) {
    proto::copy_cstr(out.head.source, t.hardware->describe().c_str());
    const auto readout = nic_cc::read_cc_params(nic_cc::SysfsRoot(config_.daemon.sysfs_root), *t.hardware);
    for (const auto& r : readout.knobs) out.knobs.push_back(knob_entry(*r.knob, r.value));
  } else {
    proto::copy_cstr(out.head.source, ("unavailable: " + t.unavailable).c_str());
  }
  return out;
}

clients::Result<clients::Ok> AdminService::apply(const CcTarget& t, const proto::CcSetRequest& req) {
  auto log = log::get(log::Component::kCc);
  if (t.soft != nullptr) {
    cc::DcqcnParams p = *t.soft->dcqcn_params();
    for (uint32_t i = 0; i < req.count; ++i)
      cc::find_mlx5_knob(req.knobs[i].name)->set(p, req.knobs[i].value);
    if (auto st = t.soft->set_dcqcn_params(p); !st.ok())
      return clients::Error{RDMAD_ERR_SYSTEM, fmt::format("nic {}: {}", t.nic->name, st.message())};
    log->info("dcqcn set live nic={} params={}", t.nic->name, base::q(cc::describe(p)));
    return clients::Ok{};
  }
  const nic_cc::SysfsRoot root(config_.daemon.sysfs_root);
  cc::DcqcnParams desired = nic_cc::read_cc_params(root, *t.hardware).params;
  std::vector<std::string> only;
  for (uint32_t i = 0; i < req.count; ++i) {
    const cc::Mlx5Knob* k = cc::find_mlx5_knob(req.knobs[i].name);
    k->set(desired, req.knobs[i].value);
    only.emplace_back(k->name);
  }
  const auto report = nic_cc::apply_cc_params(root, *t.hardware, desired, only);
  nics_.hardware().note_cc_params(t.nic->device, static_cast<unsigned>(t.nic->port), report.effective);
  for (const auto* c : report.applied()) log->info("cc knob set nic={} change={}", t.nic->name, base::q(c->text()));
  std::string problems;
  for (const auto* c : report.problems()) problems += (problems.empty() ? "" : "; ") + c->text();
  if (!problems.empty()) {
    log->warn("cc set failed nic={} problems={}", t.nic->name, base::q(problems));
    return clients::Error{RDMAD_ERR_SYSTEM, fmt::format("nic {}: {}", t.nic->name, problems)};
  }
  return clients::Ok{};
}

clients::Result<proto::CcSetReply> AdminService::cc_set(const proto::CcSetRequest& req) {
  // Everything is checked before anything is written: a typo changes nothing anywhere.
  for (uint32_t i = 0; i < req.count; ++i) {
    const proto::CcKnob& k = req.knobs[i];
    const cc::Mlx5Knob* knob = cc::find_mlx5_knob(k.name);
    if (knob == nullptr)
      return clients::Error{RDMAD_ERR_INVALID_ARGUMENT,
                        fmt::format("unknown knob {} (cc show lists them)", k.name)};
    if (k.value < knob->min || k.value > knob->max)
      return clients::Error{RDMAD_ERR_INVALID_ARGUMENT,
                        fmt::format("knob {}: {} is outside {}..{} ({})", knob->name, k.value, knob->min,
                                    knob->max, knob->unit)};
  }
  std::vector<CcTarget> targets;
  for (const auto& n : config_.nics)
    if (req.nic[0] == '\0' || n.name == req.nic) targets.push_back(resolve(n));
  if (targets.empty())
    return clients::Error{RDMAD_ERR_NOT_FOUND, req.nic[0] ? fmt::format("no [[nic]] named {}", req.nic)
                                                      : std::string("no NICs configured")};
  for (const auto& t : targets)
    if (t.soft == nullptr && !t.hardware)
      return clients::Error{RDMAD_ERR_NOT_SUPPORTED, fmt::format("nic {}: {}", t.nic->name, t.unavailable)};
  proto::CcSetReply reply{};
  for (const auto& t : targets) {
    auto r = apply(t, req);
    if (!r.ok()) return r.error();
    ++reply.nics;
  }
  return reply;
}

clients::Result<proto::NicDetailsReply> AdminService::nic_details(const proto::NicDetailsRequest& req) {
  const auto& all = nics_.slots().nics();
  size_t index = req.cursor;
  if (req.nic[0] != '\0') {
    const Nic* named = nics_.slots().find(req.nic);
    index = named != nullptr ? static_cast<size_t>(named - all.data()) : all.size();
    if (index == all.size())
      return clients::Error{RDMAD_ERR_NOT_FOUND, fmt::format("no [[nic]] named {}", req.nic)};
  } else if (index >= all.size()) {
    return clients::Error{RDMAD_ERR_NOT_FOUND, all.empty() ? "no NICs opened" : "cursor past the last NIC"};
  }
  const Nic& n = all[index];
  proto::NicDetailsReply r{};
  proto::copy_cstr(r.nic, n.config.name.c_str());
  proto::copy_cstr(r.backend, n.config.backend.c_str());
  r.more = req.nic[0] == '\0' && index + 1 < all.size() ? 1 : 0;
  if (!n.in_service()) {
    // Out of service: the device it is configured with, link down, no counters (diagnose says why).
    proto::copy_cstr(r.device, n.config.device.c_str());
    r.link_state = RDMAD_LINK_DOWN;
    return r;
  }
  proto::copy_cstr(r.device, n.device->info().name.c_str());
  if (auto p = n.device->query_port(n.port()); p.ok()) {
    r.link_state = p.value().state == verbs::PortState::kActive ? RDMAD_LINK_UP : RDMAD_LINK_DOWN;
    r.speed_mbps = p.value().speed_mbps;
    r.mtu_bytes = p.value().active_mtu_bytes;
    r.udp_port = p.value().udp_port;
    proto::copy_cstr(r.gid, p.value().gid.to_ip_string().c_str());
  }
  const verbs::NicCounters c = n.device->counters();
  r.tx_bytes = c.tx_bytes;
  r.rx_bytes = c.rx_bytes;
  r.tx_packets = c.tx_packets;
  r.rx_packets = c.rx_packets;
  r.np_cnp_sent = c.np_cnp_sent;
  r.np_ecn_marked_roce_packets = c.np_ecn_marked_roce_packets;
  r.rp_cnp_handled = c.rp_cnp_handled;
  r.rp_cnp_ignored = c.rp_cnp_ignored;
  r.retransmitted_packets = c.retransmitted_packets;
  r.local_ack_timeout_err = c.local_ack_timeout_err;
  r.out_of_sequence = c.out_of_sequence;
  r.rx_dropped = c.rx_dropped;
  const auto samples = n.device->dcqcn_samples();
  r.dcqcn_qps = static_cast<uint32_t>(samples.size());
  if (!samples.empty()) {
    r.dcqcn_rate_min_mbps = samples.front().rate_mbps;
    double sum = 0;
    for (const auto& s : samples) {
      r.dcqcn_rate_min_mbps = std::min(r.dcqcn_rate_min_mbps, s.rate_mbps);
      r.dcqcn_alpha_max = std::max(r.dcqcn_alpha_max, s.alpha);
      sum += s.rate_mbps;
    }
    r.dcqcn_rate_mean_mbps = sum / static_cast<double>(samples.size());
  }
  return r;
}

}  // namespace rdmad::daemon
