#include "handles.h"

#include <gtest/gtest.h>
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>

#include <sstream>
#include <string>
#include <vector>

#include "rdmad/base/log.h"
#include "dmabuf_probe.h"

namespace rdmad::verbs::rdma_core {
namespace {

// Stand-ins for libibverbs objects: the destroy functions record the order they run in.
struct FakeCtx {};
struct FakePd {};
struct FakeMr {};
struct FakeCq {};
struct FakeQp {};
std::vector<std::string>* g_order = nullptr;
int g_fail_rc = 0;

template <class T>
int destroy_fake(T* p) {
  if (g_order != nullptr) g_order->push_back(typeid(T).name());
  delete p;
  return g_fail_rc;
}

class RdmaCoreHandleOrder : public ::testing::Test {
 protected:
  void SetUp() override { g_order = &order_; }
  void TearDown() override {
    g_order = nullptr;
    g_fail_rc = 0;
  }
  std::vector<std::string> order_;
};

std::vector<std::string> names(std::initializer_list<const char*> l) { return {l.begin(), l.end()}; }

TEST_F(RdmaCoreHandleOrder, ChildrenGoBeforeParentsWhateverTheDestructionOrder) {
  {
    auto ctx = detail::adopt(new FakeCtx, &destroy_fake<FakeCtx>, "close", "fake0");
    auto pd = detail::adopt(new FakePd, &destroy_fake<FakePd>, "dealloc_pd", "fake0", {ctx});
    auto mr = detail::adopt(new FakeMr, &destroy_fake<FakeMr>, "dereg_mr", "fake0", {pd});
    auto cq = detail::adopt(new FakeCq, &destroy_fake<FakeCq>, "destroy_cq", "fake0", {ctx});
    auto qp = detail::adopt(new FakeQp, &destroy_fake<FakeQp>, "destroy_qp", "fake0", {pd, cq});
    // Drop the parents first, as a careless owner might.
    ctx.reset();
    pd.reset();
    cq.reset();
    EXPECT_TRUE(order_.empty());
    mr.reset();
    EXPECT_EQ(order_, names({typeid(FakeMr).name()}));
  }
  EXPECT_EQ(order_, names({typeid(FakeMr).name(), typeid(FakeQp).name(), typeid(FakeCq).name(),
                           typeid(FakePd).name(), typeid(FakeCtx).name()}));
}

TEST_F(RdmaCoreHandleOrder, OwnersAreMoveOnlyAndEmptyAfterAMove) {
  static_assert(!std::is_copy_constructible_v<ProtectionDomain>);
  static_assert(!std::is_copy_assignable_v<QueuePair>);
  static_assert(std::is_nothrow_move_constructible_v<MemoryRegion>);
  Handle<FakePd> a(detail::adopt(new FakePd, &destroy_fake<FakePd>, "dealloc_pd", "fake0"), "fake0");
  Handle<FakePd> b(std::move(a));
  EXPECT_FALSE(a);  // NOLINT(bugprone-use-after-move): the moved-from state is what is tested
  ASSERT_TRUE(b);
  EXPECT_EQ(b.device(), "fake0");
  Handle<FakePd> c;
  c = std::move(b);
  EXPECT_TRUE(order_.empty());
  c.reset();
  EXPECT_EQ(order_.size(), 1u);
}

TEST_F(RdmaCoreHandleOrder, FailedDestroyIsLoggedWithVerbDeviceAndErrno) {
  std::ostringstream out;
  auto sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(out);
  auto previous = log::replace_for_test(log::Component::kVerbs, std::make_shared<spdlog::logger>("verbs", sink));
  g_fail_rc = EBUSY;
  { auto pd = detail::adopt(new FakePd, &destroy_fake<FakePd>, "ibv_dealloc_pd", "mlx5_3"); }
  log::replace_for_test(log::Component::kVerbs, previous);
  EXPECT_NE(out.str().find("verbs call failed call=ibv_dealloc_pd device=mlx5_3 error=\"Device or resource busy\""),
            std::string::npos)
      << out.str();
}

TEST(RdmaCoreVerbsError, NamesTheVerbTheDeviceAndTheErrno) {
  EXPECT_EQ((VerbsError{"ibv_alloc_pd", "mlx5_0", ENOMEM}.message()),
            "ibv_alloc_pd on mlx5_0: Cannot allocate memory (errno 12)");
  EXPECT_EQ((VerbsError{"ibv_get_device_list", "", ENOSYS}.message()),
            "ibv_get_device_list: Function not implemented (errno 38)");
  errno = 0;
  EXPECT_EQ(last_error("ibv_create_cq", "rxe0", ENOMEM).err, ENOMEM);
  errno = EACCES;
  EXPECT_EQ(last_error("ibv_create_cq", "rxe0", ENOMEM).err, EACCES);
}

TEST(RdmaCoreDmabufProbe, EbadfMeansSupported) {
  EXPECT_EQ(classify_dmabuf_probe(false, EBADF).support, DmabufSupport::kSupported);
  EXPECT_EQ(classify_dmabuf_probe(false, EOPNOTSUPP).support, DmabufSupport::kNotSupported);
  EXPECT_EQ(classify_dmabuf_probe(false, EPROTONOSUPPORT).support, DmabufSupport::kNotSupported);
  EXPECT_EQ(classify_dmabuf_probe(false, EINVAL).support, DmabufSupport::kUnknown);
  EXPECT_EQ(classify_dmabuf_probe(true, 0).support, DmabufSupport::kSupported);
  EXPECT_NE(classify_dmabuf_probe(false, EOPNOTSUPP).detail.find("not supported"), std::string::npos);
}

}  // namespace
}  // namespace rdmad::verbs::rdma_core
