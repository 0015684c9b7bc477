// A client's tenant from its /proc/<pid>/cgroup (daemon/clients/src/tenant.cc), on the shapes the
// kubelet's two cgroup drivers make (tests/data/cgroup, README.md there).
#include "rdmad/daemon/clients/tenant.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "server_fixture.h"

namespace rdmad::clients {
namespace {

namespace fs = std::filesystem;
const fs::path kFixtures = fs::path(RDMAD_SOURCE_DIR) / "tests/data/cgroup";

std::string fixture(const std::string& name) {
  std::ifstream in(kFixtures / name);
  std::stringstream s;
  s << in.rdbuf();
  EXPECT_FALSE(s.str().empty()) << name;
  return s.str();
}

TEST(Tenant, PodUidFromEveryDriverShape) {
  EXPECT_EQ(pod_uid_of_cgroup_file(fixture("systemd_v2_burstable")), "6f1e5b8a-3c2d-4e9f-8a7b-1c2d3e4f5a6b");
  EXPECT_EQ(pod_uid_of_cgroup_file(fixture("systemd_v2_guaranteed")), "a1b2c3d4-e5f6-4711-8899-aabbccddeeff");
  EXPECT_EQ(pod_uid_of_cgroup_file(fixture("cgroupfs_v1_besteffort")), "0c3f2b1a-9e8d-4c7b-a6f5-e4d3c2b1a098");
  EXPECT_EQ(pod_uid_of_cgroup_file(fixture("cgroupfs_v2_guaranteed")), "5d6e7f80-9192-4a3b-8c4d-5e6f708192a3");
  EXPECT_EQ(pod_uid_of_cgroup_file(fixture("namespaced_v2")), "77aa88bb-99cc-4dde-8eff-001122334455");
}

TEST(Tenant, NoPodOutsideKubepods) {
  EXPECT_EQ(pod_uid_of_cgroup_file(fixture("host_session")), std::nullopt);
  EXPECT_EQ(pod_uid_of_cgroup_file(fixture("decoy_not_kubepods")), std::nullopt);
  EXPECT_EQ(pod_uid_of_cgroup_file(""), std::nullopt);
  EXPECT_EQ(pod_uid_of_cgroup_file("garbage without colons\n"), std::nullopt);
}

TEST(Tenant, MalformedPodNamesAreNotPods) {
  EXPECT_EQ(pod_uid_of_cgroup_path("/kubepods/burstable/podnot-a-uid/abc"), std::nullopt);
  EXPECT_EQ(pod_uid_of_cgroup_path("/kubepods/burstable/pod0C3F2B1A-9E8D-4C7B-A6F5-E4D3C2B1A098/x"), std::nullopt);
  EXPECT_EQ(pod_uid_of_cgroup_path("/kubepods/burstable/pod0c3f2b1a-9e8d-4c7b-a6f5-e4d3c2b1a0981/x"), std::nullopt);
  EXPECT_EQ(pod_uid_of_cgroup_path("/kubepods.slice/kubepods-pod0c3f2b1a_9e8d_4c7b_a6f5.slice"), std::nullopt);
  // A pod-like component under a non-pod slice whose name merely starts like one.
  EXPECT_EQ(pod_uid_of_cgroup_path("/system.slice/kubepods-x.service"), std::nullopt);
}

TEST(Tenant, OfProcessReadsTheProcRootAndRefusesAGoneProcess) {
  test::TempDir proc;
  fs::create_directories(fs::path(proc.path()) / "4242");
  fs::copy_file(kFixtures / "systemd_v2_burstable", fs::path(proc.path()) / "4242/cgroup");
  fs::create_directories(fs::path(proc.path()) / "4243");
  fs::copy_file(kFixtures / "host_session", fs::path(proc.path()) / "4243/cgroup");
  auto pod = tenant_of_process(proc.path(), 4242, 1000);
  ASSERT_TRUE(pod.ok()) << pod.error().message;
  EXPECT_EQ(pod.value(), Tenant::of_pod("6f1e5b8a-3c2d-4e9f-8a7b-1c2d3e4f5a6b"));
  EXPECT_EQ(pod.value().name(), "pod 6f1e5b8a-3c2d-4e9f-8a7b-1c2d3e4f5a6b");
  auto host = tenant_of_process(proc.path(), 4243, 1000);
  ASSERT_TRUE(host.ok());
  EXPECT_EQ(host.value(), Tenant::of_uid(1000));
  EXPECT_EQ(host.value().name(), "uid 1000");
  // The process exited between connect and accept: refused, never counted as its uid.
  auto gone = tenant_of_process(proc.path(), 4244, 1000);
  ASSERT_FALSE(gone.ok());
  EXPECT_NE(gone.error().message.find("pid 4244"), std::string::npos) << gone.error().message;
  EXPECT_NE(gone.error().message.find("exited"), std::string::npos) << gone.error().message;
  // Outside the daemon's pid namespace SO_PEERCRED says pid 0: the uid is all there is.
  auto unseen = tenant_of_process(proc.path(), 0, 1000);
  ASSERT_TRUE(unseen.ok());
  EXPECT_EQ(unseen.value(), Tenant::of_uid(1000));
}

TEST(Tenant, OfThisProcessOnTheRealProc) {
  auto me = tenant_of_process("/proc", ::getpid(), ::getuid());
  ASSERT_TRUE(me.ok()) << me.error().message;
}

}  // namespace
}  // namespace rdmad::clients
