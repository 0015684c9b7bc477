// Flows pinned to NICs (rdmad_flow_open_nics): the bytes cross only the chosen rail, a mask naming a
// NIC the node does not have is refused, and a pinned flow whose rail is cut mid-transfer finishes
// on the other NIC, byte-exact, then returns to its rail when the path is back.
#include "fabric_pair.h"

namespace rdmad::test {
namespace {

double bytes_on(Node& n, int nic) {
  return n.metric(fmt::format("rdmad_balancer_bytes_sent_total{{device=\"{}{}\"}}", n.id(), nic)).value_or(0);
}

// Writes n bytes of `src` to `remote` on `f` and waits for the completion; true when it is OK.
bool write_all(rdmad_flow* f, uint64_t wr_id, const Buffer& src, const rdmad_remote& remote, size_t n,
               std::chrono::seconds deadline) {
  if (rdmad_flow_write(f, wr_id, src.mr, 0, &remote, 0, n) != RDMAD_OK) return false;
  auto c = wait_completion(f, deadline);
  return c && c->status == RDMAD_OK && c->length == n;
}

TEST(FlowPinned, AFlowPinnedToNic1MovesAllItsBytesOverNic1) {
  Pair p(two_nic_node("node-a", 11), two_nic_node("node-b", 21));
  ASSERT_TRUE(p.start());
  rdmad_flow* f = nullptr;
  ASSERT_EQ(rdmad_flow_open_nics(p.a->client(), "node-b", nullptr, 0x2, &f), RDMAD_OK)
      << rdmad_last_error(p.a->client());
  EXPECT_EQ(rdmad_flow_nic_mask(f), 0x2u);
  ASSERT_EQ(rdmad_flow_wait_connected(f, 10000), RDMAD_OK);
  const size_t n = 64u << 20;
  Buffer src(p.a->client(), n, kAllAccess);
  Buffer dst(p.b->client(), n, kAllAccess);
  fill(src.data(), n, 31);
  fill(dst.data(), n, 32);
  const rdmad_remote remote = export_and_import(*p.b, dst, n, *p.a, f);
  ASSERT_TRUE(write_all(f, 1, src, remote, n, 120s)) << p.a->output();
  EXPECT_EQ(first_difference(src.data(), dst.data(), n), -1);
  EXPECT_EQ(bytes_on(*p.a, 0), 0.0);
  EXPECT_GE(bytes_on(*p.a, 1), static_cast<double>(n));
  EXPECT_EQ(p.a->metric("rdmad_flow_pinned_spills_total").value_or(-1), 0.0);

  // A read on the same flow keeps to NIC 1 too; an unpinned flow next to it still stripes.
  fill(dst.data(), n, 33);
  Buffer back(p.a->client(), n, kAllAccess);
  const rdmad_remote readable = export_and_import(*p.b, dst, n, *p.a, f, RDMAD_ACCESS_REMOTE_READ);
  ASSERT_EQ(rdmad_flow_read(f, 2, back.mr, 0, &readable, 0, n), RDMAD_OK);
  auto c = wait_completion(f, 120s);
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(c->status, RDMAD_OK);
  EXPECT_EQ(first_difference(back.data(), dst.data(), n), -1);
  EXPECT_EQ(bytes_on(*p.a, 0), 0.0);
  rdmad_flow_close(f);
}

TEST(FlowPinned, AMaskNamingANicTheNodeDoesNotHaveIsRefused) {
  Pair p(two_nic_node("node-a", 11), two_nic_node("node-b", 21));
  ASSERT_TRUE(p.start());
  for (uint32_t mask : {0x4u, 0x1u | 0x8u, 0x80000000u}) {
    rdmad_flow* f = nullptr;
    EXPECT_EQ(rdmad_flow_open_nics(p.a->client(), "node-b", nullptr, mask, &f), RDMAD_ERR_INVALID_ARGUMENT)
        << std::hex << mask;
    EXPECT_EQ(f, nullptr);
    const std::string why = rdmad_last_error(p.a->client());
    EXPECT_NE(why.find(fmt::format("nic_mask {:#x}", mask)), std::string::npos) << why;
    EXPECT_NE(why.find("this node does not have (it has 2 NICs"), std::string::npos) << why;
  }
  // Every NIC the node has is fine, and so is 0 (every NIC).
  for (uint32_t mask : {0x0u, 0x1u, 0x3u}) {
    rdmad_flow* f = nullptr;
    ASSERT_EQ(rdmad_flow_open_nics(p.a->client(), "node-b", nullptr, mask, &f), RDMAD_OK)
        << rdmad_last_error(p.a->client());
    EXPECT_EQ(rdmad_flow_nic_mask(f), mask);
    rdmad_flow_close(f);
  }
}

TEST(FlowPinned, APinnedFlowWhoseNicIsCutFinishesOnTheOtherNicAndReturnsWhenItRejoins) {
  // NIC 0's path runs through the fabric; the flow is pinned to it.
  FabricPair fp("0");
  ASSERT_TRUE(fp.start(0x1)) << fp.a()->output() << fp.b()->output();
  const size_t n = 256u << 20;
  Buffer src(fp.a()->client(), n, kAllAccess);
  Buffer dst(fp.b()->client(), n, kAllAccess);
  fill(src.data(), n, 41);
  fill(dst.data(), n, 42);
  const rdmad_remote remote = fp.export_to_a(dst, n);
  ASSERT_EQ(rdmad_flow_write(fp.fa, 1, src.mr, 0, &remote, 0, n), RDMAD_OK);
  ASSERT_TRUE(eventually([&] { return fp.nic_bytes(0) > 4e6; }, 60s));
  EXPECT_EQ(fp.nic_bytes(1), 0.0) << "pinned to NIC 0";
  fp.fabric->cut();
  auto c = wait_completion(fp.fa, 240s);
  ASSERT_TRUE(c.has_value()) << fp.a()->output();
  EXPECT_EQ(c->status, RDMAD_OK);
  EXPECT_EQ(c->length, n);
  EXPECT_EQ(first_difference(src.data(), dst.data(), n), -1);
  // The rest went over NIC 1, and the departure was counted and logged.
  EXPECT_GT(fp.nic_bytes(1), 0.0) << "the transfer ended before the cut: nothing was tested";
  EXPECT_GE(fp.a()->metric("rdmad_flow_pinned_spills_total").value_or(0), 1.0);
  EXPECT_NE(fp.a()->output().find("pinned flow left its nics flow="), std::string::npos) << fp.a()->output();

  // The path comes back: once NIC 0 rejoins, the flow's bytes go over it again, and only over it.
  ASSERT_TRUE(fp.fabric->start());
  const double before = fp.nic_bytes(0);
  uint64_t wr = 100;
  ASSERT_TRUE(eventually([&] { return write_all(fp.fa, ++wr, src, remote, 8u << 20, 60s) && fp.nic_bytes(0) > before; },
                         60s))
      << fp.a()->output();
  EXPECT_NE(fp.a()->output().find("pinned flow back on its nics flow="), std::string::npos) << fp.a()->output();
  const double on_1 = fp.nic_bytes(1);
  const double on_0 = fp.nic_bytes(0);
  ASSERT_TRUE(write_all(fp.fa, ++wr, src, remote, 8u << 20, 60s));
  EXPECT_EQ(fp.nic_bytes(1), on_1);
  EXPECT_GE(fp.nic_bytes(0), on_0 + (8u << 20));
  EXPECT_EQ(std::memcmp(src.data(), dst.data(), n), 0);
}

}  // namespace
}  // namespace rdmad::test
