// The ibverbs QP state machine and the registry/capability contract.
#include <gtest/gtest.h>

#include <sys/mman.h>
#include <unistd.h>

#include "verbs_test_util.h"

namespace rdmad::verbs::test {
namespace {

class StateTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    std::string skip;
    auto d = open_device(GetParam(), soft_config(), &skip);
    if (!d) GTEST_SKIP() << skip;
    make_endpoint(e_, std::move(d));
  }
  Endpoint e_;
};

TEST_P(StateTest, IllegalTransitionsAreRejected) {
  QpAttr a;
  a.state = QpState::kInit;
  // ibverbs' required attributes (types.h): ib_core refuses RESET → INIT without access flags on
  // every device, so the interface does too.
  EXPECT_FALSE(e_.qp->modify(a, kQpState).ok()) << "RESET → INIT needs the access flags";
  EXPECT_EQ(e_.qp->query().state, QpState::kReset);
  a.state = QpState::kRtr;
  EXPECT_FALSE(e_.qp->modify(a, kQpState).ok());  // RESET → RTR
  a.state = QpState::kRts;
  EXPECT_FALSE(e_.qp->modify(a, kQpState).ok());  // RESET → RTS
  a.state = QpState::kInit;
  ASSERT_TRUE(e_.qp->modify(a, kQpState | kQpAccessFlags).ok());
  EXPECT_EQ(e_.qp->query().state, QpState::kInit);
  a.state = QpState::kRtr;
  EXPECT_FALSE(e_.qp->modify(a, kQpState).ok()) << "INIT → RTR needs the path attributes";
  a.path_mtu_bytes = 1000;
  a.dest_gid = *Gid::from_ip("127.0.0.1");
  EXPECT_FALSE(e_.qp->modify(a, kQpState | kQpPathMtu | kQpDestQpn | kQpRqPsn | kQpAv).ok()) << "bad MTU";
  EXPECT_EQ(e_.qp->query().state, QpState::kInit);
  a.state = QpState::kRts;
  EXPECT_FALSE(e_.qp->modify(a, kQpState | kQpSqPsn).ok());  // INIT → RTS
}

TEST_P(StateTest, PostSendOutsideRtsFails) {
  SendWr w;
  EXPECT_FALSE(e_.qp->post_send({&w, 1}).ok());
  QpAttr a;
  a.state = QpState::kInit;
  ASSERT_TRUE(e_.qp->modify(a, kQpState | kQpAccessFlags).ok());
  EXPECT_FALSE(e_.qp->post_send({&w, 1}).ok());
}

TEST_P(StateTest, ErrorFlushesPostedReceives) {
  QpAttr a;
  a.state = QpState::kInit;
  ASSERT_TRUE(e_.qp->modify(a, kQpState | kQpAccessFlags).ok());
  RecvWr r[3];
  for (int i = 0; i < 3; ++i) r[i].wr_id = 10 + i;
  ASSERT_TRUE(e_.qp->post_recv(r).ok());
  a.state = QpState::kError;
  ASSERT_TRUE(e_.qp->modify(a, kQpState).ok());
  auto wcs = wait_completions(*e_.rcq, 3);
  ASSERT_EQ(wcs.size(), 3u);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(wcs[i].wr_id, 10u + i);
    EXPECT_EQ(wcs[i].status, WcStatus::kWrFlushed);
  }
  a.state = QpState::kReset;
  ASSERT_TRUE(e_.qp->modify(a, kQpState).ok());
  EXPECT_EQ(e_.qp->query().state, QpState::kReset);
}

// The send queue takes as many WRs as the QP says it holds (QpAttr::cap, at least what was asked:
// a device may round up, rxe to 2^n - 1), and then says kNoResource with the number taken.
TEST_P(StateTest, SendQueueFullIsNoResource) {
  const QpCap cap = e_.qp->query().cap;
  EXPECT_GE(cap.max_send_wr, 256u) << "make_endpoint asked for 256";
  EXPECT_GE(cap.max_recv_wr, 256u);
  Endpoint peer;
  std::string skip;
  make_endpoint(peer, open_device(GetParam(), soft_config(), &skip));
  ASSERT_TRUE(peer.dev) << "the second device did not open: " << skip;
  ConnectOptions o;
  connect_pair(e_, peer, o);
  EXPECT_EQ(e_.qp->query().cap.max_send_wr, cap.max_send_wr) << "the depth changed on connect";
  // RNR-stalled sends (no receive posted) keep the queue full.
  std::vector<SendWr> wrs(cap.max_send_wr + 44);
  for (auto& w : wrs) w.opcode = WrOpcode::kSend;
  size_t posted = 0;
  Status st = e_.qp->post_send(wrs, &posted);
  EXPECT_EQ(st.code(), StatusCode::kNoResource);
  EXPECT_EQ(posted, cap.max_send_wr);
}

INSTANTIATE_TEST_SUITE_P(Verbs, StateTest, ::testing::Values("soft", "rdma_core", "dpdk", "dpdk_af_packet"),
                         [](const ::testing::TestParamInfo<std::string>& i) { return i.param; });

TEST(Registry, UnknownBackendIsAnError) {
  auto r = registry().open("nosuch", DeviceConfig{});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("nosuch"), std::string::npos);
  EXPECT_NE(registry().find("soft"), nullptr);
}

TEST(Registry, SoftBadAddressIsAnError) {
  auto r = registry().open("soft", soft_config("not-an-ip"));
  EXPECT_FALSE(r.ok());
}

// Every advertised capability of the soft backend behaves as advertised.
TEST(Capabilities, SoftMatchesBehaviour) {
  const BackendInfo* b = registry().find("soft");
  ASSERT_NE(b, nullptr);
  const Capabilities& caps = b->caps;
  Endpoint e;
  std::string skip;
  make_endpoint(e, open_device("soft", soft_config(), &skip));
  auto dm = e.pd->reg_dmabuf_mr(-1, 0, 4096, 0, kAccessLocalWrite);
  EXPECT_EQ(dm.status().code(), caps.dmabuf_mr ? StatusCode::kOk : StatusCode::kNotSupported);
  if (caps.ipv6) {
    std::string why;
    auto d6 = open_device("soft", soft_config("::1"), &why);
    if (!d6) GTEST_SKIP() << "no IPv6 loopback here: " << why;
    EXPECT_EQ(d6->query_port(1).value().gid.to_ip_string(), "::1");
  }
  EXPECT_TRUE(caps.software_cc);
  QpInitAttr ia;
  ia.send_cq = e.scq.get();
  ia.recv_cq = e.rcq.get();
  ia.max_send_wr = caps.max_qp_wr + 1;
  EXPECT_FALSE(e.pd->create_qp(ia).ok()) << "max_qp_wr + 1 accepted";
  ia.max_send_wr = 4;
  ia.max_recv_wr = 4;
  std::vector<std::unique_ptr<QueuePair>> qps;
  for (uint32_t i = 1; i < caps.max_qp; ++i) {  // make_endpoint already made one
    auto q = e.pd->create_qp(ia);
    ASSERT_TRUE(q.ok()) << "qp " << i << ": " << q.status().message();
    qps.push_back(std::move(q.value()));
  }
  auto over = e.pd->create_qp(ia);
  EXPECT_EQ(over.status().code(), StatusCode::kNoResource);
  EXPECT_FALSE(e.dev->create_cq(caps.max_cq_depth + 1).ok());
}

// Pages of [p, p + bytes) that are resident (mincore).
size_t resident_pages(void* p, size_t bytes) {
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  std::vector<unsigned char> v((bytes + page - 1) / page);
  if (mincore(p, bytes, v.data()) != 0) return 0;
  size_t n = 0;
  for (unsigned char c : v) n += c & 1;
  return n;
}

// The capabilities that say how the daemon treats the soft backend's NICs behave as advertised.
TEST(Capabilities, SoftHandlingMatchesBehaviour) {
  const BackendInfo* b = registry().find("soft");
  ASSERT_NE(b, nullptr);
  const Capabilities& caps = b->caps;
  // registration_faults_in_pages: registering leaves untouched pages untouched.
  EXPECT_FALSE(caps.registration_faults_in_pages);
  Endpoint e;
  std::string skip;
  DeviceConfig named = soft_config();
  named.name = "rail-x";
  make_endpoint(e, open_device("soft", named, &skip));
  const size_t bytes = 64 * static_cast<size_t>(sysconf(_SC_PAGESIZE));
  void* mem = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(mem, MAP_FAILED);
  {
    auto mr = e.pd->reg_mr(mem, bytes, kAccessLocalWrite);
    ASSERT_TRUE(mr.ok()) << mr.status().message();
    EXPECT_EQ(resident_pages(mem, bytes), 0u) << "the soft backend faulted pages in";
  }
  munmap(mem, bytes);
  // opens_named_device: false, the NIC is made and takes the name it is given.
  EXPECT_FALSE(caps.opens_named_device);
  EXPECT_EQ(e.dev->info().name, "rail-x");
  EXPECT_EQ(e.dev->info().port_count, 1);
  // needs_address: without one there is nothing to bind.
  EXPECT_TRUE(caps.needs_address);
  EXPECT_FALSE(registry().open("soft", soft_config("")).ok());
  // address_selects_gid: false, the GID is the address itself, and nothing moves it.
  EXPECT_FALSE(caps.address_selects_gid);
  EXPECT_EQ(e.dev->query_port(1).value().gid.to_ip_string(), "127.0.0.1");
  EXPECT_FALSE(b->watch_addresses);
  // sysfs_ports: false, the host has no ports of this backend.
  EXPECT_FALSE(caps.sysfs_ports);
  ASSERT_TRUE(b->discover);
  auto host = b->discover(HostScan{});
  ASSERT_TRUE(host.ok());
  EXPECT_TRUE(host.value().ports.empty());
  // retries_failed_open: false, an open that failed fails again (a wrong configuration).
  EXPECT_FALSE(caps.retries_failed_open);
  EXPECT_FALSE(registry().open("soft", soft_config("192.0.2.1")).ok());
  EXPECT_FALSE(registry().open("soft", soft_config("192.0.2.1")).ok());
}

}  // namespace
}  // namespace rdmad::verbs::test
