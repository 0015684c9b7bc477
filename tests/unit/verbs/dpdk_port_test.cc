// The dpdk backend's own behaviour, beyond what the backend-parameterised verbs tests check: two
// ports joined by net_memif move datagrams with every IP field the ICRC needs, resolve each
// other by ARP, hand packets to the queue of their QP and say truthfully what they do; open
// errors name the option; the caller's CPU affinity survives the EAL; an idle NIC costs little CPU.
#include <gtest/gtest.h>
#include <pthread.h>
#include <sched.h>

#include <thread>

#include "dpdk_options.h"
#include "dpdk_port.h"
#include "rdmad/roce/packet.h"
#include "verbs_test_util.h"

namespace rdmad::verbs::dpdk {
namespace {

using test::Endpoint;

// Two ports on one memif link: a the server at 10.79.0.1, b the client at 10.79.0.2.
struct MemifPorts {
  std::unique_ptr<DpdkPort> a, b;

  static DpdkPortConfig config(int side, const std::string& socket, const std::string& tag) {
    DpdkPortConfig c;
    c.address = side == 0 ? "10.79.0.1" : "10.79.0.2";
    c.devargs = "net_memif" + tag + std::to_string(side) + ",role=" + (side == 0 ? "server" : "client") +
                ",socket=" + socket + ",socket-abstract=no,id=0";
    c.eal_args = "";
    c.mbufs = 2047;
    c.descriptors = 256;
    c.mtu = 9000;
    return c;
  }
  void open(const engine::PortSteering& steering, const std::function<void(DpdkPortConfig&)>& change = {}) {
    static test::DpdkTestLinks& links = test::dpdk_links();
    const std::string tag = std::to_string(links.vdevs++) + "_";
    const std::string socket = links.dir.path() + "/ports" + tag + ".sock";
    for (int side = 0; side < 2; ++side) {
      DpdkPortConfig c = config(side, socket, tag);
      if (change) change(c);
      auto p = DpdkPort::open(c, steering);
      ASSERT_TRUE(p.ok()) << p.status().message();
      (side == 0 ? a : b) = std::move(p.value());
    }
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (!(a->link_up() && b->link_up()) && std::chrono::steady_clock::now() < deadline) std::this_thread::yield();
    ASSERT_TRUE(a->link_up() && b->link_up()) << "memif link not up";
  }
};

// A WRITE-only packet of `payload` to QP `dest_qpn`, committed on `q` towards path `path`.
void send_write(engine::PortQueue& q, uint32_t path, const roce::IpUdpInfo& ip, uint32_t dest_qpn,
                std::span<const uint8_t> payload, uint8_t tos) {
  roce::Packet pkt;
  pkt.bth.opcode = roce::Opcode::kWriteOnly;
  pkt.bth.dest_qp = dest_qpn;
  pkt.reth.dma_length = static_cast<uint32_t>(payload.size());
  pkt.payload = payload;
  const std::span<uint8_t> slot = q.tx_slot();
  const roce::GatherEncoding e = roce::encode_datagram_gather(ip, pkt, slot);
  ASSERT_GT(e.head_bytes, 0u);
  q.tx_commit(path, e.head_bytes, payload, e.tail_bytes, tos);
  q.tx_flush();
}

// Sends until `to` receives a packet (the first ones go while ARP resolves the peer), pumping both
// queues so each answers and learns; returns the packets `to` received, copied.
struct Received {
  std::vector<uint8_t> data;
  roce::IpUdpInfo ip;
};
std::vector<Received> deliver(engine::PortQueue& from, engine::PortQueue& from_rx, uint32_t path,
                              const roce::IpUdpInfo& ip, uint32_t dest_qpn, std::span<const uint8_t> payload,
                              engine::PortQueue& to, uint8_t tos = roce::kEcnEct0) {
  std::vector<Received> got;
  engine::RxPacket rx[64];
  engine::RxStats stats;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  auto next_send = std::chrono::steady_clock::now();
  while (got.empty() && std::chrono::steady_clock::now() < deadline) {
    if (std::chrono::steady_clock::now() >= next_send) {
      send_write(from, path, ip, dest_qpn, payload, tos);
      next_send += std::chrono::milliseconds(20);  // past the ARP back-off's first retry
    }
    from_rx.receive(rx, &stats);  // ARP replies
    const size_t n = to.receive(rx, &stats);
    for (size_t i = 0; i < n; ++i) got.push_back({{rx[i].data.begin(), rx[i].data.end()}, rx[i].ip});
  }
  return got;
}

class DpdkPortTest : public ::testing::TestWithParam<bool> {};

TEST_P(DpdkPortTest, MemifPortsCarryDatagramsWithTheirIpFields) {
  const bool zero_copy = GetParam();
  MemifPorts p;
  ASSERT_NO_FATAL_FAILURE(p.open({0xFF, 1}, [&](DpdkPortConfig& c) { c.zero_copy_tx = zero_copy; }));
  EXPECT_TRUE(p.a->offloads().ip_id_visible);
  EXPECT_EQ(p.a->offloads().payload_in_place, zero_copy) << "memif copies inside tx_burst: in place unless turned off";
  EXPECT_EQ(p.a->link_mtu(), 4096u) << "mtu 9000";
  EXPECT_EQ(p.a->describe().rfind("dpdk net_memif", 0), 0u) << p.a->describe();
  roce::IpUdpInfo ip;
  auto path = p.a->queue(0).open_path({p.b->local_ip(), p.b->udp_port(), 0x11, 0x22}, &ip);
  ASSERT_TRUE(path.ok()) << path.status().message();
  EXPECT_EQ(ip.src, p.a->local_ip());
  EXPECT_EQ(ip.src_port, source_port_for(0x11, 0x22));
  std::vector<uint8_t> payload(3000);
  test::fill_pattern(payload, 5);
  const auto got = deliver(p.a->queue(0), p.a->queue(0), path.value(), ip, 0x22, payload, p.b->queue(0), 0x8b);
  ASSERT_FALSE(got.empty()) << "nothing arrived in 5 s";
  const Received& r = got[0];
  EXPECT_EQ(r.ip.src, p.a->local_ip());
  EXPECT_EQ(r.ip.dst, p.b->local_ip());
  EXPECT_EQ(r.ip.src_port, ip.src_port);
  EXPECT_EQ(r.ip.dst_port, 4791);
  EXPECT_EQ(r.ip.tos, 0x8b) << "DSCP and ECN as committed";
  EXPECT_EQ(r.ip.ttl, 64);
  EXPECT_TRUE(r.ip.ip_id_known);
  EXPECT_EQ(r.ip.ip_id, 0);
  EXPECT_TRUE(r.ip.dont_fragment);
  roce::Packet pkt;
  ASSERT_EQ(roce::decode_datagram(r.data, &r.ip, &pkt), roce::DecodeError::kOk);
  EXPECT_TRUE(std::equal(payload.begin(), payload.end(), pkt.payload.begin(), pkt.payload.end()));
  const PortCounters ca = p.a->counters();
  EXPECT_GE(ca.neighbor_requests, 1u) << "a resolved b by ARP";
  EXPECT_GE(ca.unresolved_drops, 1u) << "the first packet left before the reply came";
  EXPECT_GE(p.b->counters().neighbor_replies, 1u);
}

INSTANTIATE_TEST_SUITE_P(Dpdk, DpdkPortTest, ::testing::Values(true, false),
                         [](const ::testing::TestParamInfo<bool>& i) { return i.param ? "InPlace" : "Copied"; });

// RSS cannot steer by QP: the queue a packet arrives on hands it to the queue that owns its QP.
TEST(DpdkPortQueues, PacketsReachTheQueueOfTheirQp) {
  MemifPorts p;
  const engine::PortSteering steering{0xFF, 2};
  ASSERT_NO_FATAL_FAILURE(p.open(steering));
  ASSERT_EQ(p.b->queue_count(), 2u);
  std::vector<uint8_t> payload(512, 7);
  for (uint32_t qpn : {0x1200u, 0x1301u}) {  // owned by b's queue 0, then 1
    const uint32_t owner = steering.queue_of(qpn);
    roce::IpUdpInfo ip;
    auto path = p.a->queue(0).open_path({p.b->local_ip(), 4791, 0x77, qpn}, &ip);
    ASSERT_TRUE(path.ok());
    // memif: what a's queue 0 sends arrives on b's queue 0, whoever owns the QP.
    engine::RxPacket rx[64];
    engine::RxStats stats;
    std::vector<Received> got;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    auto next_send = std::chrono::steady_clock::now();
    while (got.empty() && std::chrono::steady_clock::now() < deadline) {
      if (std::chrono::steady_clock::now() >= next_send) {
        send_write(p.a->queue(0), path.value(), ip, qpn, payload, 2);
        next_send += std::chrono::milliseconds(20);
      }
      p.a->queue(0).receive(rx, &stats);
      if (owner != 0) {
        EXPECT_EQ(p.b->queue(0).receive(rx, &stats), 0u) << "queue 0 kept a packet of queue 1's QP";
      }
      const size_t n = p.b->queue(owner).receive(rx, &stats);
      for (size_t i = 0; i < n; ++i) got.push_back({{rx[i].data.begin(), rx[i].data.end()}, rx[i].ip});
    }
    ASSERT_FALSE(got.empty()) << "qpn " << std::hex << qpn << " never reached queue " << owner;
    EXPECT_EQ(datagram_dest_qpn(got[0].data), qpn);
  }
  EXPECT_EQ(p.b->counters().handoff_drops, 0u);
}

TEST(DpdkPortMtu, LinkMtuIsTheLargestRoceMtuThatFits) {
  EXPECT_EQ(roce_mtu_for_ip_mtu(1500, false), 1024u);
  EXPECT_EQ(roce_mtu_for_ip_mtu(9000, false), 4096u);
  EXPECT_EQ(roce_mtu_for_ip_mtu(4160, false), 4096u);
  EXPECT_EQ(roce_mtu_for_ip_mtu(4159, false), 2048u);
  EXPECT_EQ(roce_mtu_for_ip_mtu(4160, true), 2048u) << "IPv6's header is 20 bytes longer";
  EXPECT_EQ(roce_mtu_for_ip_mtu(576, false), 512u);
  EXPECT_EQ(roce_mtu_for_ip_mtu(575, false), 256u);
  MemifPorts p;
  ASSERT_NO_FATAL_FAILURE(p.open({0xFF, 1}, [](DpdkPortConfig& c) { c.mtu = 0; }));
  EXPECT_EQ(p.a->link_mtu(), 1024u) << "memif reports 1500";
}

// Every way an open can fail is an error that names the option, never an exit of the process.
TEST(DpdkOpen, ErrorsNameTheOption) {
  auto open = [](const std::string& address, BackendOptions options) {
    DeviceConfig c;
    c.address = address;
    c.backend_options = std::move(options);
    auto r = test::registry().open("dpdk", c);
    return r.ok() ? std::string() : r.status().message();
  };
  EXPECT_NE(open("10.0.0.1", {}).find("option devargs is required"), std::string::npos);
  EXPECT_NE(open("10.0.0.1", {{"devargs", "net_nosuch0"}}).find("option devargs"), std::string::npos);
  EXPECT_NE(open("10.0.0.1", {{"devargs", "net_memif_x,role=bogus"}}).find("option devargs"), std::string::npos);
  EXPECT_NE(open("10.0.0.1", {{"devargs", "net_null0"}, {"eal_args", "--no-huge -m 64"}}).find("option eal_args"),
            std::string::npos)
      << "one EAL per process: other arguments than it started with";
  EXPECT_NE(open("10.0.0.1", {{"devargs", "net_null0"}, {"neighbors", "10.0.0.2"}}).find("neighbors"),
            std::string::npos);
  EXPECT_NE(open("10.0.0.1", {{"devargs", "net_null0"}, {"gateway", "fd00::1"}}).find("option gateway"),
            std::string::npos);
  EXPECT_NE(open("10.0.0.1", {{"devargs", "net_null0"}, {"mac", "02:00"}}).find("mac"), std::string::npos);
  EXPECT_NE(open("not-an-ip", {{"devargs", "net_null0"}}).find("address"), std::string::npos);
  EXPECT_NE(open("10.0.0.1", {{"devargs", "net_null1"}, {"mbufs", int64_t{1} << 20}}).find("option mbufs"),
            std::string::npos)
      << "4.5 GiB of mbufs from the default 256 MiB";
  // After all that, a good port still opens, and one port is never two NICs.
  DeviceConfig good;
  good.address = "10.0.0.1";
  good.backend_options = {{"devargs", "net_null3"}};
  auto first = test::registry().open("dpdk", good);
  ASSERT_TRUE(first.ok()) << first.status().message();
  auto second = test::registry().open("dpdk", good);
  ASSERT_FALSE(second.ok());
  EXPECT_NE(second.status().message().find("already another dpdk nic's"), std::string::npos)
      << second.status().message();
}

// rte_eal_init pins its caller to the main lcore; the daemon's thread that opened the first NIC
// must keep the CPUs it had.
TEST(DpdkEal, OpeningLeavesTheCallersCpuAffinity) {
  cpu_set_t before, after;
  ASSERT_EQ(pthread_getaffinity_np(pthread_self(), sizeof before, &before), 0);
  std::string skip;
  Endpoint a;
  test::make_endpoint(a, test::open_device("dpdk", test::soft_config(), &skip));
  ASSERT_TRUE(a.dev) << skip;
  ASSERT_EQ(pthread_getaffinity_np(pthread_self(), sizeof after, &after), 0);
  EXPECT_TRUE(CPU_EQUAL(&before, &after)) << CPU_COUNT(&before) << " CPUs before, " << CPU_COUNT(&after) << " after";
}

// A polled queue (memif, af_packet: no rx interrupts) naps longer while nothing arrives, so an
// idle NIC does not burn the core it would busy-poll.
TEST(DpdkIdle, IdleNicCostsLittleCpu) {
  for (const char* instance : {"dpdk", "dpdk_af_packet"}) {
    std::string skip;
    Endpoint a, b;
    test::make_endpoint(a, test::open_device(instance, test::soft_config(), &skip));
    if (!a.dev) {
      std::cout << instance << " skipped: " << skip << "\n";
      continue;
    }
    test::make_endpoint(b, test::open_device(instance, test::soft_config(), &skip));
    ASSERT_TRUE(b.dev) << skip;
    test::connect_pair(a, b);
    // One exchange, so the datapaths have worked and gone idle since.
    std::vector<uint8_t> src(4096, 1), dst(4096, 0);
    auto smr = std::move(a.pd->reg_mr(src.data(), src.size(), 0).value());
    auto dmr = std::move(b.pd->reg_mr(dst.data(), dst.size(), kAccessLocalWrite | kAccessRemoteWrite).value());
    SendWr w;
    w.opcode = WrOpcode::kRdmaWrite;
    w.sge = {reinterpret_cast<uint64_t>(src.data()), 4096, smr->lkey()};
    w.remote_addr = reinterpret_cast<uint64_t>(dst.data());
    w.rkey = dmr->rkey();
    ASSERT_TRUE(a.qp->post_send({&w, 1}).ok());
    ASSERT_EQ(test::wait_completions(*a.scq, 1).size(), 1u);
    const uint64_t a0 = a.dev->counters().datapath_cpu_ns, b0 = b.dev->counters().datapath_cpu_ns;
    const auto t0 = std::chrono::steady_clock::now();
    std::this_thread::sleep_for(std::chrono::seconds(1));  // the window measured, not a wait for an event
    const double wall_ns = std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count();
    const double a_share = static_cast<double>(a.dev->counters().datapath_cpu_ns - a0) / wall_ns;
    const double b_share = static_cast<double>(b.dev->counters().datapath_cpu_ns - b0) / wall_ns;
    std::cout << instance << " idle datapath CPU: " << 100 * a_share << "% and " << 100 * b_share << "% of a core\n";
    RecordProperty(std::string(instance) + "_idle_cpu_percent", std::to_string(100 * std::max(a_share, b_share)));
    EXPECT_LT(a_share, 0.05) << instance;
    EXPECT_LT(b_share, 0.05) << instance;
  }
}

// Several datapath threads, one queue each: QPs on both, every packet reaches its QP's thread
// (memif delivers on the sender's queue index; the port hands the rest over).
TEST(DpdkThreads, QpsOnTwoDatapathsEachGetTheirPackets) {
  std::string skip;
  DeviceConfig c = test::soft_config();
  c.backend_options["datapath_threads"] = 2;
  auto da = test::open_device("dpdk", c, &skip);
  ASSERT_TRUE(da) << skip;
  auto db = test::open_device("dpdk", c, &skip);
  ASSERT_TRUE(db) << skip;
  auto pa = std::move(da->alloc_pd().value());
  auto pb = std::move(db->alloc_pd().value());
  auto cqa = std::move(da->create_cq(256).value());
  auto cqb = std::move(db->create_cq(256).value());
  std::vector<std::unique_ptr<QueuePair>> qa, qb;
  QpInitAttr ia;
  ia.max_send_wr = ia.max_recv_wr = 16;
  for (int i = 0; i < 4; ++i) {
    ia.send_cq = ia.recv_cq = cqa.get();
    qa.push_back(std::move(pa->create_qp(ia).value()));
    ia.send_cq = ia.recv_cq = cqb.get();
    qb.push_back(std::move(pb->create_qp(ia).value()));
  }
  const PortInfo porta = da->query_port(1).value(), portb = db->query_port(1).value();
  constexpr size_t kBytes = 50'000;
  std::vector<std::vector<uint8_t>> src(4, std::vector<uint8_t>(kBytes)), dst(4, std::vector<uint8_t>(kBytes, 0));
  std::vector<std::unique_ptr<MemoryRegion>> mrs;
  test::ConnectOptions o;
  for (int i = 0; i < 4; ++i) {
    ASSERT_TRUE(test::connect_qp(*qa[i], portb, qb[i]->qp_num(), o.sq_psn, o.rq_psn, o).ok());
    ASSERT_TRUE(test::connect_qp(*qb[i], porta, qa[i]->qp_num(), o.rq_psn, o.sq_psn, o).ok());
    test::fill_pattern(src[i], 40 + i);
    mrs.push_back(std::move(pa->reg_mr(src[i].data(), kBytes, 0).value()));
    mrs.push_back(std::move(pb->reg_mr(dst[i].data(), kBytes, kAccessLocalWrite | kAccessRemoteWrite).value()));
    SendWr w;
    w.wr_id = i;
    w.opcode = WrOpcode::kRdmaWrite;
    w.sge = {reinterpret_cast<uint64_t>(src[i].data()), kBytes, mrs[mrs.size() - 2]->lkey()};
    w.remote_addr = reinterpret_cast<uint64_t>(dst[i].data());
    w.rkey = mrs.back()->rkey();
    ASSERT_TRUE(qa[i]->post_send({&w, 1}).ok());
  }
  auto wcs = test::wait_completions(*cqa, 4);
  ASSERT_EQ(wcs.size(), 4u);
  for (const WorkCompletion& wc : wcs) EXPECT_EQ(wc.status, WcStatus::kSuccess) << "qp " << wc.wr_id;
  for (int i = 0; i < 4; ++i) EXPECT_TRUE(src[i] == dst[i]) << "qp " << i;
  const auto counters = port_counters(*db);
  ASSERT_TRUE(counters);
  EXPECT_EQ(counters->handoff_drops, 0u);
  mrs.clear();
  qa.clear();
  qb.clear();
}

}  // namespace
}  // namespace rdmad::verbs::dpdk

namespace rdmad::verbs::dpdk {
namespace {

// Not a check: how fast 1 MiB WRITEs move between two dpdk NICs of one process, with payloads
// attached in place and copied. Run by hand (docs/verbs.md, "The dpdk backend"):
//   build/tests/unit/verbs/verbs_dpdk_port_test --gtest_also_run_disabled_tests --gtest_filter='*DpdkThroughput*'
TEST(DpdkThroughput, DISABLED_OneMibWrites) {
  for (const char* instance : {"dpdk", "dpdk_af_packet"}) {
    for (bool in_place : {true, false}) {
      DeviceConfig c = test::soft_config();
      c.backend_options["zero_copy_tx"] = in_place;
      c.backend_options["mbufs"] = 16383;
      std::string skip;
      Endpoint a, b;
      test::make_endpoint(a, test::open_device(instance, c, &skip));
      if (!a.dev) {
        std::cout << instance << ": " << skip << "\n";
        break;
      }
      test::make_endpoint(b, test::open_device(instance, c, &skip));
      ASSERT_TRUE(b.dev) << skip;
      test::ConnectOptions o;
      o.mtu = 4096;
      test::connect_pair(a, b, o);
      constexpr size_t kBytes = 1 << 20;
      constexpr int kWrites = 512, kWindow = 8;
      std::vector<uint8_t> src(kBytes, 7), dst(kBytes, 0);
      auto smr = std::move(a.pd->reg_mr(src.data(), kBytes, 0).value());
      auto dmr = std::move(b.pd->reg_mr(dst.data(), kBytes, kAccessLocalWrite | kAccessRemoteWrite).value());
      SendWr w;
      w.opcode = WrOpcode::kRdmaWrite;
      w.sge = {reinterpret_cast<uint64_t>(src.data()), kBytes, smr->lkey()};
      w.remote_addr = reinterpret_cast<uint64_t>(dst.data());
      w.rkey = dmr->rkey();
      const uint64_t cpu_a = a.dev->counters().datapath_cpu_ns, cpu_b = b.dev->counters().datapath_cpu_ns;
      const auto t0 = std::chrono::steady_clock::now();
      int posted = 0, done = 0;
      while (done < kWrites) {
        while (posted < kWrites && posted - done < kWindow && a.qp->post_send({&w, 1}).ok()) ++posted;
        const auto wcs = test::wait_completions(*a.scq, 1);
        ASSERT_FALSE(wcs.empty()) << "no completion in 20 s";
        for (const WorkCompletion& wc : wcs) ASSERT_EQ(wc.status, WcStatus::kSuccess);
        done += static_cast<int>(wcs.size());
      }
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      std::cout << instance << (in_place ? " payload in place: " : " payload copied:   ") << 8.0 * kWrites * kBytes / s / 1e9
                << " Gb/s, datapath CPU " << (a.dev->counters().datapath_cpu_ns - cpu_a) / 1e9 / s << " + "
                << (b.dev->counters().datapath_cpu_ns - cpu_b) / 1e9 / s << " cores, "
                << a.dev->counters().retransmitted_packets << " resent\n";
    }
  }
}

}  // namespace
}  // namespace rdmad::verbs::dpdk
