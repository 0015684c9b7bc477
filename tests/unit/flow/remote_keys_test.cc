// Exports of ranges a NIC holds as several MRs (rdma_core splits registrations over 3.5 GiB): the
// grant carries every slice's rkey, and each access uses the rkey of the slice its bytes are in. A
// fixture device slices its MRs every 4 KiB so a small range has several slices.
#include <gtest/gtest.h>

#include <array>
#include <map>

#include "flow_engine.h"
#include "peer_domain.h"

namespace rdmad::flow {
namespace {

constexpr uint64_t kSlice = 4096;

// An MR held as ceil(length / kSlice) slices, rkeys base, base + 1, ...
class SlicedMr final : public verbs::MemoryRegion {
 public:
  SlicedMr(uint64_t addr, size_t length, uint32_t base) : addr_(addr), length_(length), base_(base) {}
  uint64_t addr() const override { return addr_; }
  size_t length() const override { return length_; }
  uint32_t lkey() const override { return base_ | 0x8000'0000; }
  uint32_t rkey() const override { return base_; }  // slice 0's, as rdma_core's rkey()
  uint32_t access() const override { return 0; }
  size_t slices() const { return (length_ + kSlice - 1) / kSlice; }

 private:
  uint64_t addr_;
  size_t length_;
  uint32_t base_;
};

class SlicingPd final : public verbs::ProtectionDomain {
 public:
  explicit SlicingPd(uint32_t& next) : next_(next) {}
  verbs::Result<std::unique_ptr<verbs::MemoryRegion>> reg_mr(void* addr, size_t len, uint32_t) override {
    auto mr = std::make_unique<SlicedMr>(reinterpret_cast<uint64_t>(addr), len, next_);
    next_ += 0x100;
    return std::unique_ptr<verbs::MemoryRegion>(std::move(mr));
  }
  verbs::Result<std::unique_ptr<verbs::MemoryRegion>> reg_dmabuf_mr(int, uint64_t, size_t, uint64_t,
                                                                    uint32_t) override {
    return verbs::Status::not_supported("fixture");
  }
  verbs::Result<std::unique_ptr<verbs::QueuePair>> create_qp(const verbs::QpInitAttr&) override {
    return verbs::Status::not_supported("fixture");
  }

 private:
  uint32_t& next_;
};

class SlicingDevice final : public verbs::Device {
 public:
  SlicingDevice() { info_.name = "sliced0"; }
  const verbs::DeviceInfo& info() const override { return info_; }
  verbs::Result<verbs::PortInfo> query_port(uint8_t) const override { return verbs::PortInfo{}; }
  verbs::Result<std::unique_ptr<verbs::ProtectionDomain>> alloc_pd() override {
    return std::unique_ptr<verbs::ProtectionDomain>(new SlicingPd(next_key_));
  }
  verbs::Result<std::unique_ptr<verbs::CompletionQueue>> create_cq(uint32_t) override {
    return verbs::Status::not_supported("fixture");
  }
  verbs::NicCounters counters() const override { return {}; }

 private:
  verbs::DeviceInfo info_;
  uint32_t next_key_ = 0x1000;
};

// What the daemon's reader does with rdma_core::region_slices(), for the fixture's MRs.
std::optional<MrSlices> fixture_slices(const verbs::MemoryRegion& mr) {
  const auto* s = dynamic_cast<const SlicedMr*>(&mr);
  if (s == nullptr || s->slices() <= 1) return std::nullopt;
  MrSlices out{kSlice, {}};
  for (size_t i = 0; i < s->slices(); ++i) out.rkeys.push_back(s->rkey() + static_cast<uint32_t>(i));
  return out;
}

clients::PinnedRange range_of(uint8_t* mem, uint64_t length) {
  clients::PinnedRange r;
  r.kind = RDMAD_MEM_HOST;
  r.addr = mem;
  r.iova = reinterpret_cast<uint64_t>(mem);
  r.length = length;
  r.nic_count = 1;
  r.keys[0].nic_index = 0;
  return r;
}

// The importer's view of an export: what the exporter registered, through the grant on the wire.
RemoteRange imported(const ExactRegion& mrs, const clients::PinnedRange& r) {
  peer::Grant g;
  g.iova = r.iova;
  g.length = r.length;
  g.rights = peer::kGrantRightsMask;
  g.keys = mrs.grant_keys;
  const auto decoded = peer::decode_grant(peer::encode(g));
  EXPECT_TRUE(decoded.has_value());
  RemoteRange range;
  range.iova = decoded->iova;
  range.length = decoded->length;
  set_remote_keys(range, decoded->keys);
  return range;
}

TEST(RemoteKeys, AnExportOfASlicedRangeCarriesEverySlicesRkey) {
  SlicingDevice nic;
  auto d = PeerDomain::open(1, {&nic}, fixture_slices);
  ASSERT_TRUE(d.ok());
  static uint8_t mem[3 * kSlice];
  const clients::PinnedRange r = range_of(mem, 2 * kSlice + 100);  // three slices, the last 100 bytes
  auto e = d.value()->register_exact(r, RDMAD_ACCESS_REMOTE_WRITE | RDMAD_ACCESS_LOCAL_WRITE);
  ASSERT_TRUE(e.ok()) << e.error().message;
  ASSERT_EQ(e.value().grant_keys.size(), 1u);
  const peer::GrantKey& k = e.value().grant_keys[0];
  EXPECT_EQ(k.rkey, 0x1000u);
  EXPECT_EQ(k.slice_bytes, kSlice);
  EXPECT_EQ(k.slice_rkeys, (std::vector<uint32_t>{0x1001, 0x1002}));
  // Without a reader (the soft backend) the MR is one and so is its key.
  auto plain = PeerDomain::open(2, {&nic});
  auto p = plain.value()->register_exact(r, RDMAD_ACCESS_REMOTE_READ);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p.value().grant_keys[0].slice_bytes, 0u);
  EXPECT_TRUE(p.value().grant_keys[0].slice_rkeys.empty());
}

TEST(RemoteKeys, EachChunkUsesTheRkeyOfTheSliceItsBytesAreIn) {
  SlicingDevice nic;
  auto d = PeerDomain::open(1, {&nic}, fixture_slices);
  static uint8_t mem[3 * kSlice];
  const clients::PinnedRange r = range_of(mem, 2 * kSlice + 100);
  auto e = d.value()->register_exact(r, RDMAD_ACCESS_REMOTE_WRITE | RDMAD_ACCESS_LOCAL_WRITE);
  ASSERT_TRUE(e.ok());
  const RemoteRange range = imported(e.value(), r);
  ASSERT_TRUE(range.slices);
  std::array<RemotePiece, kMaxRemotePieces> out;

  // Inside slice 1: its rkey, not slice 0's (the bug: every access used slice 0's).
  ASSERT_EQ(remote_pieces(range, 0, kSlice + 10, 1000, out), 1u);
  EXPECT_EQ(out[0].rkey, 0x1001u);
  EXPECT_EQ(out[0].offset, kSlice + 10);
  EXPECT_EQ(out[0].length, 1000u);
  // The tail of the last slice.
  ASSERT_EQ(remote_pieces(range, 0, 2 * kSlice, 100, out), 1u);
  EXPECT_EQ(out[0].rkey, 0x1002u);
  // A chunk across a boundary becomes one piece per slice.
  ASSERT_EQ(remote_pieces(range, 0, kSlice - 96, 4096, out), 2u);
  EXPECT_EQ(out[0].rkey, 0x1000u);
  EXPECT_EQ(out[0].offset, kSlice - 96);
  EXPECT_EQ(out[0].length, 96u);
  EXPECT_EQ(out[1].rkey, 0x1001u);
  EXPECT_EQ(out[1].offset, kSlice);
  EXPECT_EQ(out[1].length, 4000u);
  // The whole range: three pieces, the bytes add up.
  ASSERT_EQ(remote_pieces(range, 0, 0, static_cast<uint32_t>(r.length), out), 3u);
  EXPECT_EQ(out[0].length + out[1].length + out[2].length, r.length);
  // Outside the range, or on a NIC without a key: nothing to post.
  EXPECT_EQ(remote_pieces(range, 0, 2 * kSlice + 50, 51, out), 0u);
  EXPECT_EQ(remote_pieces(range, 1, 0, 10, out), 0u);
}

TEST(RemoteKeys, AnUnslicedRangeHasOnePieceAndNoSliceTable) {
  RemoteRange range;
  range.iova = 0x10000;
  range.length = 1 << 20;
  set_remote_keys(range, std::vector<peer::GrantKey>{{0, 0xAA}, {1, 0xBB}});
  EXPECT_FALSE(range.slices) << "the usual range allocates nothing";
  std::array<RemotePiece, kMaxRemotePieces> out;
  ASSERT_EQ(remote_pieces(range, 1, 4096, 65536, out), 1u);
  EXPECT_EQ(out[0].rkey, 0xBBu);
  EXPECT_EQ(out[0].length, 65536u);
}

TEST(RemoteKeys, SlicesSoSmallThatAChunkCrossesManyAreRefused) {
  RemoteRange range;
  range.length = 64;
  // A peer may slice as finely as the wire allows (64 slices of one byte): a chunk over more than
  // kMaxRemotePieces of them is refused, not posted as dozens of work requests.
  peer::GrantKey k{0, 1, 1, std::vector<uint32_t>(63, 2)};
  set_remote_keys(range, std::vector<peer::GrantKey>{k});
  std::array<RemotePiece, kMaxRemotePieces> out;
  EXPECT_EQ(remote_pieces(range, 0, 0, 64, out), 0u);
  EXPECT_EQ(remote_pieces(range, 0, 10, 4, out), 4u);
}

}  // namespace
}  // namespace rdmad::flow
