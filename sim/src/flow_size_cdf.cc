#include "rdmad/sim/flow_size_cdf.h"

#include <fmt/format.h>

#include <fstream>
#include <sstream>
#include <stdexcept>

namespace rdmad::sim {

FlowSizeCdf FlowSizeCdf::parse(std::string_view text, const std::string& origin) {
  FlowSizeCdf cdf;
  std::istringstream in{std::string(text)};
  std::string line;
  int line_no = 0;
  while (std::getline(in, line)) {
    ++line_no;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    std::istringstream fields(line);
    Point p{};
    std::string extra;
    if (!(fields >> p.bytes >> p.percent) || (fields >> extra)) {
      throw std::runtime_error(fmt::format("{}:{}: expected '<bytes> <percent>'", origin, line_no));
    }
    if (!cdf.points_.empty()) {
      const Point& prev = cdf.points_.back();
      if (p.bytes <= prev.bytes || p.percent <= prev.percent) {
        throw std::runtime_error(fmt::format("{}:{}: both columns must increase strictly", origin, line_no));
      }
    } else if (p.bytes != 0 || p.percent != 0) {
      throw std::runtime_error(fmt::format("{}:{}: the first point must be '0 0'", origin, line_no));
    }
    if (p.percent > 100) throw std::runtime_error(fmt::format("{}:{}: percent above 100", origin, line_no));
    cdf.points_.push_back(p);
  }
  if (cdf.points_.size() < 2 || cdf.points_.back().percent != 100) {
    throw std::runtime_error(fmt::format("{}: the last point must have probability 100", origin));
  }
  return cdf;
}

FlowSizeCdf FlowSizeCdf::load(const std::filesystem::path& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error(fmt::format("cannot read flow-size CDF '{}'", path.string()));
  std::stringstream ss;
  ss << in.rdbuf();
  return parse(ss.str(), path.string());
}

uint64_t FlowSizeCdf::sample(double u) const {
  double pct = u * 100.0;
  size_t i = 1;
  while (i + 1 < points_.size() && points_[i].percent <= pct) ++i;
  const Point& lo = points_[i - 1];
  const Point& hi = points_[i];
  double bytes = lo.bytes + (pct - lo.percent) / (hi.percent - lo.percent) * (hi.bytes - lo.bytes);
  auto whole = static_cast<uint64_t>(bytes);
  return whole == 0 ? 1 : whole;
}

double FlowSizeCdf::mean_bytes() const {
  double mean = 0;
  for (size_t i = 1; i < points_.size(); ++i) {
    mean +=
        (points_[i - 1].bytes + points_[i].bytes) / 2 * (points_[i].percent - points_[i - 1].percent) / 100;
  }
  return mean;
}

}  // namespace rdmad::sim
