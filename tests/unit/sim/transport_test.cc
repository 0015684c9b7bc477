// Reliable delivery under loss: coalesced ACKs, sequence NAKs, go-back-N and the retransmit timeout
// (sim/src/network_transport.cc), checked against hand-computed runs, plus goodput beside wire
// utilisation on a lossy incast and determinism of random loss.
#include <gtest/gtest.h>

#include <string>

#include "rdmad/sim/output.h"
#include "scenario_helpers.h"

namespace rdmad::sim {
namespace {

using testing::fresh_dir;
using testing::read_file;
using testing::run_scenario;
using testing::star_long_flows;

// One 100 KB flow (100 packets of 1000 B, 1062 B on the wire) over two 100 Gb/s, 1 µs links. A
// packet takes ceil(1062·0.08) = 85 ns to serialise, an ACK or NAK (62 + 4 B AETH) 6 ns, so packet
// i leaves at 85·i and reaches the receiver at 85·i + 85 + 1000 + 85 + 1000 = 85·i + 2170, and an
// ACK sent at t is back at t + 6 + 1000 + 6 + 1000 = t + 2012.
// A star of `senders` with the `base` settings, then the test's `extra` ones (later ones win).
Scenario star_with(uint32_t senders, std::vector<std::string> base, const std::vector<std::string>& extra) {
  base.insert(base.end(), extra.begin(), extra.end());
  return star_long_flows(senders, base);
}

Scenario one_flow(const std::vector<std::string>& extra) {
  return star_with(1, {"traffic.kind=\"incast\"", "traffic.size_bytes=100000", "sim.duration_ms=1", "sim.warmup_ms=0"},
                   extra);
}

TEST(SimTransport, OneLostPacketCostsExactlyOneGoBackNRewind) {
  RunResults r = run_scenario(one_flow({"loss.drop=[{flow=0, psn=10}]"}));
  const TransportCounters& t = r.transport;
  EXPECT_TRUE(t.acks);  // [loss] turns ACKs on even under PFC
  EXPECT_EQ(t.wire_losses, 1u);
  // Packet 11 reaches the receiver at 85·11 + 2170 = 3105 past the gap: one NAK for PSN 10, back at
  // the sender at 5117. Packets 0..60 have left by then (60 at 5100), so 10..60 go again.
  EXPECT_EQ(t.naks_sent, 1u);
  EXPECT_EQ(t.rewinds, 1u);
  EXPECT_EQ(t.timeouts, 0u);
  EXPECT_EQ(t.retransmitted_packets, 51u);
  EXPECT_EQ(t.retransmitted_bytes, 51'000u);
  EXPECT_EQ(t.out_of_order_packets, 50u);  // 11..60 of the first round, discarded
  EXPECT_EQ(t.duplicate_packets, 0u);
  // ACKs asked for by PSNs 31, 63, 95 (every 32nd) and 99 (the last), each sent alone.
  EXPECT_EQ(t.acks_sent, 4u);
  EXPECT_EQ(r.delivered_bytes, 100'000u);
  ASSERT_EQ(r.fct.size(), 1u);
  // PSN 10 again at 5185 (the port frees after packet 60), PSN 99 at 5185 + 85·89 = 12750, at the
  // receiver at 14920; its ACK is back at 16932: the flow is done when its last byte is acknowledged.
  EXPECT_EQ(r.fct[0].fct_ns, 16'932);
  EXPECT_EQ(r.flows_completed, 1u);
}

TEST(SimTransport, LostAcksAreCoveredByLaterOnesAndTheLastByATimeout) {
  // The ACK for PSN 31 is lost: the one for 63 acknowledges it too, nothing is sent again, and
  // the flow ends when the ACK for 99 (sent at 85·99 + 2170 = 10585) is back: 12597.
  RunResults middle = run_scenario(one_flow({"loss.drop=[{flow=0, psn=31, kind=\"ack\"}]"}));
  EXPECT_EQ(middle.transport.wire_losses, 1u);
  EXPECT_EQ(middle.transport.retransmitted_packets, 0u);
  EXPECT_EQ(middle.transport.timeouts, 0u);
  ASSERT_EQ(middle.fct.size(), 1u);
  EXPECT_EQ(middle.fct[0].fct_ns, 12'597);

  // The last ACK is lost as well: the ACK for 95 (back at 85·95 + 2170 + 2012 = 12257) was the
  // last progress, so the 100 µs timeout fires at 112257 and rewinds to 96; the four packets go
  // again, the receiver answers the first duplicate with a re-ACK of 99, back at 112257 + 2170 +
  // 2012 = 116439.
  RunResults last =
      run_scenario(one_flow({"loss.drop=[{flow=0, psn=31, kind=\"ack\"}, {flow=0, psn=99, kind=\"ack\"}]",
                             "transport.retransmit_timeout_us=100"}));
  const TransportCounters& t = last.transport;
  EXPECT_EQ(t.wire_losses, 2u);
  EXPECT_EQ(t.timeouts, 1u);
  EXPECT_EQ(t.rewinds, 1u);
  EXPECT_EQ(t.naks_sent, 0u);
  EXPECT_EQ(t.retransmitted_packets, 4u);
  EXPECT_EQ(t.duplicate_packets, 4u);
  EXPECT_EQ(last.delivered_bytes, 100'000u);
  ASSERT_EQ(last.fct.size(), 1u);
  EXPECT_EQ(last.fct[0].fct_ns, 116'439);
  EXPECT_EQ(last.flows_completed, 1u);
}

// 8 senders × 500 KB into one receiver through a lossy 300 KB switch buffer: tail drops.
Scenario lossy_incast(const std::vector<std::string>& extra) {
  return star_with(8,
                   {"traffic.kind=\"incast\"", "traffic.size_bytes=500000", "switch.pfc=false",
                    "switch.buffer_bytes=300000", "sim.duration_ms=50", "sim.warmup_ms=0"},
                   extra);
}

TEST(SimTransport, LossyIncastReportsGoodputBelowUtilisationAndEveryFlowCompletes) {
  RunResults r = run_scenario(lossy_incast({}));
  EXPECT_GT(r.drops, 1000u);
  EXPECT_TRUE(r.transport.acks);
  EXPECT_EQ(r.flows_completed, 8u);
  EXPECT_EQ(r.delivered_bytes, 8u * 500'000);
  EXPECT_GT(r.transport.retransmitted_packets, 1000u);
  EXPECT_EQ(r.transport.retransmitted_bytes, r.transport.retransmitted_packets * 1000);
  EXPECT_GT(r.transport.naks_sent + r.transport.timeouts, 0u);
  // The receiver link is busy, but half of what it carries is discarded past a gap or repeats.
  EXPECT_GT(r.bottleneck_utilization, 0.85);
  EXPECT_LT(r.bottleneck_goodput, r.bottleneck_utilization - 0.2);
  ASSERT_EQ(r.port_utilization.size(), 1u);
  EXPECT_LT(r.port_utilization[0].goodput_bytes, r.port_utilization[0].data_bytes);
  for (const auto& f : r.fct) EXPECT_GE(f.fct_ns, 0);

  // Without ACKs, lost bytes stay lost: flows never finish.
  RunResults off = run_scenario(lossy_incast({"transport.acks=\"off\""}));
  EXPECT_GT(off.drops, 0u);
  EXPECT_LT(off.flows_completed, 8u);
  EXPECT_EQ(off.transport.retransmitted_packets, 0u);
}

TEST(SimTransport, RandomLinkLossIsRecoveredAndRepeatsWithItsSeed) {
  auto run_to = [](const std::string& name, uint64_t seed) {
    Scenario s = lossy_incast({"switch.pfc=true", "switch.buffer_bytes=33554432", "loss.rate=0.002",
                               "sim.seed=" + std::to_string(seed)});
    s.name = "lossy";
    RunResults r = run_scenario(s);
    EXPECT_GT(r.transport.wire_losses, 0u) << seed;
    EXPECT_EQ(r.drops, 0u) << seed;  // PFC holds; only the links lose
    EXPECT_EQ(r.flows_completed, 8u) << seed;
    EXPECT_EQ(r.delivered_bytes, 8u * 500'000) << seed;
    EXPECT_GT(r.transport.retransmitted_packets, 0u) << seed;
    EXPECT_LT(r.bottleneck_goodput, r.bottleneck_utilization) << seed;
    r.wall_seconds = 0;
    auto dir = fresh_dir("transport_" + name);
    write_outputs(r, dir);
    return dir;
  };
  auto a = run_to("a", 3);
  auto b = run_to("b", 3);
  auto c = run_to("c", 4);
  for (const char* file : {"summary.json", "fct.csv", "rates.csv", "queues.csv"}) {
    EXPECT_EQ(read_file(a / file), read_file(b / file)) << file;
  }
  EXPECT_NE(read_file(a / "summary.json"), read_file(c / "summary.json"));
}

TEST(SimTransport, LosslessRunsSendNoAcksAndCountEveryByteAsGoodput) {
  RunResults r = run_scenario(star_long_flows(
      4, {"traffic.kind=\"incast\"", "traffic.size_bytes=300000", "sim.duration_ms=5", "sim.warmup_ms=0"}));
  EXPECT_FALSE(r.transport.acks);
  EXPECT_EQ(r.transport.acks_sent, 0u);
  EXPECT_EQ(r.flows_completed, 4u);
  EXPECT_EQ(r.delivered_bytes, 4u * 300'000);
}

TEST(SimTransport, LossKeysAreChecked) {
  auto error_of = [](const std::string& text) {
    try {
      parse_scenario(text, "/", {}, "t.toml");
    } catch (const std::runtime_error& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_EQ(error_of("[loss]\nrate = 1.5\n"), "t.toml:2: key 'loss.rate' must be in [0, 1)");
  EXPECT_EQ(error_of("[[loss.drop]]\nflow = 0\npsn = 3\nkind = \"cnp\"\n"),
            "t.toml:1: key 'loss.drop.kind' is \"data\" or \"ack\"");
  EXPECT_EQ(error_of("[[loss.drop]]\npacket = 3\n"),
            "t.toml:1: unknown key 'loss.drop.packet' (flow, psn, kind)");
  EXPECT_EQ(error_of("[transport]\nretransmit_timeout_us = 0\n"),
            "t.toml:2: key 'transport.retransmit_timeout_us' must be positive");
  Scenario s =
      parse_scenario("[transport]\nacks = \"on\"\n[[loss.drop]]\nflow = 2\npsn = 7\nkind = \"ack\"\n", "/");
  EXPECT_EQ(s.transport.acks, AckMode::kOn);
  ASSERT_EQ(s.loss.drops.size(), 1u);
  EXPECT_EQ(s.loss.drops[0].flow, 2u);
  EXPECT_EQ(s.loss.drops[0].psn, 7u);
  EXPECT_EQ(s.loss.drops[0].kind, LossKind::kAck);
}

}  // namespace
}  // namespace rdmad::sim
