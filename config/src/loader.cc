#include "rdmad/config/loader.h"

#include "careful_read.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <initializer_list>
#include <map>
#include <optional>
#include <set>
#include <tuple>

#include <fmt/format.h>
#include <toml++/toml.h>

#include "rdmad/base/log.h"
#include "rdmad/base/log_fields.h"
#include "rdmad/cc/dcqcn_profile.h"
#include "rdmad/config/field.h"
#include "rdmad/verbs/builtin_backends.h"
#include "peer_rules.h"
#include "validators.h"

namespace rdmad::config {

std::string CcSection::source() const {
  if (profile_file.empty()) return profile;
  return fmt::format("file {} ({}base {})", profile_file, profile_file_name.empty() ? "" : profile_file_name + ", ",
                     profile);
}

std::string Error::to_string() const {
  std::string where = file;
  if (line > 0) where += fmt::format(":{}:{}", line, column);
  if (key.empty()) return fmt::format("{}: {}", where, message);
  return fmt::format("{}: {}: {}", where, key, message);
}

namespace {

const Section* find_section(std::string_view name) {
  for (const auto& s : sections())
    if (s.name == name) return &s;
  return nullptr;
}

const Field* find_field(std::string_view section, std::string_view name) {
  for (const auto& f : fields())
    if (f.section == section && f.name == name) return &f;
  return nullptr;
}

const char* node_type_name(const toml::node& n) {
  switch (n.type()) {
    case toml::node_type::string: return "a string";
    case toml::node_type::integer: return "an integer";
    case toml::node_type::floating_point: return "a float";
    case toml::node_type::boolean: return "a boolean";
    case toml::node_type::table: return "a table";
    case toml::node_type::array: return "an array";
    case toml::node_type::date: return "a date";
    case toml::node_type::time: return "a time";
    case toml::node_type::date_time: return "a date-time";
    default: return "nothing";
  }
}

class Parser {
 public:
  Parser(std::string file, LoadResult& out, LoadOptions options)
      : file_(std::move(file)), out_(out), options_(options) {}

  void error(const toml::source_region& where, std::string key, std::string message) {
    out_.errors.push_back(Error{file_, where.begin.line, where.begin.column, std::move(key), std::move(message)});
  }
  void warning(const toml::source_region& where, std::string key, std::string message) {
    out_.warnings.push_back(Error{file_, where.begin.line, where.begin.column, std::move(key), std::move(message)});
  }

  // Converts a TOML node to a field value; returns monostate (and records an error) on a type mismatch.
  Value convert(const Field& f, const toml::node& n, const std::string& key) {
    switch (f.type) {
      case FieldType::kString:
        if (auto s = n.value<std::string>(); s && n.is_string()) return *s;
        break;
      case FieldType::kInt:
        if (n.is_integer()) return *n.value<int64_t>();
        break;
      case FieldType::kBool:
        if (n.is_boolean()) return *n.value<bool>();
        break;
      case FieldType::kDouble:
        if (n.is_floating_point()) return *n.value<double>();
        if (n.is_integer()) return static_cast<double>(*n.value<int64_t>());
        break;
      case FieldType::kIntList:
        if (const toml::array* a = n.as_array()) {
          IntList list;
          for (const toml::node& item : *a) {
            if (!item.is_integer()) {
              error(item.source(), key, fmt::format("expected an array of integers, got {} in it", node_type_name(item)));
              return std::monostate{};
            }
            list.push_back(*item.value<int64_t>());
          }
          return list;
        }
        break;
      case FieldType::kStringMap:
        if (const toml::table* t = n.as_table()) {
          StringMap m;
          bool ok = true;
          for (auto&& [k, item] : *t) {
            if (!item.is_string()) {
              error(item.source(), key + "." + std::string(k.str()),
                    fmt::format("expected a string, got {}", node_type_name(item)));
              ok = false;
              continue;
            }
            m[std::string(k.str())] = *item.value<std::string>();
          }
          if (!ok) return std::monostate{};
          return m;
        }
        break;
    }
    error(n.source(), key, fmt::format("expected {} ({}), got {}", type_name(f.type), f.expected, node_type_name(n)));
    return std::monostate{};
  }

  void parse_table(const Section& section, const toml::table& table, size_t index, const std::string& prefix) {
    regions_[prefix] = table.source();
    std::set<std::string> seen;
    for (auto&& [k, node] : table) {
      const std::string name(k.str());
      const std::string key = prefix + "." + name;
      const Field* f = find_field(section.name, name);
      if (f == nullptr) {
        std::vector<std::string> known;
        for (const auto& fld : fields())
          if (fld.section == section.name) known.push_back(fld.name);
        error(k.source(), key,
              fmt::format("unknown key in [{}]; known keys: {}", section.name, fmt::join(known, ", ")));
        continue;
      }
      seen.insert(name);
      regions_[key] = node.source();
      Value v = convert(*f, node, key);
      if (std::holds_alternative<std::monostate>(v)) continue;
      if (f->validate) {
        if (std::string expected = f->validate(v); !expected.empty()) {
          error(node.source(), key, fmt::format("invalid value {}: expected {}", to_toml(v), expected));
          continue;
        }
      }
      f->apply(out_.config, index, v);
    }
    for (const auto& f : fields()) {
      if (f.section == section.name && f.required && !seen.count(f.name)) {
        error(table.source(), prefix + "." + f.name, fmt::format("missing required key ({})", f.expected));
      }
    }
  }

  void parse_root(const toml::table& root) {
    for (auto&& [k, node] : root) {
      const std::string name(k.str());
      const Section* s = find_section(name);
      if (s == nullptr) {
        std::vector<std::string> known;
        for (const auto& sec : sections()) known.push_back(sec.is_array ? "[[" + sec.name + "]]" : "[" + sec.name + "]");
        error(k.source(), name, fmt::format("unknown section; known sections: {}", fmt::join(known, ", ")));
        continue;
      }
      if (s->is_array) {
        const toml::array* arr = node.as_array();
        if (arr == nullptr || !arr->is_array_of_tables()) {
          error(node.source(), name, fmt::format("expected an array of tables ([[{}]]), got {}", name, node_type_name(node)));
          continue;
        }
        for (size_t i = 0; i < arr->size(); ++i) {
          apply_defaults(*s, i);
          parse_table(*s, *arr->get(i)->as_table(), i, fmt::format("{}[{}]", name, i));
          array_tables_[name].push_back(arr->get(i)->source());
        }
      } else {
        const toml::table* t = node.as_table();
        if (t == nullptr) {
          error(node.source(), name, fmt::format("expected a table ([{}]), got {}", name, node_type_name(node)));
          continue;
        }
        parse_table(*s, *t, 0, name);
      }
    }
  }

  void apply_defaults(const Section& section, size_t index) {
    for (const auto& f : fields()) {
      if (f.section == section.name && !std::holds_alternative<std::monostate>(f.default_value)) {
        f.apply(out_.config, index, f.default_value);
      }
    }
  }

  // Rules that involve more than one key.
  void check_nics() {
    std::set<std::string> names;
    const auto& tables = array_tables_["nic"];
    for (size_t i = 0; i < out_.config.nics.size() && i < tables.size(); ++i) {
      const NicSection& n = out_.config.nics[i];
      const auto& where = tables[i];
      const std::string key = fmt::format("nic[{}]", i);
      if (!n.name.empty() && !names.insert(n.name).second) {
        error(where, key + ".name", fmt::format("duplicate NIC name '{}'", n.name));
      }
      // What each rule rests on is what the NIC's backend says of itself, never its name.
      const verbs::BackendDescription* backend = verbs::find_builtin_backend(n.backend);
      const verbs::Capabilities caps = backend != nullptr ? backend->caps : verbs::Capabilities{};
      if (caps.needs_address && n.address.empty()) {
        error(where, key + ".address", fmt::format("backend {} needs an address (an IPv4 or IPv6 address)", n.backend));
      }
      if (n.gid_index >= 0 && !n.gid_match.empty()) {
        error(where, key + ".gid_match", "set gid_index or gid_match, not both (a fixed index ignores the match)");
      }
      if (caps.address_selects_gid && !n.address.empty() && n.gid_index >= 0) {
        error(where, key + ".address",
              "set address or gid_index, not both (the address selects the GID; a fixed index ignores it)");
      }
      if (caps.address_selects_gid && !n.address.empty() && !n.gid_match.empty() &&
          !validators::address_in_cidr(n.address, n.gid_match)) {
        error(where, key + ".address",
              fmt::format("address {} is not inside gid_match {}: no GID could be selected", n.address, n.gid_match));
      }
      if (caps.opens_named_device && n.device.empty()) {
        error(where, key + ".device",
              fmt::format("backend {} needs a device (an rdma-core device name such as mlx5_0)", n.backend));
      }
    }
  }

  void check_quotas() {
    std::set<int64_t> uids;
    std::set<std::string> pods;
    const auto& tables = array_tables_["quota"];
    for (size_t i = 0; i < out_.config.quotas.size() && i < tables.size(); ++i) {
      const int64_t uid = out_.config.quotas[i].uid;
      const std::string& pod = out_.config.quotas[i].pod_uid;
      if ((uid >= 0) == !pod.empty()) {
        error(tables[i], fmt::format("quota[{}].uid", i),
              "a [[quota]] names its tenant with exactly one of uid or pod_uid");
      } else if (uid >= 0 && !uids.insert(uid).second) {
        error(tables[i], fmt::format("quota[{}].uid", i), fmt::format("a second [[quota]] for uid {}", uid));
      } else if (!pod.empty() && !pods.insert(pod).second) {
        error(tables[i], fmt::format("quota[{}].pod_uid", i), fmt::format("a second [[quota]] for pod {}", pod));
      }
    }
  }

  // The admin socket must not be reachable through the client socket's directory (a container
  // that mounts it would get the operator's socket too).
  void check_admin_socket() {
    const std::string admin = admin_socket_path(out_.config);
    const std::string client_dir = std::filesystem::path(out_.config.daemon.socket_path).parent_path().string() + "/";
    if (admin == out_.config.daemon.socket_path || admin.rfind(client_dir, 0) == 0) {
      error(where({"ipc.admin_socket_path"}, "ipc"), "ipc.admin_socket_path",
            fmt::format("{} is inside the client socket's directory {}: mounting that directory into a container "
                        "would expose the admin socket; put it in a directory of its own",
                        admin, client_dir));
    }
  }

  // Where a cross-key error points: the first of `keys` present in the file, else its section.
  toml::source_region where(std::initializer_list<std::string> keys, const std::string& section) {
    for (const auto& k : keys)
      if (auto it = regions_.find(k); it != regions_.end()) return it->second;
    if (auto it = regions_.find(section); it != regions_.end()) return it->second;
    return {};
  }

  // `max_key` must not be below `min_key` (both in `section`).
  void check_min_max(const std::string& section, const std::string& min_key, int64_t min, const std::string& max_key,
                     int64_t max) {
    if (max >= min) return;
    // Name the key the file sets (the other one has its default).
    const std::string max_path = section + "." + max_key;
    const std::string key = regions_.count(max_path) ? max_path : section + "." + min_key;
    error(where({key}, section), key, fmt::format("{} ({}) must be at least {} ({})", max_key, max, min_key, min));
  }

  void check_peers() {
    const Config& c = out_.config;
    check_min_max("peer", "reconnect_min_ms", c.peer.reconnect_min_ms, "reconnect_max_ms", c.peer.reconnect_max_ms);
    check_min_max("flow", "rejoin_backoff_min_ms", c.flow.rejoin_backoff_min_ms, "rejoin_backoff_max_ms",
                  c.flow.rejoin_backoff_max_ms);
    // The peer handshake names every QP of every NIC in one message whose count is a byte.
    if (const auto qps = static_cast<int64_t>(c.nics.size()) * c.flow.qps_per_lane; qps > kMaxHandshakeEndpoints) {
      error(where({"flow.qps_per_lane"}, "flow"), "flow.qps_per_lane",
            fmt::format("{} [[nic]] sections x qps_per_lane {} = {} queue pairs per peer, more than the {} one peer "
                        "handshake carries",
                        c.nics.size(), c.flow.qps_per_lane, qps, kMaxHandshakeEndpoints));
    }
    if (!c.peers.empty() && !c.peer.enabled) {
      error(where({"peers[0]"}, "peer"), "peers",
            "[[peers]] is listed but the peer channel is off: set enabled = true in [peer]");
    }
    if (!c.peer.discover.empty() && !c.peer.enabled) {
      error(where({"peer.discover"}, "peer"), "peer.discover",
            "discover is set but the peer channel is off: set enabled = true in [peer]");
    }
    std::map<std::string, size_t> ids;
    for (size_t i = 0; i < c.peers.size(); ++i) {
      const std::string& id = c.peers[i].node_id;
      if (id.empty()) continue;  // missing: already reported
      const std::string key = fmt::format("peers[{}].node_id", i);
      if (!c.peer.node_id.empty() && id == c.peer.node_id) {
        error(where({key}, "peer"), key,
              fmt::format("'{}' is this node's own [peer] node_id; list only other nodes", id));
      }
      if (auto [it, fresh] = ids.emplace(id, i); !fresh) {
        error(where({key}, "peer"), key, fmt::format("duplicate peer node_id '{}' (also peers[{}])", id, it->second));
      }
    }
    check_peer_security(out_.config, options_.check_files, options_.credentials_elsewhere,
                        [this](const std::string& key, const std::string& message, Finding finding) {
                          const auto at = where({key}, "peer");
                          if (finding == Finding::kWarning) {
                            warning(at, key, message);
                          } else if (finding == Finding::kNotChecked) {
                            out_.not_checked.push_back(Error{file_, at.begin.line, at.begin.column, key, message});
                          } else {
                            error(at, key, message);
                          }
                        });
  }

  // The profile file's parameters, or nullopt after reporting why there are none: its errors name
  // the profile's own file, line and key.
  std::optional<cc::DcqcnParams> load_profile_file() {
    CcSection& cc = out_.config.cc;
    const auto at = where({"cc.profile_file"}, "cc");
    if (regions_.count("cc.profile")) {
      error(where({"cc.profile"}, "cc"), "cc.profile",
            "set profile or profile_file, not both (the file names its own base profile)");
      return std::nullopt;
    }
    std::filesystem::path path(cc.profile_file);
    if (path.is_relative()) path = std::filesystem::path(file_).parent_path() / path;
    cc.profile_file = path.lexically_normal().string();
    if (!options_.check_files) return cc::profile_by_name(cc.profile);  // an example whose file is elsewhere
    std::string text;
    Error read_error;
    if (!read_config_file(cc.profile_file, &text, &read_error)) {
      error(at, "cc.profile_file", fmt::format("{}: {}", cc.profile_file, read_error.message));
      return std::nullopt;
    }
    const cc::ProfileParse parsed = cc::parse_dcqcn_profile(text, cc.profile_file);
    for (const cc::ProfileError& e : parsed.errors)
      out_.errors.push_back(Error{cc.profile_file, e.line, e.column, e.key, e.message + " (the profile of cc.profile_file)"});
    if (!parsed.ok()) return std::nullopt;
    cc.profile = parsed.profile.base;
    cc.profile_file_name = parsed.profile.name;
    return parsed.profile.params();
  }

  void finish_cc() {
    std::optional<cc::DcqcnParams> params =
        out_.config.cc.profile_file.empty() ? cc::profile_by_name(out_.config.cc.profile) : load_profile_file();
    if (!params) return;  // already reported (the profile validator, or the profile file)
    for (const auto& [name, value] : out_.config.cc.overrides) cc::find_mlx5_knob(name)->set(*params, value);
    out_.config.cc.params = *params;
  }

  void run(std::string_view text) {
    out_.config.source = file_;
    for (const auto& s : sections())
      if (!s.is_array) apply_defaults(s, 0);
    toml::table root;
    try {
      root = toml::parse(text, file_);
    } catch (const toml::parse_error& e) {
      error(e.source(), "", fmt::format("TOML syntax error: {}", e.description()));
      return;
    }
    parse_root(root);
    check_nics();
    check_quotas();
    check_admin_socket();
    check_peers();
    finish_cc();
  }

 private:
  std::string file_;
  LoadResult& out_;
  LoadOptions options_;
  std::map<std::string, std::vector<toml::source_region>> array_tables_;  // per array section
  std::map<std::string, toml::source_region> regions_;  // key path or table ("peer", "peers[1]") -> where it is
};

}  // namespace

LoadResult load_string(std::string_view text, const std::string& name, LoadOptions options) {
  LoadResult r;
  Parser(name, r, options).run(text);
  // Report in file order (TOML tables iterate in key order, not source order).
  auto by_position = [](const Error& a, const Error& b) { return std::tie(a.line, a.column) < std::tie(b.line, b.column); };
  std::stable_sort(r.errors.begin(), r.errors.end(), by_position);
  std::stable_sort(r.warnings.begin(), r.warnings.end(), by_position);
  return r;
}

namespace {

// The checks every configuration file must pass (on the path's stat and the opened file's fstat).
std::string refuse_reason(const struct stat& st, bool via_symlink, size_t max_bytes) {
  if (!S_ISREG(st.st_mode)) {
    return fmt::format("cannot read file: it is {}{}, and a configuration must be a regular file",
                       file_type_name(st.st_mode), via_symlink ? " (behind a symlink)" : "");
  }
  if (static_cast<uint64_t>(st.st_size) > max_bytes) {
    return fmt::format("cannot read file: {} bytes, more than the {} bytes a configuration file may have",
                       static_cast<uint64_t>(st.st_size), max_bytes);
  }
  if ((st.st_mode & S_IWOTH) != 0) {
    return fmt::format("refused: every user may write it (mode {:04o}), so anyone could change the daemon's "
                       "configuration; chmod o-w it",
                       st.st_mode & 07777);
  }
  if (st.st_uid != 0 && st.st_uid != ::geteuid()) {
    return fmt::format("refused: owned by uid {}, neither root nor this process's uid {}; chown it", st.st_uid,
                       ::geteuid());
  }
  return "";
}

}  // namespace

bool read_config_file(const std::string& path, std::string* text, Error* error, size_t max_bytes) {
  const CarefulRead r = read_carefully(
      path, max_bytes, [&](const struct stat& st, bool via_symlink) { return refuse_reason(st, via_symlink, max_bytes); },
      text);
  std::string message;
  switch (r.outcome) {
    case CarefulRead::Outcome::kOk: return true;
    case CarefulRead::Outcome::kSystemError: message = fmt::format("cannot read file: {}", std::strerror(r.error)); break;
    case CarefulRead::Outcome::kRefused: message = r.reason; break;
    case CarefulRead::Outcome::kGrew:
      message = fmt::format("cannot read file: it grew past the {} bytes a configuration file may have", max_bytes);
      break;
  }
  *error = Error{path, 0, 0, "", std::move(message)};
  return false;
}

LoadResult load_file(const std::string& path, LoadOptions options) {
  std::string text;
  Error error;
  if (!read_config_file(path, &text, &error)) {
    LoadResult r;
    r.errors.push_back(std::move(error));
    return r;
  }
  return load_string(text, path, options);
}

Config default_config() {
  LoadResult r = load_string("", "<default>");
  return r.config;
}

void apply_environment(LoadResult& result) {
  const char* level = std::getenv("RDMAD_LOG_LEVEL");
  if (level == nullptr || *level == '\0') return;
  const Field* f = find_field("daemon", "log_level");
  const Value v = std::string(level);
  if (std::string expected = f->validate(v); !expected.empty()) {
    result.errors.push_back(Error{"<environment>", 0, 0, "RDMAD_LOG_LEVEL",
                                  fmt::format("invalid value \"{}\": expected {}", level, expected)});
    return;
  }
  if (result.config.daemon.log_level != level) {
    result.warnings.push_back(Error{"<environment>", 0, 0, "RDMAD_LOG_LEVEL",
                                    fmt::format("\"{}\" overrides daemon.log_level = \"{}\" of the configuration",
                                                level, result.config.daemon.log_level)});
  }
  result.config.daemon.log_level = level;
}

void log_warnings(const LoadResult& result) {
  auto log = log::get(log::Component::kConfig);
  for (const auto& w : result.warnings) log->warn("config warning warning={}", base::q(w.to_string()));
}

std::string default_admin_socket_path(const std::string& client_socket_path) {
  std::filesystem::path dir = std::filesystem::path(client_socket_path).parent_path();
  if (dir.empty() || dir == dir.root_path()) dir = "/run/rdmad";
  return dir.string() + "-admin/admin.sock";
}

std::string admin_socket_path(const Config& c) {
  return c.ipc.admin_socket_path.empty() ? default_admin_socket_path(c.daemon.socket_path) : c.ipc.admin_socket_path;
}

}  // namespace rdmad::config
