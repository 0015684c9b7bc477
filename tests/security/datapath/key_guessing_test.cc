// Key guessing at the verbs level: a peer that holds one region's rkey (an export) tries every key
// near it (±64, each bit flipped, the old layout's neighbours index ± 4 with generation ± 4), key
// 0, all ones and random keys, with WRITEs and READs inside the export, into the region registered
// right after it, across the export's end and 768 KiB past it. Only the export's own key inside
// its range may work; every other try fails with a remote access error, and no byte of the target
// side (nor of the reader's buffer) changes. Before, the next region's key was the export's +
// 0x101 and a WRITE into it landed.
//
// On both backends (rdma_core on rxe in the vm label). Soft keys carry 16 random bits, so the
// other regions share the export's protection domain there, as a test of the keys alone. Hardware
// and rxe keys are a table index with 8 bits of key: in one PD the next region's key is one guess
// in 256 away. What defends them is the daemon's layout (docs/security.md): a peer's exports live
// in that peer's own PD, every other region in others, and a key of another PD's region is refused
// whatever its value. So on rdma_core the other regions are in a second PD.
#include <gtest/gtest.h>

#include <random>
#include <set>

#include "unit/verbs/verbs_test_util.h"

namespace rdmad::security::test {
namespace {

using namespace rdmad::verbs;
using verbs::test::Endpoint;

constexpr size_t kExport = 4096;
constexpr size_t kSecret = 64u << 10;
constexpr uint32_t kLen = 512;

class KeyGuessing : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    std::string skip;
    auto da = verbs::test::open_device(GetParam(), verbs::test::soft_config(), &skip);
    if (!da) GTEST_SKIP() << skip;
    auto db = verbs::test::open_device(GetParam(), verbs::test::soft_config(), &skip);
    ASSERT_TRUE(db) << skip;
    verbs::test::make_endpoint(a_, std::move(da), 16);
    verbs::test::make_endpoint(b_, std::move(db), 16);
    o_.timeout = 14;
    verbs::test::connect_pair(a_, b_, o_);
    // The target side: the export, then (as a client's registrations did) regions with remote
    // rights registered right after it. One allocation, so "768 KiB past the export" is memory
    // that belongs to the target process.
    target_.resize(1u << 20);
    verbs::test::fill_pattern(target_, 7);
    const uint32_t rw = kAccessLocalWrite | kAccessRemoteWrite | kAccessRemoteRead;
    export_ = std::move(b_.pd->reg_mr(target_.data(), kExport, rw).value());
    ProtectionDomain* others_pd = b_.pd.get();
    if (GetParam() != "soft") {
      others_pd_ = std::move(b_.dev->alloc_pd().value());
      others_pd = others_pd_.get();
    }
    for (size_t off = kExport; off + kSecret <= 512u << 10; off += kSecret) {
      others_.push_back(std::move(others_pd->reg_mr(target_.data() + off, kSecret, rw).value()));
    }
    local_.resize(kLen);
    verbs::test::fill_pattern(local_, 8);
    local_mr_ = std::move(a_.pd->reg_mr(local_.data(), kLen, kAccessLocalWrite).value());
  }

  WcStatus attempt(WrOpcode op, uint32_t rkey, uint64_t addr) {
    SendWr w;
    w.opcode = op;
    w.sge = {reinterpret_cast<uint64_t>(local_.data()), kLen, local_mr_->lkey()};
    w.remote_addr = addr;
    w.rkey = rkey;
    if (!a_.qp->post_send({&w, 1}).ok()) return WcStatus::kGeneralError;
    auto wc = verbs::test::wait_completions(*a_.scq, 1, std::chrono::seconds(10));
    return wc.empty() ? WcStatus::kGeneralError : wc[0].status;
  }

  // After a refused key both QPs are in ERR (IB: a remote access error is fatal): back to RTS.
  void reconnect() {
    QpAttr r;
    r.state = QpState::kReset;
    ASSERT_TRUE(a_.qp->modify(r, kQpState).ok());
    ASSERT_TRUE(b_.qp->modify(r, kQpState).ok());
    verbs::test::connect_pair(a_, b_, o_);
  }

  uint64_t at(size_t offset) const { return reinterpret_cast<uint64_t>(target_.data()) + offset; }

  Endpoint a_, b_;
  verbs::test::ConnectOptions o_;
  std::vector<uint8_t> target_, local_;
  std::unique_ptr<ProtectionDomain> others_pd_;  // declared before the MRs in it: destroyed after them
  std::unique_ptr<MemoryRegion> export_, local_mr_;
  std::vector<std::unique_ptr<MemoryRegion>> others_;
};

TEST_P(KeyGuessing, OnlyTheExportsKeyInsideItsRangeWorks) {
  const uint32_t k = export_->rkey();
  std::set<uint32_t> keys = {0, 0xFFFFFFFF};
  for (int d = -64; d <= 64; ++d) keys.insert(k + static_cast<uint32_t>(d));
  for (int b = 0; b < 32; ++b) keys.insert(k ^ (1u << b));
  for (int j = -4; j <= 4; ++j) {
    for (int g = -4; g <= 4; ++g) keys.insert(k + static_cast<uint32_t>(j * 0x100 + g));
  }
  std::mt19937 rng(std::random_device{}());
  for (int i = 0; i < 128; ++i) keys.insert(static_cast<uint32_t>(rng()));

  // The export's key works inside it, both ways.
  std::vector<uint8_t> sent = local_;
  ASSERT_EQ(attempt(WrOpcode::kRdmaWrite, k, at(1024)), WcStatus::kSuccess);
  ASSERT_TRUE(std::equal(sent.begin(), sent.end(), target_.begin() + 1024));
  verbs::test::fill_pattern(local_, 9);
  ASSERT_EQ(attempt(WrOpcode::kRdmaRead, k, at(1024)), WcStatus::kSuccess);
  ASSERT_TRUE(std::equal(local_.begin(), local_.end(), target_.begin() + 1024));

  const std::vector<uint8_t> target_before = target_;
  const std::vector<uint8_t> local_before = local_;
  struct Target {
    const char* what;
    size_t offset;
  };
  const Target targets[] = {{"inside the export", 1024}, {"the next region", kExport + 256}};
  int tries = 0, landed = 0;
  std::string first_landed;
  auto expect_refused = [&](WrOpcode op, uint32_t key, const Target& t) {
    ++tries;
    const WcStatus st = attempt(op, key, at(t.offset));
    if (st != WcStatus::kRemoteAccessError) {
      if (landed++ == 0) {
        first_landed = std::string(op == WrOpcode::kRdmaWrite ? "WRITE" : "READ") + " with key " +
                       std::to_string(key) + " (export's " + std::to_string(k) + ") into " + t.what + ": " +
                       std::string(to_string(st));
      }
    }
    reconnect();
  };
  for (uint32_t key : keys) {
    if (key == k) continue;
    for (const Target& t : targets) {
      expect_refused(WrOpcode::kRdmaWrite, key, t);
      expect_refused(WrOpcode::kRdmaRead, key, t);
    }
  }
  // The export's own key outside its range: across its end, in the next region, 768 KiB past.
  for (const Target& t : {Target{"across the export's end", kExport - 256}, Target{"the next region", kExport + 256},
                          Target{"768 KiB past the export", 768u << 10}}) {
    expect_refused(WrOpcode::kRdmaWrite, k, t);
    expect_refused(WrOpcode::kRdmaRead, k, t);
  }
  // Where the other regions are in another PD (rdma_core): even a guess that got all 32 bits of one
  // of their keys right is refused.
  if (GetParam() != "soft") {
    for (size_t i = 0; i < others_.size(); ++i) {
      const Target t{"another PD's region, with its own key", kExport + i * kSecret + 256};
      expect_refused(WrOpcode::kRdmaWrite, others_[i]->rkey(), t);
      expect_refused(WrOpcode::kRdmaRead, others_[i]->rkey(), t);
    }
  }
  EXPECT_EQ(landed, 0) << landed << " of " << tries << " tries were not refused; first: " << first_landed;
  EXPECT_TRUE(target_ == target_before) << "target memory changed";
  EXPECT_TRUE(local_ == local_before) << "a refused READ brought bytes back";
  // The connection still works with the right key.
  EXPECT_EQ(attempt(WrOpcode::kRdmaWrite, k, at(0)), WcStatus::kSuccess);
}

INSTANTIATE_TEST_SUITE_P(Security, KeyGuessing, ::testing::Values("soft", "rdma_core"),
                         [](const ::testing::TestParamInfo<std::string>& i) { return i.param; });

}  // namespace
}  // namespace rdmad::security::test
