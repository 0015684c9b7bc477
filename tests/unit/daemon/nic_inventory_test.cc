// What each [[nic]] is opened with (device_config_for). The slots themselves: nic_slots_test.cc.
#include "rdmad/daemon/nics/nic_inventory.h"

#include <fmt/format.h>
#include <map>
#include <set>
#include <string>
#include <gtest/gtest.h>

#include "rdmad/config/field.h"
#include "rdmad/config/loader.h"
#include "rdmad/verbs/builtin_backends.h"
#include "support/doubles/nic_backends.h"

namespace rdmad::daemon {
namespace {

using Backend = test::NicBackends;
using test::rdma_nic;

verbs::OptionValue option(const verbs::DeviceConfig& dc, const std::string& name) {
  auto it = dc.backend_options.find(name);
  return it != dc.backend_options.end() ? it->second : verbs::OptionValue{"<unset>"};
}

TEST(NicInventory, EachNicIsOpenedWithItsDscpSlCnpDscpAndAddress) {
  config::Config cfg;
  cfg.cc.params.cnp_dscp = 48;
  config::NicSection n = rdma_nic("rail0", "mlx5_0");
  n.address = "10.1.0.7";
  n.gid_match = "10.1.0.0/16";
  n.options["dscp"] = 46;
  n.options["sl"] = 3;
  n.cnp_dscp = 40;
  Backend b;
  const verbs::BackendInfo* hw = b.registry.find("rdma_core");
  verbs::DeviceConfig dc = device_config_for(n, cfg, hw);
  EXPECT_EQ(dc.name, "mlx5_0");
  EXPECT_EQ(option(dc, "dscp"), verbs::OptionValue{46});
  EXPECT_EQ(option(dc, "sl"), verbs::OptionValue{3});
  EXPECT_EQ(dc.dcqcn.cnp_dscp, 40);
  EXPECT_EQ(option(dc, "gid_cidr"), verbs::OptionValue{"10.1.0.7/32"}) << "the address names exactly its GID";
  EXPECT_FALSE(dc.backend_options.count("gid_ipv6")) << "the backend's default (IPv4)";
  n.address = "fd00::7";
  n.gid_match.clear();
  n.cnp_dscp = -1;
  dc = device_config_for(n, cfg, hw);
  EXPECT_EQ(option(dc, "gid_cidr"), verbs::OptionValue{"fd00::7/128"});
  EXPECT_EQ(option(dc, "gid_ipv6"), verbs::OptionValue{true});
  EXPECT_EQ(dc.dcqcn.cnp_dscp, 48) << "-1 takes [cc] cnp_dscp";
  n.address.clear();
  n.gid_match = "10.2.0.0/16";
  EXPECT_EQ(option(device_config_for(n, cfg, hw), "gid_cidr"), verbs::OptionValue{"10.2.0.0/16"});
  // A soft NIC's address is its own (not a GID rule); its CNPs carry the NIC's cnp_dscp too.
  config::NicSection s;
  s.name = "soft0";
  s.backend = "soft";
  s.address = "127.0.0.2";
  s.cnp_dscp = 10;
  dc = device_config_for(s, cfg, b.registry.find("soft"));
  EXPECT_EQ(dc.name, "soft0");
  EXPECT_EQ(dc.address, "127.0.0.2");
  EXPECT_FALSE(dc.backend_options.count("gid_cidr")) << "soft has no such option";
  EXPECT_EQ(dc.dcqcn.cnp_dscp, 10);
}

// A valid value of `spec` other than its default (as TOML), or "" where the test knows none.
std::string other_value(const verbs::OptionSpec& spec) {
  if (const auto* i = std::get_if<int64_t>(&spec.default_value))
    return std::to_string(*i < spec.max ? *i + 1 : *i - 1);
  if (const auto* b = std::get_if<bool>(&spec.default_value)) return *b ? "false" : "true";
  for (const char* candidate : {"eth7", "10.0.0.9", "/srv/host", "02:00:00:00:00:09", "10.0.0.9=02:00:00:00:00:09"})
    if (verbs::check_option(spec, std::string(candidate)).empty() && std::get<std::string>(spec.default_value) != candidate)
      return fmt::format("\"{}\"", candidate);
  return "";
}

verbs::OptionValue parsed_value(const std::string& toml) {
  if (toml == "true" || toml == "false") return toml == "true";
  if (toml.front() == '"') return toml.substr(1, toml.size() - 2);
  return int64_t{std::stoll(toml)};
}

// Every option of every built-in backend is reachable from the file: either its own [[nic]] key,
// whose value (not the default) reaches DeviceConfig::backend_options, or one derived from other
// keys (config::derived_nic_options, checked by the test above for gid_cidr, and by the soft
// relay tests for relay_address).
TEST(NicInventory, EveryBackendOptionIsReachableFromItsNicKey) {
  std::set<std::string> derived;
  for (const config::DerivedOption& d : config::derived_nic_options()) derived.insert(d.option);
  for (const verbs::BackendDescription& b : verbs::builtin_backends()) {
    std::string toml = fmt::format("[[nic]]\nname = \"n0\"\nbackend = \"{}\"\n{}", b.name,
                                   b.caps.needs_address ? "address = \"127.0.0.1\"\n" : "device = \"mlx5_0\"\n");
    std::map<std::string, verbs::OptionValue> want;
    for (const verbs::OptionSpec& spec : b.options) {
      if (derived.count(spec.name)) continue;
      const std::string v = other_value(spec);
      ASSERT_FALSE(v.empty()) << b.name << "." << spec.name << ": teach other_value a valid non-default value";
      toml += spec.name + " = " + v + "\n";
      want[spec.name] = parsed_value(v);
    }
    const config::LoadResult r = config::load_string(toml, "nic.toml", {.check_files = false});
    ASSERT_TRUE(r.ok()) << b.name << ": " << (r.errors.empty() ? "" : r.errors[0].to_string()) << "\n" << toml;
    const verbs::BackendInfo info{b.name, b.caps, b.options, nullptr, nullptr, nullptr, nullptr};
    const verbs::DeviceConfig dc = device_config_for(r.config.nics.at(0), r.config, &info);
    for (const auto& [name, value] : want)
      EXPECT_EQ(option(dc, name), value) << b.name << "." << name << " does not reach the backend";
  }
}

}  // namespace
}  // namespace rdmad::daemon
