#include "privacy/exponential_mechanism.h"

#include <algorithm>
#include <cmath>

#include "util/status.h"

namespace ds {

double RoundEpsilon(double sigma, double share, int rounds) {
  DS_CHECK(sigma > 0 && share > 0 && rounds > 0);
  return std::sqrt(4.0 * share / double(rounds)) / sigma;
}

size_t ExponentialPick(const std::vector<double>& scores, double epsilon, double sensitivity,
                       SecureGaussian* noise) {
  DS_CHECK(!scores.empty() && epsilon > 0 && sensitivity > 0 && noise != nullptr);
  const double top = *std::max_element(scores.begin(), scores.end());
  std::vector<double> w(scores.size());
  double sum = 0;
  for (size_t i = 0; i < scores.size(); ++i)
    sum += w[i] = std::exp(0.5 * epsilon * (scores[i] - top) / sensitivity);
  double u = noise->Uniform() * sum;  // the top candidate's weight is 1: sum >= 1
  for (size_t i = 0; i < w.size(); ++i) {
    if (u < w[i]) return i;
    u -= w[i];
  }
  return w.size() - 1;  // rounding at the end of the sum
}

std::vector<std::vector<int>> SelectPairs(const std::vector<double>& scores, int columns,
                                          int rounds, int per_child, double round_epsilon,
                                          SecureGaussian* noise) {
  std::vector<std::vector<int>> parents(size_t(std::max(0, columns)));
  std::vector<std::pair<int, int>> edge;  // (a, b), b-major
  for (int b = 1; b < columns; ++b)
    for (int a = 0; a < b; ++a) edge.push_back({a, b});
  DS_CHECK(scores.size() == edge.size());
  std::vector<char> taken(edge.size(), 0);
  std::vector<int> part(parents.size());  // union-find of the tree rounds
  for (size_t i = 0; i < part.size(); ++i) part[i] = int(i);
  auto find = [&part](int x) {
    while (part[size_t(x)] != x) x = part[size_t(x)] = part[size_t(part[size_t(x)])];
    return x;
  };
  for (int round = 0; round < rounds; ++round) {
    const bool tree = round + 1 < columns;  // the first columns - 1 rounds: a spanning tree
    std::vector<double> s;
    std::vector<size_t> which;
    for (size_t k = 0; k < edge.size(); ++k)
      if (!taken[k] && int(parents[size_t(edge[k].second)].size()) < per_child &&
          (!tree || find(edge[k].first) != find(edge[k].second))) {
        s.push_back(scores[k]);
        which.push_back(k);
      }
    if (s.empty()) break;
    const size_t k = which[ExponentialPick(s, round_epsilon, 1.0, noise)];
    taken[k] = 1;
    part[size_t(find(edge[k].first))] = find(edge[k].second);
    parents[size_t(edge[k].second)].push_back(edge[k].first);
  }
  for (auto& ps : parents) std::sort(ps.begin(), ps.end());
  return parents;
}

}  // namespace ds
