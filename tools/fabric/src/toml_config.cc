// TOML and "key=value,..." port specs share one key table, so the two front ends cannot drift.
#include <toml++/toml.h>

#include <charconv>
#include <cstdio>
#include <stdexcept>
#include <string>

#include "rdmad/tools/fabric/config.h"

namespace rdmad::fabric {
namespace {

template <typename T>
T to_number(const std::string& v, const std::string& key) {
  T out{};
  const auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), out);
  if (ec != std::errc{} || end != v.data() + v.size() || v.empty()) {
    throw std::invalid_argument(key + ": not a number '" + v + "'");
  }
  return out;
}

double to_double(const std::string& v, const std::string& key) { return to_number<double>(v, key); }
uint64_t to_u64(const std::string& v, const std::string& key) { return to_number<uint64_t>(v, key); }

bool to_bool(const std::string& v, const std::string& key) {
  if (v == "true" || v == "1" || v == "on") return true;
  if (v == "false" || v == "0" || v == "off") return false;
  throw std::invalid_argument(key + ": not a boolean '" + v + "'");
}

// Sets one port key from its text form; throws on unknown keys and bad values.
void set_port_key(PortConfig& p, const std::string& key, const std::string& v) {
  if (key == "name") {
    p.name = v;
  } else if (key == "listen") {
    p.listen = Endpoint::parse(v);
  } else if (key == "forward") {
    p.forward = Endpoint::parse(v);
  } else if (key == "rate") {
    p.rate_bps = parse_rate_bps(v);
  } else if (key == "buffer") {
    p.buffer_bytes = parse_bytes(v);
  } else if (key == "ecn") {
    p.ecn = to_bool(v, key);
  } else if (key == "kmin") {
    p.red.kmin_bytes = parse_bytes(v);
  } else if (key == "kmax") {
    p.red.kmax_bytes = parse_bytes(v);
  } else if (key == "pmax") {
    p.red.pmax = to_double(v, key);
  } else if (key == "loss") {
    p.loss = to_double(v, key);
  } else if (key == "duplicate") {
    p.duplicate = to_double(v, key);
  } else if (key == "reorder") {
    p.reorder = to_double(v, key);
  } else if (key == "reorder_hold_us") {
    p.reorder_hold_us = static_cast<uint32_t>(to_u64(v, key));
  } else if (key == "seed") {
    p.seed = to_u64(v, key);
  } else if (key == "drop_opcode") {
    const uint64_t op = to_u64(v, key);
    if (op > 255) throw std::invalid_argument("drop_opcode must be a BTH opcode (0..255)");
    p.drop_opcode = static_cast<int>(op);
  } else if (key == "drop_opcode_after") {
    p.drop_opcode_after = to_u64(v, key);
  } else {
    throw std::invalid_argument("unknown port key '" + key + "'");
  }
}

std::string node_text(const toml::node& n, const std::string& key) {
  if (auto s = n.value<std::string>(); s && n.is_string()) return *s;
  if (n.is_integer()) return std::to_string(*n.value<int64_t>());
  if (n.is_floating_point()) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.17g", *n.value<double>());
    return buf;
  }
  if (n.is_boolean()) return *n.value<bool>() ? "true" : "false";
  throw std::invalid_argument(key + ": unsupported value type");
}

std::string default_name(size_t i) { return "port" + std::to_string(i); }

}  // namespace

PortConfig parse_port_spec(std::string_view spec) {
  PortConfig p;
  size_t start = 0;
  while (start <= spec.size()) {
    size_t comma = spec.find(',', start);
    if (comma == std::string_view::npos) comma = spec.size();
    const std::string_view item = spec.substr(start, comma - start);
    if (!item.empty()) {
      const size_t eq = item.find('=');
      if (eq == std::string_view::npos)
        throw std::invalid_argument("port spec item '" + std::string(item) + "' has no '='");
      set_port_key(p, std::string(item.substr(0, eq)), std::string(item.substr(eq + 1)));
    }
    start = comma + 1;
  }
  return p;
}

FabricConfig parse_toml_config(std::string_view text, std::optional<uint64_t> base_seed) {
  toml::table root;
  try {
    root = toml::parse(text);
  } catch (const toml::parse_error& e) {
    throw std::runtime_error("fabric config: " + std::string(e.description()));
  }
  FabricConfig c;
  uint64_t seed = base_seed.value_or(1);
  for (const auto& [k, node] : root) {
    const std::string key(k.str());
    try {
      if (key == "seed") {
        seed = base_seed.value_or(to_u64(node_text(node, key), key));
      } else if (key == "stats_interval_ms") {
        c.stats_interval_ms = static_cast<uint32_t>(to_u64(node_text(node, key), key));
      } else if (key == "stats_json") {
        c.stats_json = node_text(node, key);
      } else if (key != "port") {
        throw std::invalid_argument("unknown key '" + key + "'");
      }
    } catch (const std::invalid_argument& e) {
      throw std::runtime_error(std::string("fabric config: ") + e.what());
    }
  }
  if (const toml::array* ports = root["port"].as_array()) {
    for (size_t i = 0; i < ports->size(); ++i) {
      const toml::table* t = (*ports)[i].as_table();
      if (t == nullptr) throw std::runtime_error("fabric config: [[port]] entries must be tables");
      PortConfig p;
      p.seed = seed + i;
      try {
        for (const auto& [k, node] : *t)
          set_port_key(p, std::string(k.str()), node_text(node, std::string(k.str())));
      } catch (const std::invalid_argument& e) {
        throw std::runtime_error("fabric config: port " + std::to_string(i) + ": " + e.what());
      }
      if (p.name.empty()) p.name = default_name(i);
      c.ports.push_back(std::move(p));
    }
  }
  return c;
}

}  // namespace rdmad::fabric
