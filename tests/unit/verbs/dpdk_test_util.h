#pragma once
// The dpdk instances of the backend-parameterised verbs tests. A test's dpdk devices are joined two
// by two in the order it opens them: instance "dpdk" by net_memif (the first of a pair the server
// on a socket of its own, the second its client), instance "dpdk_af_packet" by net_af_packet on a
// veth pair the test creates (root only) and removes when the next test starts or the process
// ends. Each pair is a link of its own: 10.77.<pair>.1 and .2 (fd00:77:<pair>::1 and ::2 for an
// IPv6 config), MACs resolved by ARP/ND. The EAL starts once per process, with the defaults.
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "rdmad/verbs/device.h"
#include "rdmad/verbs/registry.h"
#include "support/temp_dir.h"
#include "veth_net.h"

namespace rdmad::verbs::test {

inline bool is_dpdk_instance(const std::string& name) { return name == "dpdk" || name == "dpdk_af_packet"; }

struct DpdkTestLinks {
  rdmad::test::TempDir dir;       // the memif sockets
  std::string test;    // the test the devices below were opened for
  int opened = 0;      // dpdk devices that test opened
  int vdevs = 0;       // client and af_packet vdev names this process used (each once)
  const Device* first = nullptr;  // the first device of the pair being opened
  std::vector<std::unique_ptr<VethPair>> veths;  // that test's
};

inline DpdkTestLinks& dpdk_links() {
  static DpdkTestLinks links;
  return links;
}

/// The config of the running test's next device of `instance`, from `base` (soft_config()'s);
/// nullopt with *skip_reason where the instance cannot run here.
inline std::optional<DeviceConfig> dpdk_test_config(const std::string& instance, const DeviceConfig& base,
                                                    std::string* skip_reason) {
  DpdkTestLinks& l = dpdk_links();
  const ::testing::TestInfo* info = ::testing::UnitTest::GetInstance()->current_test_info();
  const std::string test = info != nullptr ? std::string(info->test_suite_name()) + "." + info->name() : "";
  if (test != l.test) {  // the previous test's devices are gone: so may its links be
    l.test = test;
    l.opened = 0;
    l.first = nullptr;
    l.veths.clear();
  }
  const int pair = l.opened / 2;
  const bool second = l.opened % 2 == 1;
  DeviceConfig c = base;
  c.backend_options.erase("udp_port");  // soft's 0 (ephemeral) means nothing on a link of its own
  const bool v6 = base.address.find(':') != std::string::npos;
  c.address = v6 ? "fd00:77:" + std::to_string(pair) + "::" + (second ? "2" : "1")
                 : "10.77." + std::to_string(pair) + "." + (second ? "2" : "1");
  const std::string vdev = std::to_string(l.vdevs);
  if (instance == "dpdk") {
    // A memif server port outlives its NIC (dpdk_port.cc): pair k of every test opens server k
    // again, so a process keeps as many as one test has pairs, not one per test (32 ports at most).
    const std::string socket = ",socket=" + l.dir.path() + "/server" + std::to_string(pair) + ".sock,socket-abstract=no,id=0";
    c.backend_options["devargs"] = second ? "net_memif" + vdev + ",role=client" + socket
                                          : "net_memifs" + std::to_string(pair) + ",role=server" + socket;
  } else {
    if (!second) {
      auto veth = VethPair::create(skip_reason);
      if (!veth) return std::nullopt;
      l.veths.push_back(std::move(veth));
    }
    const VethPair& v = *l.veths.back();
    c.backend_options["devargs"] = "net_af_packet" + vdev + ",iface=" + (second ? v.b() : v.a()) +
                                   ",framesz=4352,blocksz=69632,framecnt=512";
  }
  c.backend_options["mtu"] = 9000;  // memif has no MTU; the veths have 9000
  c.backend_options["mbufs"] = 4095;
  ++l.opened;
  ++l.vdevs;
  return c;
}

/// Waits until `dev`'s link is up (a memif client connects to its server asynchronously).
inline bool wait_link_up(const Device& dev, std::chrono::milliseconds timeout = std::chrono::milliseconds(5000)) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    auto p = dev.query_port(1);
    if (p.ok() && p.value().state == PortState::kActive) return true;
    std::this_thread::yield();
  }
  return false;
}

}  // namespace rdmad::verbs::test
