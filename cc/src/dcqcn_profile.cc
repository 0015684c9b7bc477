#include "rdmad/cc/dcqcn_profile.h"

#include <fmt/format.h>

#include <algorithm>
#include <sstream>
#include <toml++/toml.h>
#include <tuple>

namespace rdmad::cc {
namespace {

class Reader {
 public:
  explicit Reader(ProfileParse& out) : out_(out) {}

  void error(const toml::source_region& at, std::string key, std::string message) {
    out_.errors.push_back(ProfileError{at.begin.line, at.begin.column, std::move(key), std::move(message)});
  }

  void profile_table(const toml::table& t) {
    for (auto&& [k, v] : t) {
      const std::string key = "profile." + std::string(k.str());
      if (k.str() != "name" && k.str() != "base") {
        error(k.source(), key, "unknown key in [profile]; known keys: name, base");
      } else if (!v.is_string()) {
        error(v.source(), key, "expected a string");
      } else if (k.str() == "name") {
        out_.profile.name = *v.value<std::string>();
      } else if (const std::string base = *v.value<std::string>(); !profile_by_name(base)) {
        error(v.source(), key, fmt::format("unknown profile \"{}\" (mlx5, paper)", base));
      } else {
        out_.profile.base = base;
      }
    }
  }

  void knobs_table(const toml::table& t) {
    for (auto&& [k, v] : t) {
      const std::string key = "knobs." + std::string(k.str());
      const Mlx5Knob* knob = find_mlx5_knob(k.str());
      if (knob == nullptr) {
        error(k.source(), key, "not an mlx5 DCQCN knob (rdmactl cc show and docs/nic-cc.md list them)");
        continue;
      }
      const auto value = v.value_exact<int64_t>();
      if (!v.is_integer() || !value) {
        error(v.source(), key, fmt::format("expected an integer in [{}, {}] ({})", knob->min, knob->max, knob->unit));
        continue;
      }
      if (*value < knob->min || *value > knob->max) {
        error(v.source(), key,
              fmt::format("{} is outside [{}, {}] ({})", *value, knob->min, knob->max, knob->unit));
        continue;
      }
      const auto same = std::find_if(out_.profile.knobs.begin(), out_.profile.knobs.end(),
                                     [&](const ProfileKnob& p) { return p.knob == knob; });
      if (same != out_.profile.knobs.end()) {
        error(k.source(), key, fmt::format("{} is set twice (vendor and debugfs names)", knob->name));
        continue;
      }
      out_.profile.knobs.push_back(ProfileKnob{knob, *value});
    }
    const auto order = [](const ProfileKnob& a, const ProfileKnob& b) { return a.knob < b.knob; };
    std::sort(out_.profile.knobs.begin(), out_.profile.knobs.end(), order);
  }

  void tuning_table(const toml::table& t) {
    std::vector<std::tuple<uint32_t, uint32_t, std::string, std::string>> entries;
    for (auto&& [k, v] : t) {
      std::ostringstream text;
      if (const toml::table* sub = v.as_table()) {
        toml::table inline_copy = *sub;  // a nested table stays one line: `validation = { ... }`
        inline_copy.is_inline(true);
        text << toml::toml_formatter(inline_copy, toml::format_flags::none);
      } else {
        v.visit([&](auto&& node) { text << toml::toml_formatter(node, toml::format_flags::none); });
      }
      entries.emplace_back(k.source().begin.line, k.source().begin.column, std::string(k.str()), text.str());
    }
    std::sort(entries.begin(), entries.end());
    for (auto& [line, column, key, text] : entries) out_.profile.tuning.emplace_back(std::move(key), std::move(text));
  }

  void run(std::string_view text, std::string_view file) {
    toml::table root;
    try {
      root = toml::parse(text, file);
    } catch (const toml::parse_error& e) {
      error(e.source(), "", fmt::format("TOML syntax error: {}", e.description()));
      return;
    }
    for (auto&& [k, v] : root) {
      const std::string name(k.str());
      const toml::table* t = v.as_table();
      if (name != "profile" && name != "knobs" && name != "tuning") {
        error(k.source(), name, "unknown section; known sections: [profile], [knobs], [tuning]");
      } else if (t == nullptr) {
        error(v.source(), name, fmt::format("expected a table ([{}])", name));
      } else if (name == "profile") {
        profile_table(*t);
      } else if (name == "knobs") {
        knobs_table(*t);
      } else {
        tuning_table(*t);
      }
    }
    if (!root.contains("knobs")) error({}, "knobs", "missing [knobs]: a profile sets at least one knob");
  }

 private:
  ProfileParse& out_;
};

std::string quoted(std::string_view s) {
  std::ostringstream out;
  out << toml::value<std::string>(std::string(s));
  return out.str();
}

}  // namespace

DcqcnParams DcqcnProfile::params() const {
  DcqcnParams p = profile_by_name(base).value_or(mlx5_profile());
  for (const ProfileKnob& k : knobs) k.knob->set(p, k.value);
  return p;
}

std::optional<int64_t> DcqcnProfile::knob(std::string_view knob_name) const {
  const Mlx5Knob* wanted = find_mlx5_knob(knob_name);
  for (const ProfileKnob& k : knobs)
    if (k.knob == wanted) return k.value;
  return std::nullopt;
}

std::string DcqcnProfile::tuning_value(std::string_view key) const {
  for (const auto& [k, v] : tuning)
    if (k == key) return v;
  return {};
}

std::string ProfileError::to_string(std::string_view file) const {
  std::string where(file);
  if (line > 0) where += fmt::format(":{}:{}", line, column);
  return key.empty() ? fmt::format("{}: {}", where, message) : fmt::format("{}: {}: {}", where, key, message);
}

ProfileParse parse_dcqcn_profile(std::string_view text, std::string_view file) {
  ProfileParse out;
  Reader(out).run(text, file);
  const auto by_position = [](const ProfileError& a, const ProfileError& b) {
    return std::tie(a.line, a.column) < std::tie(b.line, b.column);
  };
  std::stable_sort(out.errors.begin(), out.errors.end(), by_position);
  return out;
}

std::string render_dcqcn_profile(const DcqcnProfile& profile, std::string_view comment) {
  std::string out;
  std::istringstream lines{std::string(comment)};
  for (std::string line; std::getline(lines, line);) out += line.empty() ? "#\n" : "# " + line + "\n";
  out += "[profile]\n";
  if (!profile.name.empty()) out += "name = " + quoted(profile.name) + "\n";
  out += "base = " + quoted(profile.base) + "\n\n[knobs]\n";
  for (const ProfileKnob& k : profile.knobs)
    out += fmt::format("{} = {}  # {}\n", k.knob->name, k.value, k.knob->unit);
  if (!profile.tuning.empty()) {
    out += "\n[tuning]\n";
    for (const auto& [key, value] : profile.tuning) out += fmt::format("{} = {}\n", key, value);
  }
  return out;
}

std::vector<ProfileKnob> dynamics_knobs(const DcqcnParams& params) {
  std::vector<ProfileKnob> out;
  for (const Mlx5Knob& k : mlx5_knobs()) {
    if (k.name == "cnp_dscp" || k.name == "cnp_802p_prio") continue;
    out.push_back(ProfileKnob{&k, k.get(params)});
  }
  return out;
}

}  // namespace rdmad::cc
