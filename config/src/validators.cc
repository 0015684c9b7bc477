#include "validators.h"

#include <arpa/inet.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>

#include <fmt/format.h>

#include "rdmad/config/credential_file.h"

namespace rdmad::config::validators {

Validator one_of(std::initializer_list<const char*> choices) {
  return one_of(std::vector<std::string>(choices.begin(), choices.end()));
}

Validator one_of(std::vector<std::string> c) {
  return [c = std::move(c)](const Value& v) -> std::string {
    const auto& s = std::get<std::string>(v);
    if (std::find(c.begin(), c.end(), s) != c.end()) return "";
    return fmt::format("one of {}", fmt::join(c, ", "));
  };
}

Validator int_range(int64_t min, int64_t max) {
  return [min, max](const Value& v) -> std::string {
    const int64_t x = std::get<int64_t>(v);
    if (x >= min && x <= max) return "";
    return fmt::format("an integer in [{}, {}]", min, max);
  };
}

Validator power_of_two(int64_t min, int64_t max) {
  return [min, max](const Value& v) -> std::string {
    const int64_t x = std::get<int64_t>(v);
    if (x >= min && x <= max && (x & (x - 1)) == 0) return "";
    return fmt::format("a power of two in [{}, {}]", min, max);
  };
}

Validator double_range(double min, double max) {
  return [min, max](const Value& v) -> std::string {
    const double x = std::get<double>(v);
    if (std::isfinite(x) && x >= min && x <= max) return "";
    return fmt::format("a number in [{}, {}]", min, max);
  };
}

Validator positive_double() {
  return [](const Value& v) -> std::string {
    const double x = std::get<double>(v);
    if (std::isfinite(x) && x > 0) return "";
    return "a finite number > 0";
  };
}

Validator absolute_path(bool allow_empty) {
  return [allow_empty](const Value& v) -> std::string {
    const auto& s = std::get<std::string>(v);
    if (allow_empty && s.empty()) return "";
    if (!s.empty() && s.front() == '/' && s.find('\0') == std::string::npos) return "";
    return allow_empty ? "an absolute path, or empty" : "an absolute path";
  };
}

Validator credential_path() {
  return [](const Value& v) -> std::string {
    const auto& s = std::get<std::string>(v);
    if (s.empty() || (s.front() == '/' && s.find('\0') == std::string::npos)) return "";
    if (std::string name; is_credential_reference(s, &name) && valid_credential_name(name)) return "";
    return "an absolute path, credential:NAME (a systemd credential), or empty";
  };
}

bool is_ip_address(const std::string& s) {
  unsigned char buf[16];
  return inet_pton(AF_INET, s.c_str(), buf) == 1 || inet_pton(AF_INET6, s.c_str(), buf) == 1;
}

bool split_host_port(const std::string& s, std::string& host, int64_t& port) {
  std::string port_text;
  if (!s.empty() && s.front() == '[') {
    const auto close = s.find(']');
    if (close == std::string::npos || close + 1 >= s.size() || s[close + 1] != ':') return false;
    host = s.substr(1, close - 1);
    port_text = s.substr(close + 2);
  } else {
    const auto colon = s.rfind(':');
    if (colon == std::string::npos || s.find(':') != colon) return false;
    host = s.substr(0, colon);
    port_text = s.substr(colon + 1);
  }
  if (host.empty() || port_text.empty() || port_text.size() > 5) return false;
  if (!std::all_of(port_text.begin(), port_text.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)); }))
    return false;
  port = std::stoll(port_text);
  return port <= 65535;
}

Validator listen_address(bool allow_empty) {
  return [allow_empty](const Value& v) -> std::string {
    std::string host;
    int64_t port = 0;
    const auto& s = std::get<std::string>(v);
    if ((allow_empty && s.empty()) || (split_host_port(s, host, port) && is_ip_address(host))) return "";
    return fmt::format("an IP address and port, like 127.0.0.1:9842 or [::1]:9842 (port 0 picks a free port){}",
                       allow_empty ? ", or empty" : "");
  };
}

Validator uri_prefix() {
  return [](const Value& v) -> std::string {
    const auto& s = std::get<std::string>(v);
    const auto scheme = s.find("://");
    const bool printable = std::all_of(s.begin(), s.end(), [](char c) { return c > ' ' && c < 127; });
    if (s.empty() || (scheme != std::string::npos && scheme > 0 && printable && s.size() <= 200)) return "";
    return "a URI prefix such as spiffe://cluster.local/rdmad/ (no spaces, at most 200 characters), or empty";
  };
}

namespace {

bool dns_label_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_'; }

// Why `name` is not a DNS name ("" when it is one): dot-separated labels of 1..63 letters, digits,
// '-' or '_', at most 253 bytes, an optional trailing dot.
std::string dns_name_problem(const std::string& name) {
  std::string n = name;
  if (!n.empty() && n.back() == '.') n.pop_back();
  if (n.empty() || n.size() > 253) return "the name after the scheme must have 1..253 bytes";
  for (size_t start = 0; start <= n.size();) {
    const size_t dot = std::min(n.find('.', start), n.size());
    if (dot == start || dot - start > 63) return "'" + name + "' has a label that is empty or longer than 63 bytes";
    if (!std::all_of(n.begin() + static_cast<std::ptrdiff_t>(start), n.begin() + static_cast<std::ptrdiff_t>(dot),
                     dns_label_char))
      return "'" + name + "' has a character a DNS name cannot hold";
    start = dot + 1;
  }
  return "";
}

}  // namespace

Validator discover_target() {
  return [](const Value& v) -> std::string {
    const auto& s = std::get<std::string>(v);
    if (s.empty()) return "";
    const size_t colon = s.find(':');
    const std::string scheme = colon == std::string::npos ? "" : s.substr(0, colon);
    if (scheme != "dns" && scheme != "dns-srv")
      return "dns:NAME (A/AAAA records) or dns-srv:NAME (SRV records), or empty";
    if (std::string p = dns_name_problem(s.substr(colon + 1)); !p.empty())
      return "dns:NAME or dns-srv:NAME with NAME a DNS name: " + p;
    return "";
  };
}

Validator peer_address() {
  return [](const Value& v) -> std::string {
    std::string host;
    int64_t port = 0;
    const auto& s = std::get<std::string>(v);
    if (split_host_port(s, host, port) && is_ip_address(host) && port >= 1) return "";
    return "an IP address and port, like 10.0.0.2:18515 or [fd00::2]:18515 (port in [1, 65535])";
  };
}

Validator ip_address(bool allow_empty) {
  return [allow_empty](const Value& v) -> std::string {
    const auto& s = std::get<std::string>(v);
    if ((allow_empty && s.empty()) || is_ip_address(s)) return "";
    return "an IPv4 or IPv6 address";
  };
}

Validator identifier(bool allow_empty) {
  return [allow_empty](const Value& v) -> std::string {
    const auto& s = std::get<std::string>(v);
    const bool chars_ok = std::all_of(s.begin(), s.end(), [](char c) {
      return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '-';
    });
    if (chars_ok && (allow_empty || !s.empty()) && s.size() <= 64) return "";
    return "a name of 1-64 letters, digits, '_', '.' or '-'";
  };
}

Validator pod_uid() {
  return [](const Value& v) -> std::string {
    const auto& s = std::get<std::string>(v);
    bool ok = s.size() == 36;
    for (size_t i = 0; ok && i < s.size(); ++i) {
      const bool dash = i == 8 || i == 13 || i == 18 || i == 23;
      ok = dash ? s[i] == '-' : (std::isdigit(static_cast<unsigned char>(s[i])) || (s[i] >= 'a' && s[i] <= 'f'));
    }
    return ok ? "" : "a pod UID: 36 characters, lower-case hex digits and dashes (8-4-4-4-12)";
  };
}

Validator label_map() {
  return [](const Value& v) -> std::string {
    for (const auto& [k, val] : std::get<StringMap>(v)) {
      const bool ok = !k.empty() && !std::isdigit(static_cast<unsigned char>(k[0])) && k.rfind("__", 0) != 0 &&
                      std::all_of(k.begin(), k.end(), [](char c) {
                        return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
                      });
      if (!ok) return fmt::format("Prometheus label names ([a-zA-Z_][a-zA-Z0-9_]*, not starting with __); got '{}'", k);
    }
    return "";
  };
}

Validator octal_mode() {
  return [](const Value& v) -> std::string {
    const auto& s = std::get<std::string>(v);
    const bool ok = s.size() >= 3 && s.size() <= 4 &&
                    std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '7'; });
    return ok ? "" : "an octal mode such as 0660";
  };
}

Validator id_list() {
  return [](const Value& v) -> std::string {
    for (int64_t id : std::get<IntList>(v))
      if (id < 0 || id > 4294967294LL) return fmt::format("ids in [0, 4294967294]; got {}", id);
    return "";
  };
}

bool address_in_cidr(const std::string& address, const std::string& cidr) {
  const auto slash = cidr.find('/');
  if (slash == std::string::npos) return false;
  const std::string net = cidr.substr(0, slash);
  const int bits = std::atoi(cidr.c_str() + slash + 1);
  uint8_t a[16] = {}, n[16] = {};
  const bool v6 = address.find(':') != std::string::npos;
  if (v6 != (net.find(':') != std::string::npos)) return false;
  const int family = v6 ? AF_INET6 : AF_INET;
  if (inet_pton(family, address.c_str(), a) != 1 || inet_pton(family, net.c_str(), n) != 1) return false;
  for (int i = 0; i < bits; ++i) {
    const uint8_t mask = static_cast<uint8_t>(0x80 >> (i % 8));
    if ((a[i / 8] & mask) != (n[i / 8] & mask)) return false;
  }
  return true;
}

Validator cidr(bool allow_empty) {
  return [allow_empty](const Value& v) -> std::string {
    const auto& s = std::get<std::string>(v);
    if (allow_empty && s.empty()) return "";
    const auto slash = s.find('/');
    if (slash != std::string::npos && slash + 1 < s.size() && s.size() - slash - 1 <= 3) {
      const std::string addr = s.substr(0, slash);
      const std::string bits = s.substr(slash + 1);
      if (is_ip_address(addr) && std::all_of(bits.begin(), bits.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)); })) {
        const int n = std::stoi(bits);
        const int max = addr.find(':') == std::string::npos ? 32 : 128;
        if (n <= max) return "";
      }
    }
    return "a CIDR such as 10.1.0.0/16 or fd00::/8";
  };
}

}  // namespace rdmad::config::validators
