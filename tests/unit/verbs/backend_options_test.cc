// Backend options: each backend's table is what open() takes, checked there (unknown keys, wrong
// types, values out of range, each error naming the backend and the option), and what it sets
// reaches the NIC.
#include "rdmad/verbs/backend_options.h"

#include <gtest/gtest.h>

#include <set>

#include "rdmad/verbs/builtin_backends.h"
#include "verbs_test_util.h"

namespace rdmad::verbs {
namespace {

const OptionSpec kPort = OptionSpec::integer("udp_port", 4791, 0, 65535, "a port");
const OptionSpec kOn = OptionSpec::boolean("cc_enabled", true, "on or off");
const OptionSpec kAddr = OptionSpec::text(
    "relay_address", "", "an address", [](const std::string& s) { return s.empty() || s == "10.0.0.1" ? "" : "10.0.0.1"; },
    "10.0.0.1, or empty");

TEST(BackendOptions, DefaultsFillWhatIsNotGiven) {
  const std::vector<OptionSpec> table = {kPort, kOn, kAddr};
  auto v = OptionValues::parse("soft", table, {{"udp_port", int64_t{7}}});
  ASSERT_TRUE(v.ok()) << v.status().message();
  EXPECT_EQ(v.value().integer("udp_port"), 7);
  EXPECT_TRUE(v.value().boolean("cc_enabled"));
  EXPECT_EQ(v.value().text("relay_address"), "");
}

TEST(BackendOptions, UnknownKeyWrongTypeAndOutOfRangeNameTheBackendAndTheOption) {
  const std::vector<OptionSpec> table = {kPort, kOn, kAddr};
  auto unknown = OptionValues::parse("soft", table, {{"udp_prot", int64_t{7}}});
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.status().message(),
            "backend soft has no option 'udp_prot' (its options: udp_port, cc_enabled, relay_address)");
  auto type = OptionValues::parse("soft", table, {{"cc_enabled", int64_t{1}}});
  ASSERT_FALSE(type.ok());
  EXPECT_EQ(type.status().message(), "backend soft option cc_enabled: invalid value 1: expected boolean (true or false)");
  auto range = OptionValues::parse("soft", table, {{"udp_port", int64_t{65536}}});
  ASSERT_FALSE(range.ok());
  EXPECT_EQ(range.status().message(),
            "backend soft option udp_port: invalid value 65536: expected an integer in [0, 65535]");
  auto text = OptionValues::parse("soft", table, {{"relay_address", std::string("nowhere")}});
  ASSERT_FALSE(text.ok());
  EXPECT_EQ(text.status().message(), "backend soft option relay_address: invalid value \"nowhere\": expected 10.0.0.1");
}

// What configuration sees (builtin_backends) is what the registry opens with.
TEST(BackendOptions, BuiltinDescriptionsCarryTheRegisteredTables) {
  BackendRegistry reg;
  register_builtin_backends(reg);
  for (const BackendDescription& d : builtin_backends()) {
    const BackendInfo* info = reg.find(d.name);
    ASSERT_NE(info, nullptr) << d.name;
    ASSERT_EQ(info->options.size(), d.options.size()) << d.name;
    std::set<std::string> names;
    for (size_t i = 0; i < d.options.size(); ++i) {
      EXPECT_EQ(info->options[i].name, d.options[i].name) << d.name;
      EXPECT_EQ(info->options[i].default_value, d.options[i].default_value) << d.name << "." << d.options[i].name;
      EXPECT_TRUE(names.insert(d.options[i].name).second) << d.name << " declares " << d.options[i].name << " twice";
      EXPECT_FALSE(d.options[i].help.empty()) << d.name << "." << d.options[i].name << " has no help";
      // Each default is valid by its own entry.
      EXPECT_EQ(check_option(d.options[i], d.options[i].default_value), "") << d.name << "." << d.options[i].name;
    }
  }
}

// open() refuses an option its table does not have, before it touches anything (rdma_core here
// has no device at all: the option is named, not the missing device).
TEST(BackendOptions, EveryBuiltinBackendRefusesAnUnknownOptionAtOpen) {
  BackendRegistry reg;
  register_builtin_backends(reg);
  for (const BackendDescription& d : builtin_backends()) {
    DeviceConfig c = test::soft_config();
    c.name = "opt0";
    c.backend_options = {{"no_such_knob", int64_t{1}}};
    auto dev = reg.open(d.name, c);
    ASSERT_FALSE(dev.ok()) << d.name;
    EXPECT_NE(dev.status().message().find("backend " + d.name + " has no option 'no_such_knob'"), std::string::npos)
        << d.name << ": " << dev.status().message();
  }
  DeviceConfig c = test::soft_config();
  c.backend_options["source_ports"] = 65;
  auto dev = reg.open("soft", c);
  ASSERT_FALSE(dev.ok());
  EXPECT_NE(dev.status().message().find("source_ports: invalid value 65"), std::string::npos) << dev.status().message();
  DeviceConfig rc;
  rc.backend_options["port"] = 0;
  auto rdev = reg.open("rdma_core", rc);
  ASSERT_FALSE(rdev.ok());
  EXPECT_NE(rdev.status().message().find("backend rdma_core option port: invalid value 0"), std::string::npos)
      << rdev.status().message();
}

// An option set in DeviceConfig reaches the NIC: the soft port reports the line rate it was given.
TEST(BackendOptions, SoftLineRateReachesThePort) {
  DeviceConfig c = test::soft_config();
  c.name = "rate0";
  c.backend_options["line_rate_mbps"] = 25000;
  auto dev = test::registry().open("soft", c);
  ASSERT_TRUE(dev.ok()) << dev.status().message();
  auto port = dev.value()->query_port(1);
  ASSERT_TRUE(port.ok());
  EXPECT_EQ(port.value().speed_mbps, 25000u);
  c.backend_options.erase("line_rate_mbps");
  auto plain = test::registry().open("soft", c);
  ASSERT_TRUE(plain.ok()) << plain.status().message();
  EXPECT_EQ(plain.value()->query_port(1).value().speed_mbps, 100000u) << "the table's default";
}

}  // namespace
}  // namespace rdmad::verbs
