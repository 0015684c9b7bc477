// The [[nic]] backend key accepts exactly the backends the daemon registers: no name the registry
// lacks (backend = "dpdk" was accepted and then failed at open), none it has left out.
#include <string>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "rdmad/config/field.h"
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
  EXPECT_NE(backend->validate(config::Value(std::string("dpdk"))), "") << "no dpdk backend is registered";
}

}  // namespace
}  // namespace rdmad::daemon
