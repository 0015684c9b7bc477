// [[nic]] keys from the backends' option tables: whatever option a backend declares is a key, with
// the backend's default, range and help, so that every backend knob is reachable from the file
// and validation lists what the registry really has.
#include "nic_options.h"

#include <fmt/format.h>

#include <algorithm>
#include <string>

#include "rdmad/base/assert.h"
#include "rdmad/verbs/builtin_backends.h"

namespace rdmad::config {
namespace {

// The options the daemon and the loader read themselves are NicSection members.
template <typename Section>  // NicSection or const NicSection
auto member_of(Section& n, std::string_view name) -> decltype(&n.port) {
  if (name == "port") return &n.port;
  if (name == "udp_port") return &n.udp_port;
  if (name == "gid_index") return &n.gid_index;
  return nullptr;
}

FieldType field_type(verbs::OptionType t) {
  switch (t) {
    case verbs::OptionType::kInt: return FieldType::kInt;
    case verbs::OptionType::kBool: return FieldType::kBool;
    case verbs::OptionType::kString: return FieldType::kString;
  }
  return FieldType::kString;
}

verbs::OptionValue option_value(const Value& v) {
  if (const auto* i = std::get_if<int64_t>(&v)) return *i;
  if (const auto* b = std::get_if<bool>(&v)) return *b;
  return std::get<std::string>(v);
}

Value field_value(const verbs::OptionValue& v) {
  if (const auto* i = std::get_if<int64_t>(&v)) return *i;
  if (const auto* b = std::get_if<bool>(&v)) return *b;
  return std::get<std::string>(v);
}

bool is_derived(const std::string& name) {
  for (const DerivedOption& d : derived_nic_options())
    if (d.option == name) return true;
  return false;
}

// One option as the backends that have it declare it.
struct Declared {
  const verbs::OptionSpec* spec = nullptr;  // the first backend's entry: type, default, help
  std::vector<std::string> backends;
  std::vector<const verbs::OptionSpec*> specs;
};

}  // namespace

std::span<const DerivedOption> derived_nic_options() {
  static const std::vector<DerivedOption> d = {
      {"relay_address", "advertise_address"},
      {"relay_udp_port", "advertise_udp_port (or udp_port)"},
      {"gid_cidr", "gid_match, or address (the GID of that address)"},
      {"sysfs_root", "[daemon] sysfs_root"},
  };
  return d;
}

void add_backend_option_fields(std::vector<Field>& f) {
  std::vector<std::pair<std::string, Declared>> options;  // in table order, backend by backend
  for (const verbs::BackendDescription& b : verbs::builtin_backends()) {
    for (const verbs::OptionSpec& spec : b.options) {
      if (is_derived(spec.name)) continue;
      auto it = std::find_if(options.begin(), options.end(), [&](const auto& o) { return o.first == spec.name; });
      if (it == options.end()) it = options.insert(options.end(), {spec.name, Declared{&spec, {}, {}}});
      RDMAD_ASSERT(it->second.spec->type == spec.type, "backend option {} has two types", spec.name);
      it->second.backends.push_back(b.name);
      it->second.specs.push_back(&spec);
    }
  }
  const size_t all = verbs::builtin_backends().size();
  for (auto& [name, d] : options) {
    const verbs::OptionSpec& spec = *d.spec;
    std::string doc = d.backends.size() == all
                          ? spec.help
                          : fmt::format("{}: {} Ignored by other backends.", fmt::join(d.backends, ", "), spec.help);
    std::vector<const verbs::OptionSpec*> specs = d.specs;
    // Valid when a backend that has the option takes the value; each checks it again at open.
    auto validate = [specs](const Value& v) -> std::string {
      std::string expected;
      for (const verbs::OptionSpec* s : specs) {
        expected = verbs::check_option(*s, option_value(v));
        if (expected.empty()) return "";
      }
      return expected;
    };
    auto apply = [name = name](Config& c, size_t i, const Value& v) {
      if (c.nics.size() <= i) c.nics.resize(i + 1);
      NicSection& n = c.nics[i];
      if (int64_t* member = member_of(n, name)) {
        *member = std::get<int64_t>(v);
      } else {
        n.options[name] = option_value(v);
      }
    };
    f.push_back({"nic", name, field_type(spec.type), field_value(spec.default_value), std::move(doc), spec.expected(),
                 false, validate, apply});
  }
}

std::optional<verbs::OptionValue> NicSection::backend_option(std::string_view option) const {
  if (const int64_t* member = member_of(*this, option)) return *member;
  if (auto it = options.find(option); it != options.end()) return it->second;
  return std::nullopt;
}

}  // namespace rdmad::config
