#pragma once
// Typed lookups in one TOML table (the scenario, or one entry of a [[list]]) that remember which keys
// were read, so leftovers can be reported as unknown, and name "file:line" and the key in every error.
#include <fmt/format.h>
#include <toml++/toml.h>

#include <filesystem>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "rdmad/sim/scenario.h"

namespace rdmad::sim {

[[noreturn]] inline void fail(const std::string& origin, const std::string& what) {
  throw std::runtime_error(fmt::format("{}: {}", origin, what));
}

class Reader {
 public:
  // `prefix`: how keys of this table are named in messages ("traffic.source" for its entries).
  Reader(const toml::table& root, std::string origin, std::string prefix = "")
      : root_(root), origin_(std::move(origin)), prefix_(std::move(prefix)) {}

  // The key's name in messages.
  std::string full(const std::string& key) const { return prefix_.empty() ? key : prefix_ + "." + key; }

  template <typename T>
  void get(const std::string& key, T& out) {
    used_.insert(key);
    toml::node_view<const toml::node> node = root_.at_path(key);
    if (!node) return;
    if constexpr (std::is_same_v<T, bool>) {
      if (auto v = node.value_exact<bool>()) return void(out = *v);
    } else if constexpr (std::is_same_v<T, std::string>) {
      if (auto v = node.value_exact<std::string>()) return void(out = *v);
    } else if constexpr (std::is_floating_point_v<T>) {
      if (auto v = node.value<double>()) return void(out = static_cast<T>(*v));
    } else {
      if (auto v = node.value_exact<int64_t>(); v && *v >= 0) return void(out = static_cast<T>(*v));
    }
    fail(where(node), fmt::format("key '{}' has the wrong type or range", full(key)));
  }

  // As get(), leaving `out` empty when the key is absent.
  template <typename T>
  void get(const std::string& key, std::optional<T>& out) {
    if (!has(key)) return void(used_.insert(key));
    T v{};
    get(key, v);
    out = v;
  }

  // A string or an array of strings.
  void get_names(const std::string& key, std::vector<std::string>& out) {
    used_.insert(key);
    toml::node_view<const toml::node> node = root_.at_path(key);
    if (!node) return;
    out.clear();
    if (auto v = node.value_exact<std::string>()) return void(out.push_back(*v));
    if (const auto* a = node.as_array()) {
      for (const toml::node& n : *a) {
        auto v = n.value_exact<std::string>();
        if (!v) break;
        out.push_back(*v);
      }
      if (out.size() == a->size() && !out.empty()) return;
    }
    fail(where(node), fmt::format("key '{}' needs a name or a list of names", full(key)));
  }

  // A number or an array of numbers.
  void get_numbers(const std::string& key, std::vector<double>& out) {
    used_.insert(key);
    toml::node_view<const toml::node> node = root_.at_path(key);
    if (!node) return;
    out.clear();
    if (auto v = node.value<double>()) return void(out.push_back(*v));
    if (const auto* a = node.as_array()) {
      for (const toml::node& n : *a) {
        auto v = n.value<double>();
        if (!v || *v < 0) break;
        out.push_back(*v);
      }
      if (out.size() == a->size() && !out.empty()) return;
    }
    fail(where(node), fmt::format("key '{}' needs a list of non-negative numbers", full(key)));
  }

  // A file path; a relative one is taken relative to `base_dir` (the scenario file's directory).
  void get_path(const std::string& key, const std::filesystem::path& base_dir, std::filesystem::path& out) {
    std::string p;
    get(key, p);
    if (!p.empty()) out = std::filesystem::path(p).is_absolute() ? std::filesystem::path(p) : base_dir / p;
  }

  template <typename E>
  E get_enum(const std::string& key, const std::vector<std::pair<std::string, E>>& names, E def) {
    std::string s;
    get(key, s);
    if (s.empty()) return def;
    for (const auto& [n, e] : names) {
      if (n == s) return e;
    }
    std::string known;
    for (const auto& [n, e] : names) known += (known.empty() ? "" : ", ") + n;
    fail(where_key(key), fmt::format("key '{}': unknown value '{}' ({})", full(key), s, known));
  }

  bool has(const std::string& key) const { return static_cast<bool>(root_.at_path(key)); }

  // "file:line" of a key, or of this table (the file for the scenario) when the key is not in it.
  std::string where_key(const std::string& key) const {
    toml::node_view<const toml::node> node = root_.at_path(key);
    return node ? where(node) : where_table();
  }
  std::string where_table() const {
    const auto& src = root_.source();
    return prefix_.empty() || !src.begin ? origin_ : fmt::format("{}:{}", origin_, src.begin.line);
  }

  std::string where(toml::node_view<const toml::node> node) const { return where(*node.node()); }
  std::string where(const toml::node& node) const {
    const auto& src = node.source();
    return src.begin ? fmt::format("{}:{}", origin_, src.begin.line) : origin_;
  }

  // Where this table and each of the given keys were written.
  Located locate(const std::vector<std::string>& keys) const {
    Located loc;
    loc.at = where_table();
    for (const std::string& k : keys) {
      if (has(k)) loc.key_at.emplace_back(k, where_key(k));
    }
    return loc;
  }

  // An array of tables ([[key]]): each element, or none when absent; each element's keys are taken
  // by the caller, which must read them all.
  const toml::array* array(const std::string& key) {
    used_.insert(key);
    toml::node_view<const toml::node> node = root_.at_path(key);
    if (!node) return nullptr;
    if (const auto* a = node.as_array()) return a;
    fail(where(node), fmt::format("key '{}' must be an array of tables ([[{}]])", full(key), full(key)));
  }

  // The elements of an array of tables, each as a table.
  std::vector<const toml::table*> tables(const std::string& key) {
    std::vector<const toml::table*> out;
    if (const toml::array* a = array(key)) {
      for (const toml::node& n : *a) {
        const auto* t = n.as_table();
        if (t == nullptr) fail(where(n), fmt::format("key '{}': each entry is a table", full(key)));
        out.push_back(t);
      }
    }
    return out;
  }

  // Keys under `prefix` (a table) that were read through the knob table, not get().
  void mark_used_prefix(const std::string& prefix) { used_prefixes_.push_back(prefix); }

  // `hint`: what the message suggests ("see docs/simulator.md" by default).
  void reject_unknown(const std::string& hint = "see docs/simulator.md") const { walk(root_, "", hint); }

 private:
  void walk(const toml::table& t, const std::string& prefix, const std::string& hint) const {
    for (const auto& [k, v] : t) {
      std::string key = prefix.empty() ? std::string(k.str()) : prefix + "." + std::string(k.str());
      if (const auto* sub = v.as_table()) {
        walk(*sub, key, hint);
        continue;
      }
      bool ok = used_.count(key) > 0;
      for (const auto& p : used_prefixes_) ok = ok || key.rfind(p + ".", 0) == 0;
      if (!ok) fail(where(v), fmt::format("unknown key '{}' ({})", full(key), hint));
    }
  }
  const toml::table& root_;
  std::string origin_;
  std::string prefix_;
  std::set<std::string> used_;
  std::vector<std::string> used_prefixes_;
};

// [[topology.node]] and [[topology.link]] entries (scenario_lists.cc).
void read_topology_lists(Reader& r, const std::string& origin, TopologyConfig& t);
// [[traffic.source]] entries; relative paths resolve against `base_dir`.
void read_traffic_sources(Reader& r, const std::string& origin, const std::filesystem::path& base_dir,
                          TrafficConfig& t);

}  // namespace rdmad::sim
