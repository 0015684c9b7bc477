#include "rdmad/nic_cc/port_counters.h"

#include <fmt/format.h>

namespace rdmad::nic_cc {

namespace {

std::optional<uint64_t> lookup(const std::map<std::string, uint64_t, std::less<>>& m, std::string_view name) {
  const auto it = m.find(name);
  if (it == m.end()) return std::nullopt;
  return it->second;
}

// Reads every numeric file of a directory into `out`, skipping `skip`.
SysfsResult<bool> read_dir(const SysfsRoot& root, const std::string& dir, std::string_view skip,
                           std::map<std::string, uint64_t, std::less<>>& out) {
  if (!root.exists(dir)) return SysfsError{dir, ENOENT, {}};
  for (const auto& name : root.list(dir)) {
    if (name == skip) continue;
    if (auto v = root.read_u64(dir + "/" + name)) out.emplace(name, *v);
  }
  return true;
}

}  // namespace

std::optional<uint64_t> PortCounters::get(std::string_view name) const { return lookup(raw, name); }
std::optional<uint64_t> HwCounters::get(std::string_view name) const { return lookup(values, name); }

DcqcnCounters dcqcn_counters(const HwCounters& hw) {
  return {hw.get("np_ecn_marked_roce_packets"),
          hw.get("np_cnp_sent"),
          hw.get("rp_cnp_handled"),
          hw.get("rp_cnp_ignored"),
          hw.get("out_of_sequence"),
          hw.get("packet_seq_err"),
          hw.get("local_ack_timeout_err")};
}

std::string port_dir(std::string_view device, unsigned port) {
  return fmt::format("/sys/class/infiniband/{}/ports/{}", device, port);
}

SysfsResult<PortCounters> read_port_counters(const SysfsRoot& root, std::string_view device, unsigned port) {
  PortCounters c;
  if (auto r = read_dir(root, port_dir(device, port) + "/counters", {}, c.raw); !r) return r.error();
  constexpr uint64_t kBytesPerWord = 4;
  c.xmit_bytes = c.get("port_xmit_data").value_or(0) * kBytesPerWord;
  c.rcv_bytes = c.get("port_rcv_data").value_or(0) * kBytesPerWord;
  c.xmit_packets = c.get("port_xmit_packets").value_or(0);
  c.rcv_packets = c.get("port_rcv_packets").value_or(0);
  return c;
}

SysfsResult<HwCounters> read_hw_counters(const SysfsRoot& root, std::string_view device, unsigned port) {
  HwCounters c;
  if (auto r = read_dir(root, port_dir(device, port) + "/hw_counters", "lifespan", c.values); !r)
    return r.error();
  return c;
}

}  // namespace rdmad::nic_cc
