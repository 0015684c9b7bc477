// The [[nic]] backend key accepts exactly the backends the daemon registers: no name the registry
// lacks (backend = "dpdk" was accepted and then failed at open in builds without it), none it has
// left out. And the capabilities the config loader checks a [[nic]] against are those each backend
// advertises.
#include <string>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "rdmad/config/field.h"
#include "rdmad/verbs/builtin_backends.h"
#include "rdmad/verbs/registry.h"

namespace rdmad::daemon {
namespace {

TEST(BackendNames, ConfigAcceptsExactlyTheRegisteredBackends) {
  verbs::BackendRegistry registry;
  verbs::register_builtin_backends(registry);
  const config::Field* backend = nullptr;
  for (const config::Field& f : config::fields())
    if (f.path() == "nic.backend") backend = &f;
  ASSERT_NE(backend, nullptr);
  EXPECT_EQ(backend->expected, fmt::format("one of {}", fmt::join(registry.names(), ", ")));
  for (const std::string& name : registry.names())
    EXPECT_EQ(backend->validate(config::Value(name)), "") << name;
  // dpdk is a backend exactly where the build has DPDK (RDMAD_WITH_DPDK); elsewhere naming it is a
  // config error at load, not a failure at open.
  const std::string dpdk = backend->validate(config::Value(std::string("dpdk")));
  if (RDMAD_BUILT_WITH_DPDK) {
    EXPECT_NE(registry.find("dpdk"), nullptr) << "built with DPDK, yet no dpdk backend is registered";
    EXPECT_EQ(dpdk, "");
  } else {
    EXPECT_EQ(registry.find("dpdk"), nullptr);
    EXPECT_NE(dpdk, "") << "no dpdk backend is registered, yet the config takes it";
  }
}

TEST(BackendNames, ConfigChecksTheCapabilitiesTheRegistryAdvertises) {
  verbs::BackendRegistry registry;
  verbs::register_builtin_backends(registry);
  ASSERT_EQ(verbs::builtin_backends().size(), registry.names().size());
  for (const verbs::BackendDescription& d : verbs::builtin_backends()) {
    const verbs::BackendInfo* b = registry.find(d.name);
    ASSERT_NE(b, nullptr) << d.name;
    EXPECT_EQ(d.caps.needs_address, b->caps.needs_address) << d.name;
    EXPECT_EQ(d.caps.address_selects_gid, b->caps.address_selects_gid) << d.name;
    EXPECT_EQ(d.caps.opens_named_device, b->caps.opens_named_device) << d.name;
    EXPECT_EQ(d.caps.sysfs_ports, b->caps.sysfs_ports) << d.name;
    EXPECT_EQ(d.caps.retries_failed_open, b->caps.retries_failed_open) << d.name;
    EXPECT_EQ(d.caps.registration_faults_in_pages, b->caps.registration_faults_in_pages) << d.name;
  }
}

}  // namespace
}  // namespace rdmad::daemon
