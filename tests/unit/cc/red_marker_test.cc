#include "rdmad/cc/red_marker.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

namespace rdmad::cc {
namespace {

TEST(RedMarker, ProbabilityCurve) {
  const RedMarker m(kRedPaper, 1);
  EXPECT_EQ(m.probability(0), 0.0);
  EXPECT_EQ(m.probability(5'000), 0.0);  // q ≤ Kmin: never
  EXPECT_DOUBLE_EQ(m.probability(102'500), 0.005);
  EXPECT_DOUBLE_EQ(m.probability(200'000), 0.01);  // q = Kmax: Pmax
  EXPECT_EQ(m.probability(200'001), 1.0);          // q > Kmax: always
}

TEST(RedMarker, ProductionPresetScalesWithPortSpeed) {
  EXPECT_EQ(red_production(25), (RedParams{100'000, 400'000, 0.20}));
  EXPECT_EQ(red_production(100).kmax_bytes, 1'600'000u);
}

// 10^6 draws per queue length: the marked fraction is within 5 standard deviations of the curve.
TEST(RedMarker, MarkingFrequencyMatchesTheCurve) {
  RedMarker m(RedParams{10'000, 110'000, 0.2}, 42);
  for (uint64_t q : {10'000u, 20'000u, 60'000u, 110'000u, 110'001u}) {
    const double p = m.probability(q);
    constexpr int kSamples = 1'000'000;
    int marks = 0;
    for (int i = 0; i < kSamples; ++i) marks += m.should_mark(q) ? 1 : 0;
    const double sigma = std::sqrt(kSamples * p * (1 - p));
    EXPECT_NEAR(marks, kSamples * p, 5 * sigma + 1e-9) << "q=" << q << " p=" << p;
  }
}

TEST(RedMarker, InjectedUniformDecides) {
  struct Seq {
    std::vector<double>* v;
    size_t i = 0;
    double operator()() { return (*v)[i++]; }
  };
  std::vector<double> draws = {0.0049, 0.0051};
  BasicRedMarker<Seq> m(kRedPaper, Seq{&draws});
  EXPECT_TRUE(m.should_mark(102'500));  // p = 0.005
  EXPECT_FALSE(m.should_mark(102'500));
  EXPECT_FALSE(m.should_mark(1'000));     // below Kmin: no draw consumed
  EXPECT_TRUE(m.should_mark(1'000'000));  // above Kmax: no draw consumed
}

TEST(RedMarker, SameSeedSameDecisions) {
  RedMarker a(kRedPaper, 9), b(kRedPaper, 9);
  for (int i = 0; i < 10'000; ++i) ASSERT_EQ(a.should_mark(150'000), b.should_mark(150'000));
}

}  // namespace
}  // namespace rdmad::cc
