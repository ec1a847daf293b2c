// The golden vectors of a DP-SGD run composed with Gaussian releases, as
// dp-accounting computed them (scripts/make_dp_composed_vectors.py writes
// both files): one row per case,
//   q, sigma, steps, marginal sigma, delta, epsilon, order
// ('#' comments and the 'q,...' header skipped).
#pragma once

#include <algorithm>
#include <cstdint>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace ds {

struct ComposedVector {
  double q = 0, sigma = 0;
  int64_t steps = 0;
  double marginal_sigma = 0, delta = 0, epsilon = 0, order = 0;
  std::string line;  // for messages
};

// Empty when the file is missing or a row does not parse (the test then fails on the count).
inline std::vector<ComposedVector> ReadComposedVectors(const std::string& path) {
  std::vector<ComposedVector> out;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#' || line[0] == 'q') continue;
    std::string row = line;
    std::replace(row.begin(), row.end(), ',', ' ');
    std::istringstream ss(row);
    ComposedVector v;
    v.line = line;
    ss >> v.q >> v.sigma >> v.steps >> v.marginal_sigma >> v.delta >> v.epsilon >> v.order;
    if (ss.fail()) return {};
    out.push_back(v);
  }
  return out;
}

}  // namespace ds
