#include "rdmad/tools/fabric/config.h"

#include <cctype>
#include <charconv>
#include <cmath>
#include <stdexcept>
#include <string>

namespace rdmad::fabric {
namespace {

struct Unit {
  std::string_view suffix;
  double factor;
};

// Splits "2.5gbit" into 2.5 and "gbit" and scales by the matching unit (case-insensitive).
uint64_t parse_scaled(std::string_view text, std::initializer_list<Unit> units, const char* what) {
  std::string t;
  for (char c : text) {
    if (!std::isspace(static_cast<unsigned char>(c))) t.push_back(static_cast<char>(std::tolower(c)));
  }
  double value = 0;
  const auto [end, ec] = std::from_chars(t.data(), t.data() + t.size(), value);
  if (ec != std::errc{} || t.empty() || value < 0 || !std::isfinite(value)) {
    throw std::invalid_argument(std::string("bad ") + what + " '" + std::string(text) + "'");
  }
  const std::string_view suffix(end, static_cast<size_t>(t.data() + t.size() - end));
  for (const Unit& u : units) {
    if (suffix == u.suffix) return static_cast<uint64_t>(std::llround(value * u.factor));
  }
  throw std::invalid_argument(std::string("bad ") + what + " unit in '" + std::string(text) + "'");
}

}  // namespace

uint64_t parse_rate_bps(std::string_view text) {
  return parse_scaled(text,
                      {{"", 1},
                       {"bit", 1},
                       {"kbit", 1e3},
                       {"mbit", 1e6},
                       {"gbit", 1e9},
                       {"bps", 1},
                       {"kbps", 1e3},
                       {"mbps", 1e6},
                       {"gbps", 1e9}},
                      "rate");
}

uint64_t parse_bytes(std::string_view text) {
  return parse_scaled(text,
                      {{"", 1},
                       {"b", 1},
                       {"kb", 1e3},
                       {"mb", 1e6},
                       {"gb", 1e9},
                       {"kib", 1024.0},
                       {"mib", 1024.0 * 1024},
                       {"gib", 1024.0 * 1024 * 1024}},
                      "size");
}

void validate(const FabricConfig& config) {
  if (config.ports.empty()) throw std::invalid_argument("no ports configured");
  for (const PortConfig& p : config.ports) {
    const auto bad = [&](const std::string& why) {
      return std::invalid_argument("port " + p.name + ": " + why);
    };
    if (p.listen.family() != AF_INET && p.listen.family() != AF_INET6) throw bad("listen address missing");
    if (p.forward.family() != p.listen.family())
      throw bad("forward must be the same address family as listen");
    if (p.forward.port() == 0) throw bad("forward port must not be 0");
    if (p.buffer_bytes == 0) throw bad("buffer must be > 0");
    if (p.buffer_bytes > (1ull << 31)) throw bad("buffer must be <= 2 GiB");
    if (p.red.kmax_bytes < p.red.kmin_bytes) throw bad("kmax must be >= kmin");
    if (p.red.pmax < 0 || p.red.pmax > 1) throw bad("pmax must be in [0, 1]");
    for (double prob : {p.loss, p.duplicate, p.reorder}) {
      if (!(prob >= 0 && prob <= 1)) throw bad("loss, duplicate and reorder must be in [0, 1]");
    }
  }
}

}  // namespace rdmad::fabric
