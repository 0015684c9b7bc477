// DCQCN end to end: four senders WRITE into one soft receiver through a 1 Gb/s fabric port that
// RED/ECN-marks. The receiver's notification point sends CNPs and every sender's reaction point
// handles them while all transfers complete; the senders share fairly, the bottleneck stays busy
// and the queue sits mostly between Kmin and Kmax. The senders are soft NICs on loopback, or (as
// root) dpdk NICs: net_af_packet ports on veth pairs whose kernel ends carry the fabric port's and
// the receiver's address, so the packets DPDK builds cross the kernel's IP and UDP into the fabric
// emulator and the receiver's ACKs and CNPs come back through the veths.
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>

#include "unit/verbs/veth_net.h"
#include "unit/verbs/verbs_test_util.h"
#include "rdmad/tools/fabric/fabric.h"
#include "support/free_port.h"

namespace rdmad::verbs::test {
namespace {

constexpr int kSenders = 4;
constexpr uint64_t kBottleneckBps = 1'000'000'000;
constexpr uint32_t kMsg = 64u << 10;
constexpr int kInflight = 8;

// The paper profile with its timers scaled from 40 Gb/s to this 1 Gb/s bottleneck (×20): at 1 Gb/s
// a flow's packets, and so its CNPs, arrive 40 times less often (DCQCN.md: timers scale with RTT).
cc::DcqcnParams scaled_profile() {
  cc::DcqcnParams p = cc::paper_profile();
  p.alpha_timer_us *= 20;
  p.increase_timer_us *= 20;
  p.np_cnp_interval_us *= 20;
  p.rate_ai_mbps = 10;  // paper: 40 and 200 at 40 Gb/s
  p.rate_hai_mbps = 50;
  return p;
}

double jain(const std::vector<double>& x) {
  double s = std::accumulate(x.begin(), x.end(), 0.0), sq = 0;
  for (double v : x) sq += v * v;
  return sq == 0 ? 0 : s * s / (static_cast<double>(x.size()) * sq);
}

// Where the senders are: soft NICs on 127.0.0.1, or dpdk NICs on veths (`veths` filled, the
// receiver and the fabric port on 10.80.0.1, sender i on 10.80.i.2 behind 10.80.i.1).
struct Senders {
  std::string backend;
  std::vector<std::unique_ptr<VethPair>> veths;
  std::string receiver_address() const { return backend == "soft" ? "127.0.0.1" : "10.80.0.1"; }
};

class Congestion : public ::testing::TestWithParam<std::string> {};

TEST_P(Congestion, FourSendersIntoOneBottleneck) {
  std::string skip;
  Senders senders{GetParam(), {}};
  if (senders.backend == "dpdk") {
    if (registry().find("dpdk") == nullptr) GTEST_SKIP() << "backend 'dpdk' is not built into this binary";
    for (int i = 0; i < kSenders; ++i) {
      auto v = VethPair::create(&skip);
      if (!v) GTEST_SKIP() << skip;
      ASSERT_TRUE(run_ip("addr add 10.80." + std::to_string(i) + ".1/24 dev " + v->b()));
      senders.veths.push_back(std::move(v));
    }
  }
  DeviceConfig rc = soft_config(senders.receiver_address());
  // Data arrives from the fabric port's socket (re-sealed; see fabric_test.cc): the receiver's relay.
  const int bottleneck = rdmad::test::free_port(SOCK_DGRAM);
  rc.backend_options["relay_address"] = senders.receiver_address();
  rc.backend_options["relay_udp_port"] = static_cast<uint16_t>(bottleneck);
  rc.backend_options["cc_enabled"] = true;
  rc.dcqcn = scaled_profile();
  Endpoint send[kSenders];
  auto rdev = open_device("soft", rc, &skip);
  ASSERT_TRUE(rdev) << skip;
  PortInfo rport = rdev->query_port(1).value();

  fabric::FabricConfig fc;
  fc.stats_interval_ms = 0;
  fabric::PortConfig p;
  p.listen = fabric::Endpoint::parse(senders.receiver_address() + ":" + std::to_string(bottleneck));
  p.forward = fabric::Endpoint::parse(senders.receiver_address() + ":" + std::to_string(rport.udp_port));
  p.rate_bps = kBottleneckBps;
  p.buffer_bytes = 4u << 20;  // 4 senders × a 1 MiB window: a lossless incast, as DCQCN assumes (PFC)
  p.ecn = true;
  p.red = cc::RedParams{20'000, 200'000, 0.2};
  fc.ports.push_back(p);
  fabric::Fabric fab(fc);
  fab.start();
  const auto red = p.red;

  // One receiver device with four QPs; each sender its own device (its own datapath and DCQCN).
  auto rpd = std::move(rdev->alloc_pd().value());
  auto rcq = std::move(rdev->create_cq(4096).value());
  std::vector<std::unique_ptr<QueuePair>> rqps;
  std::vector<uint8_t> sink(kSenders * size_t{kMsg});
  auto sink_mr = std::move(rpd->reg_mr(sink.data(), sink.size(), kAccessLocalWrite | kAccessRemoteWrite).value());
  std::vector<uint8_t> src(kMsg, 0x5A);
  std::vector<std::unique_ptr<MemoryRegion>> src_mrs;
  for (int i = 0; i < kSenders; ++i) {
    DeviceConfig sc = soft_config();
    sc.backend_options["cc_enabled"] = true;
    sc.dcqcn = scaled_profile();
    sc.backend_options["line_rate_mbps"] = 1000;  // each sender's link as fast as the bottleneck: 4:1 incast
    if (senders.backend == "dpdk") {
      sc.address = "10.80." + std::to_string(i) + ".2";
      sc.backend_options.erase("udp_port");
      sc.backend_options["devargs"] = "net_af_packet_cong" + std::to_string(i) + ",iface=" + senders.veths[i]->a() +
                                      ",framesz=4352,blocksz=69632,framecnt=512";
      sc.backend_options["mtu"] = 9000;
      // af_packet has no rx interrupts: an idle sender naps between looks at its queue. Short naps,
      // so that a CNP or an ACK is read within 100 us, as a NIC would see it at once.
      sc.backend_options["idle_poll_max_us"] = 100;
      // The route to 10.80.0.1 (the fabric port and the receiver) is the kernel at the veth's far end.
      sc.backend_options["gateway"] = "10.80." + std::to_string(i) + ".1";
      auto d = registry().find("dpdk")->open(sc);
      ASSERT_TRUE(d.ok()) << d.status().message();
      make_endpoint(send[i], std::move(d.value()), 64);
    } else {
      make_endpoint(send[i], open_device("soft", sc, &skip), 64);
    }
    src_mrs.push_back(std::move(send[i].pd->reg_mr(src.data(), src.size(), 0).value()));
    QpInitAttr ia;
    ia.send_cq = ia.recv_cq = rcq.get();
    rqps.push_back(std::move(rpd->create_qp(ia).value()));
    ConnectOptions o;
    o.mtu = 4096;
    o.timeout = 14;
    PortInfo via = rport;
    via.udp_port = fab.listen_endpoint(0).port();  // data goes through the bottleneck
    ASSERT_TRUE(connect_qp(*send[i].qp, via, rqps[i]->qp_num(), 0, 0, o).ok());
    // ACKs and CNPs come straight back (the reverse path is uncongested).
    ASSERT_TRUE(connect_qp(*rqps[i], send[i].dev->query_port(1).value(), send[i].qp->qp_num(), 0, 0, o).ok());
  }

  using Clock = std::chrono::steady_clock;
  const auto t0 = Clock::now();
  const auto converge = std::chrono::milliseconds(1500), measure = std::chrono::milliseconds(1000);
  const int windows = static_cast<int>(measure / std::chrono::milliseconds(100));
  std::vector<std::vector<double>> bytes(windows, std::vector<double>(kSenders, 0));
  int outstanding[kSenders] = {};
  fabric::PortStats at_start{};
  bool started = false;
  // Bytes the bottleneck port sent, read at each window boundary (index w: start of window w).
  std::vector<double> wire_at(windows + 1, -1);
  WorkCompletion wc[64];
  for (;;) {
    auto now = Clock::now();
    if (now - t0 > converge + measure) break;
    if (!started && now - t0 >= converge) {
      at_start = fab.stats(0);
      started = true;
    }
    if (started) {
      const auto boundary = static_cast<size_t>((now - t0 - converge) / std::chrono::milliseconds(100));
      if (boundary < wire_at.size() && wire_at[boundary] < 0) {
        wire_at[boundary] = static_cast<double>(fab.stats(0).tx_bytes);
      }
    }
    for (int i = 0; i < kSenders; ++i) {
      while (outstanding[i] < kInflight) {
        SendWr w;
        w.opcode = WrOpcode::kRdmaWrite;
        w.sge = {reinterpret_cast<uint64_t>(src.data()), kMsg, src_mrs[i]->lkey()};
        w.remote_addr = reinterpret_cast<uint64_t>(sink.data()) + size_t{kMsg} * i;
        w.rkey = sink_mr->rkey();
        ASSERT_TRUE(send[i].qp->post_send({&w, 1}).ok());
        ++outstanding[i];
      }
      size_t n = send[i].scq->poll(wc);
      for (size_t k = 0; k < n; ++k) ASSERT_EQ(wc[k].status, WcStatus::kSuccess) << to_string(wc[k].status);
      outstanding[i] -= static_cast<int>(n);
      auto since = now - t0 - converge;
      if (since >= std::chrono::milliseconds(0)) {
        int w = static_cast<int>(since / std::chrono::milliseconds(100));
        if (w < windows) bytes[w][i] += static_cast<double>(n) * kMsg;
      }
    }
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  fabric::PortStats at_end = fab.stats(0);
  wire_at[windows] = static_cast<double>(at_end.tx_bytes);
  NicCounters rcnt = rdev->counters();
  uint64_t cnp_handled = 0;
  for (auto& s : send) cnp_handled += s.dev->counters().rp_cnp_handled;

  EXPECT_GT(rcnt.np_ecn_marked_roce_packets, 0u);
  EXPECT_GT(rcnt.np_cnp_sent, 0u);
  EXPECT_GT(cnp_handled, 0u);
  std::ostringstream report;
  double min_jain = 1;
  for (int w = 0; w < windows; ++w) {
    double j = jain(bytes[w]);
    min_jain = std::min(min_jain, j);
    report << "window " << w << ": jain " << j << " Mb/s";
    for (double b : bytes[w]) report << " " << b * 8 / 0.1 / 1e6;
    if (wire_at[w] >= 0 && wire_at[w + 1] >= 0) report << " port " << (wire_at[w + 1] - wire_at[w]) * 8 / 0.1 / 1e6;
    report << "\n";
  }
  double wire_bps = static_cast<double>(at_end.tx_bytes - at_start.tx_bytes) * 8 / (measure.count() / 1000.0);
  uint64_t deps = (at_end.departures_below_kmin - at_start.departures_below_kmin) +
                  (at_end.departures_between - at_start.departures_between) +
                  (at_end.departures_above_kmax - at_start.departures_above_kmax);
  double between = deps ? static_cast<double>(at_end.departures_between - at_start.departures_between) / deps : 0;
  for (auto& snd : send) {
    NicCounters c = snd.dev->counters();
    report << "sender: timeouts " << c.local_ack_timeout_err << " seq naks " << c.packet_seq_err << " retx "
           << c.retransmitted_packets << " cnp " << c.rp_cnp_handled << "\n";
  }
  report << "fabric: rx " << at_end.rx_packets << " drops buffer " << at_end.drops_buffer << " marked " << at_end.marked
         << " peak queue " << at_end.queue_peak_bytes << "\n";
  report << "bottleneck " << wire_bps / 1e6 << " Mb/s, departures between Kmin " << red.kmin_bytes << " and Kmax "
         << red.kmax_bytes << ": " << between * 100 << "%, cnp sent " << rcnt.np_cnp_sent;
  // The control loop must be closed: marks reach the receiver, CNPs reach every sender.
  for (auto& snd : send) EXPECT_GT(snd.dev->counters().rp_cnp_handled, 0u) << report.str();
  EXPECT_GT(at_end.tx_packets, 0u);
  // The goals: Jain >= 0.95 per 100 ms window after convergence, >= 90% of the bottleneck,
  // the queue mostly between Kmin and Kmax. One window of the ten may miss the fairness bound, and
  // the bottleneck is judged by its median window: on a shared 2-core machine a sender thread or
  // the fabric port's thread descheduled for tens of milliseconds costs that window its share or
  // its throughput, whatever DCQCN does (the run is serial in ctest to keep that rare).
  int fair_windows = 0;
  std::vector<double> port_bps;
  for (int w = 0; w < windows; ++w) {
    fair_windows += jain(bytes[w]) >= 0.95 ? 1 : 0;
    // A boundary the loop never read counts as an idle window.
    const bool read = wire_at[w] >= 0 && wire_at[w + 1] >= 0;
    port_bps.push_back(read ? (wire_at[w + 1] - wire_at[w]) * 8 / 0.1 : 0);
  }
  std::sort(port_bps.begin(), port_bps.end());
  const double median_bps = (port_bps[windows / 2 - 1] + port_bps[windows / 2]) / 2;
  EXPECT_GE(fair_windows, windows - 1) << report.str();
  EXPECT_GE(median_bps, 0.9 * static_cast<double>(kBottleneckBps)) << report.str();
  EXPECT_GE(between, 0.5) << report.str();
  std::printf("%s\n", report.str().c_str());
  RecordProperty("min_jain", std::to_string(min_jain));
  RecordProperty("bottleneck_mbps", std::to_string(wire_bps / 1e6));
  RecordProperty("queue_between_kmin_kmax_pct", std::to_string(between * 100));
  for (auto& q : rqps) q.reset();
}

INSTANTIATE_TEST_SUITE_P(Senders, Congestion, ::testing::Values("soft", "dpdk"),
                         [](const ::testing::TestParamInfo<std::string>& i) { return i.param; });

}  // namespace
}  // namespace rdmad::verbs::test
