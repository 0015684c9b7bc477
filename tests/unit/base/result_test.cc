#include "rdmad/base/result.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>

namespace rdmad::base {
namespace {

TEST(BaseStatus, SuccessIsOkAndCarriesNoMessage) {
  const Status s = Status::success();
  EXPECT_TRUE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kOk);
  EXPECT_TRUE(s.message().empty());
  EXPECT_FALSE(Status::in_progress().ok());
  EXPECT_EQ(Status::no_resource("full").code(), StatusCode::kNoResource);
  EXPECT_EQ(Status::not_supported("x").code(), StatusCode::kNotSupported);
  EXPECT_EQ(Status::error("bad").message(), "bad");
  EXPECT_EQ(to_string(StatusCode::kNoResource), "no-resource");
  EXPECT_EQ(to_string(StatusCode::kInProgress), "in-progress");
}

TEST(BaseResult, HoldsAValueOrTheStatusThatPreventedIt) {
  Result<int> good = 7;
  ASSERT_TRUE(good.ok());
  EXPECT_EQ(*good, 7);
  EXPECT_TRUE(good.status().ok());
  Result<int> bad = Status::no_resource("table full");
  EXPECT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kNoResource);
  EXPECT_EQ(bad.value_or(3), 3);
}

TEST(BaseResult, MoveOnlyValuesAndCustomErrors) {
  struct PathError {
    std::string path;
    int err = 0;
  };
  Result<std::unique_ptr<int>, PathError> r = std::make_unique<int>(5);
  ASSERT_TRUE(r);
  std::unique_ptr<int> taken = std::move(r).value();
  EXPECT_EQ(*taken, 5);
  Result<std::unique_ptr<int>, PathError> e = PathError{"/sys/x", 2};
  EXPECT_FALSE(e.ok());
  EXPECT_EQ(e.error().path, "/sys/x");
  EXPECT_EQ(e.error().err, 2);
}

// No default constructor needed: the value is only built when there is one.
TEST(BaseResult, ValueTypeNeedsNoDefaultConstructor) {
  struct NoDefault {
    explicit NoDefault(int value) : v(value) {}
    int v;
  };
  Result<NoDefault> r = Status::error("none");
  EXPECT_FALSE(r.ok());
  Result<NoDefault> g = NoDefault(4);
  EXPECT_EQ(g->v, 4);
}

using BaseResultDeathTest = ::testing::Test;

TEST_F(BaseResultDeathTest, ReadingTheValueOfAFailedResultIsABug) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  Result<int> bad = Status::error("no value");
  EXPECT_DEATH((void)bad.value(), "value\\(\\) of a failed result");
}

TEST_F(BaseResultDeathTest, AFailedResultNeedsAnErrorStatus) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(Result<int>(Status::success()), "needs an error status");
}

TEST_F(BaseResultDeathTest, BugNamesTheFileAndLine) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(RDMAD_BUG("table {} out of step", 3), "bug at .*result_test.cc:[0-9]+: table 3 out of step");
  EXPECT_DEATH(RDMAD_ASSERT(1 + 1 == 3, "math {}", "broke"), "assertion \"1 \\+ 1 == 3\" failed: math broke");
}

}  // namespace
}  // namespace rdmad::base
