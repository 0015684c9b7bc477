// The field table. To add a configuration key: add a Field here (and a member in config.h);
// parsing, the default config and docs/configuration.md follow from it.
#include <fmt/format.h>

#include <vector>

#include "rdmad/cc/dcqcn_params.h"
#include "rdmad/config/field.h"
#include "validators.h"

namespace rdmad::config {
namespace {

namespace v = validators;

template <typename T>
const T& as(const Value& value) {
  return std::get<T>(value);
}

std::vector<Section> make_sections() {
  return {
      {"daemon", "Process-wide settings of the daemon.", false},
      {"metrics", "The Prometheus /metrics endpoint.", false},
      {"cc", "DCQCN congestion control: a named profile plus per-knob overrides under the mlx5 knob names.",
       false},
      {"ipc", "The Unix socket that local applications use through librdmad: who may connect, and per-uid quotas.",
       false},
      {"quota", "A per-uid quota that overrides the [ipc] defaults for one user.", true},
      {"nic", "One table per NIC the daemon drives. With no [[nic]] table, the daemon discovers rdma-core "
              "devices.",
       true},
  };
}

std::vector<Field> make_fields() {
  std::vector<Field> f;
  // [daemon]
  f.push_back({"daemon", "runtime_dir", FieldType::kString, std::string("/run/rdmad"),
               "Directory for the daemon's runtime files (socket, state).", "an absolute path", false,
               v::absolute_path(), [](Config& c, size_t, const Value& x) { c.daemon.runtime_dir = as<std::string>(x); }});
  f.push_back({"daemon", "socket_path", FieldType::kString, std::string("/run/rdmad/rdmad.sock"),
               "Unix socket that local applications connect to through librdmad.", "an absolute path", false,
               v::absolute_path(), [](Config& c, size_t, const Value& x) { c.daemon.socket_path = as<std::string>(x); }});
  f.push_back({"daemon", "log_level", FieldType::kString, std::string("info"),
               "Log level (the RDMAD_LOG_LEVEL environment variable overrides it); changes apply on reload.",
               "one of trace, debug, info, warn, error, critical, off", false,
               v::one_of({"trace", "debug", "info", "warn", "error", "critical", "off"}),
               [](Config& c, size_t, const Value& x) { c.daemon.log_level = as<std::string>(x); }});
  f.push_back({"daemon", "sysfs_root", FieldType::kString, std::string("/"),
               "Directory that stands in for / when reading /sys and /sys/kernel/debug (a container that mounts "
               "the host's sysfs elsewhere sets it).",
               "an absolute path", false, v::absolute_path(),
               [](Config& c, size_t, const Value& x) { c.daemon.sysfs_root = as<std::string>(x); }});
  f.push_back({"daemon", "nic_poll_interval_ms", FieldType::kInt, int64_t{10000},
               "How often hardware NIC counters are sampled and congestion-control health is checked.",
               "an integer in [100, 3600000]", false, v::int_range(100, 3600000),
               [](Config& c, size_t, const Value& x) { c.daemon.nic_poll_interval_ms = as<int64_t>(x); }});
  // [metrics]
  f.push_back({"metrics", "listen", FieldType::kString, std::string("127.0.0.1:9842"),
               "Address and port of the HTTP endpoint serving /metrics.", "an IP address and port", false,
               v::listen_address(), [](Config& c, size_t, const Value& x) { c.metrics.listen = as<std::string>(x); }});
  f.push_back({"metrics", "labels", FieldType::kStringMap, StringMap{},
               "Constant labels of the rdmad_node_info series (e.g. { cluster = \"a\", rack = \"r7\" }); "
               "changes apply on reload.",
               "a table of Prometheus label names to strings", false, v::label_map(),
               [](Config& c, size_t, const Value& x) { c.metrics.labels = as<StringMap>(x); }});
  // [cc]
  f.push_back({"cc", "profile", FieldType::kString, std::string("mlx5"),
               "DCQCN parameter profile: mlx5 (ConnectX firmware defaults) or paper (SIGCOMM'15).",
               "one of mlx5, paper", false, v::one_of({"mlx5", "paper"}),
               [](Config& c, size_t, const Value& x) { c.cc.profile = as<std::string>(x); }});
  for (const cc::Mlx5Knob& k : cc::mlx5_knobs()) {
    const std::string name(k.name);
    f.push_back({"cc", name, FieldType::kInt, std::monostate{},
                 fmt::format("{} [unit: {}; default: from the profile].", k.doc, k.unit),
                 fmt::format("an integer in [{}, {}]", k.min, k.max), false, v::int_range(k.min, k.max),
                 [name](Config& c, size_t, const Value& x) { c.cc.overrides[name] = as<int64_t>(x); }});
  }
  // [ipc]
  f.push_back({"ipc", "socket_mode", FieldType::kString, std::string("0660"),
               "Permissions of the client socket, in octal.", "an octal mode such as 0660", false, v::octal_mode(),
               [](Config& c, size_t, const Value& x) { c.ipc.socket_mode = as<std::string>(x); }});
  f.push_back({"ipc", "socket_group", FieldType::kString, std::string(""),
               "Group that owns the client socket (its members may connect); empty keeps the daemon's group.",
               "a group name", false, v::identifier(true),
               [](Config& c, size_t, const Value& x) { c.ipc.socket_group = as<std::string>(x); }});
  f.push_back({"ipc", "allowed_uids", FieldType::kIntList, IntList{},
               "User ids allowed to use the service besides root; with allowed_gids also empty, anyone who can open "
               "the socket may.",
               "an array of uids", false, v::id_list(),
               [](Config& c, size_t, const Value& x) { c.ipc.allowed_uids = as<IntList>(x); }});
  f.push_back({"ipc", "allowed_gids", FieldType::kIntList, IntList{},
               "Group ids (primary or supplementary) allowed to use the service.", "an array of gids", false,
               v::id_list(), [](Config& c, size_t, const Value& x) { c.ipc.allowed_gids = as<IntList>(x); }});
  f.push_back({"ipc", "max_clients", FieldType::kInt, int64_t{16384}, "Most client connections served at once.",
               "an integer in [1, 1000000]", false, v::int_range(1, 1000000),
               [](Config& c, size_t, const Value& x) { c.ipc.max_clients = as<int64_t>(x); }});
  f.push_back({"ipc", "quota_pinned_bytes", FieldType::kInt, int64_t{17179869184},
               "Bytes of memory one uid may have registered (pinned) at once, unless a [[quota]] says otherwise.",
               "an integer in [0, 2^62]", false, v::int_range(0, int64_t{1} << 62),
               [](Config& c, size_t, const Value& x) { c.ipc.quota_pinned_bytes = as<int64_t>(x); }});
  f.push_back({"ipc", "quota_registrations", FieldType::kInt, int64_t{4096},
               "Registrations one uid may hold at once, unless a [[quota]] says otherwise.",
               "an integer in [0, 4294967295]", false, v::int_range(0, 4294967295LL),
               [](Config& c, size_t, const Value& x) { c.ipc.quota_registrations = as<int64_t>(x); }});
  // [[quota]]
  auto quota = [](Config& c, size_t i) -> QuotaSection& {
    if (c.quotas.size() <= i) c.quotas.resize(i + 1);
    return c.quotas[i];
  };
  f.push_back({"quota", "uid", FieldType::kInt, std::monostate{}, "The user id this quota applies to.",
               "an integer in [0, 4294967294]", true, v::int_range(0, 4294967294LL),
               [quota](Config& c, size_t i, const Value& x) { quota(c, i).uid = as<int64_t>(x); }});
  f.push_back({"quota", "pinned_bytes", FieldType::kInt, int64_t{17179869184},
               "Bytes this uid may have registered at once.", "an integer in [0, 2^62]", false,
               v::int_range(0, int64_t{1} << 62),
               [quota](Config& c, size_t i, const Value& x) { quota(c, i).pinned_bytes = as<int64_t>(x); }});
  f.push_back({"quota", "registrations", FieldType::kInt, int64_t{4096}, "Registrations this uid may hold at once.",
               "an integer in [0, 4294967295]", false, v::int_range(0, 4294967295LL),
               [quota](Config& c, size_t i, const Value& x) { quota(c, i).registrations = as<int64_t>(x); }});
  // [[nic]]
  auto nic = [](Config& c, size_t i) -> NicSection& {
    if (c.nics.size() <= i) c.nics.resize(i + 1);
    return c.nics[i];
  };
  f.push_back({"nic", "name", FieldType::kString, std::monostate{},
               "Name of the NIC in logs, metrics (label nic) and the client API.", "a name", true,
               v::identifier(false), [nic](Config& c, size_t i, const Value& x) { nic(c, i).name = as<std::string>(x); }});
  f.push_back({"nic", "backend", FieldType::kString, std::string("rdma_core"),
               "Transport backend: soft (RoCEv2 over UDP in software), rdma_core (a verbs NIC) or dpdk.",
               "one of soft, rdma_core, dpdk", false, v::one_of({"soft", "rdma_core", "dpdk"}),
               [nic](Config& c, size_t i, const Value& x) { nic(c, i).backend = as<std::string>(x); }});
  f.push_back({"nic", "address", FieldType::kString, std::string(""),
               "IP address of the NIC (required for soft and dpdk; selects the RoCEv2 GID for rdma_core).",
               "an IPv4 or IPv6 address", false, v::ip_address(true),
               [nic](Config& c, size_t i, const Value& x) { nic(c, i).address = as<std::string>(x); }});
  f.push_back({"nic", "device", FieldType::kString, std::string(""),
               "rdma-core device name, as in /sys/class/infiniband (required for rdma_core).", "a device name",
               false, v::identifier(true),
               [nic](Config& c, size_t i, const Value& x) { nic(c, i).device = as<std::string>(x); }});
  f.push_back({"nic", "port", FieldType::kInt, int64_t{1}, "Port number of the rdma-core device (1-based).",
               "an integer in [1, 255]", false, v::int_range(1, 255),
               [nic](Config& c, size_t i, const Value& x) { nic(c, i).port = as<int64_t>(x); }});
  f.push_back({"nic", "udp_port", FieldType::kInt, int64_t{4791},
               "UDP port of the soft backend's RoCEv2 endpoint (4791 is the IANA RoCEv2 port; 0 picks a free one).",
               "an integer in [0, 65535]", false, v::int_range(0, 65535),
               [nic](Config& c, size_t i, const Value& x) { nic(c, i).udp_port = as<int64_t>(x); }});
  f.push_back({"nic", "gid_index", FieldType::kInt, int64_t{-1},
               "rdma_core: fixed GID index; -1 selects a RoCEv2 GID bound to the port's netdev automatically "
               "(re-selected when addresses change).",
               "an integer in [-1, 255]", false, v::int_range(-1, 255),
               [nic](Config& c, size_t i, const Value& x) { nic(c, i).gid_index = as<int64_t>(x); }});
  f.push_back({"nic", "gid_match", FieldType::kString, std::string(""),
               "rdma_core: CIDR the automatically selected GID's address must lie in (e.g. 10.1.0.0/16); empty "
               "accepts any.",
               "a CIDR such as 10.1.0.0/16 or fd00::/8", false, v::cidr(true),
               [nic](Config& c, size_t i, const Value& x) { nic(c, i).gid_match = as<std::string>(x); }});
  f.push_back({"nic", "cc_apply", FieldType::kBool, false,
               "rdma_core: write the [cc] parameters to the NIC's DCQCN at start-up and report any value it did not "
               "take; false only reads and reports them.",
               "true or false", false, nullptr,
               [nic](Config& c, size_t i, const Value& x) { nic(c, i).cc_apply = as<bool>(x); }});
  f.push_back({"nic", "roce_priority", FieldType::kInt, int64_t{3},
               "802.1p priority that carries RoCE traffic; congestion control disabled on it is reported as a "
               "misconfiguration.",
               "an integer in [0, 7]", false, v::int_range(0, 7),
               [nic](Config& c, size_t i, const Value& x) { nic(c, i).roce_priority = as<int64_t>(x); }});
  return f;
}

}  // namespace

std::span<const Section> sections() {
  static const std::vector<Section> s = make_sections();
  return s;
}

std::span<const Field> fields() {
  static const std::vector<Field> f = make_fields();
  return f;
}

const char* type_name(FieldType t) {
  switch (t) {
    case FieldType::kString: return "string";
    case FieldType::kInt: return "integer";
    case FieldType::kBool: return "boolean";
    case FieldType::kStringMap: return "table of strings";
    case FieldType::kIntList: return "array of integers";
  }
  return "?";
}

std::string to_toml(const Value& v) {
  struct Visitor {
    std::string operator()(std::monostate) const { return ""; }
    std::string operator()(const std::string& s) const {
      std::string out = "\"";
      for (char c : s) {
        if (c == '"' || c == '\\') out += '\\';
        out += c;
      }
      return out + "\"";
    }
    std::string operator()(int64_t i) const { return std::to_string(i); }
    std::string operator()(bool b) const { return b ? "true" : "false"; }
    std::string operator()(const IntList& l) const { return fmt::format("[{}]", fmt::join(l, ", ")); }
    std::string operator()(const StringMap& m) const {
      if (m.empty()) return "{}";
      std::vector<std::string> parts;
      for (const auto& [k, val] : m) parts.push_back(k + " = " + (*this)(val));
      return fmt::format("{{ {} }}", fmt::join(parts, ", "));
    }
  };
  return std::visit(Visitor{}, v);
}

}  // namespace rdmad::config
