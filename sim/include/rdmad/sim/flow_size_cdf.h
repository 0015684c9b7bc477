#pragma once
// Empirical flow-size distribution in the HPCC traffic-generator format: one "<bytes> <percent>"
// pair per line, first line "0 0", last probability 100, both columns strictly increasing. Sizes
// between two points are uniformly distributed (piecewise-linear CDF), as upstream samples them.
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace rdmad::sim {

class FlowSizeCdf {
 public:
  struct Point {
    double bytes;
    double percent;
  };
  // Parses the text of a CDF file; throws std::runtime_error naming `origin` and the line on error.
  static FlowSizeCdf parse(std::string_view text, const std::string& origin);
  // Reads and parses a CDF file.
  static FlowSizeCdf load(const std::filesystem::path& path);

  // Inverse CDF for u in [0, 1): a size in whole bytes, at least 1 (as the upstream generator does).
  uint64_t sample(double u) const;
  // Mean of the piecewise-linear distribution, Σ (x_{i-1}+x_i)/2 · Δp.
  double mean_bytes() const;
  const std::vector<Point>& points() const { return points_; }

 private:
  std::vector<Point> points_;
};

}  // namespace rdmad::sim
