#include "evaluate/privacy.h"

#include <algorithm>
#include <cmath>
#include <thread>

#include "util/status.h"

namespace ds {

std::vector<float> NearestDistances(const EncodedRecords& reference, const EncodedRecords& queries,
                                    const std::vector<size_t>& query_rows, int threads) {
  DS_CHECK(reference.num.size() == queries.num.size());
  DS_CHECK(reference.cat.size() == queries.cat.size());
  const size_t m = query_rows.size(), n = reference.rows;
  const size_t ncols = reference.num.size() + reference.cat.size();
  std::vector<float> out(m, 1.0f);  // [m]
  if (m == 0 || n == 0 || ncols == 0) {
    if (ncols == 0) std::fill(out.begin(), out.end(), 0.0f);
    return out;
  }
  const float inv_cols = 1.0f / float(ncols);
  // Blocking: kQ queries at a time over tiles of kTile reference rows, so that
  // each reference column tile is loaded once per query block and the distance
  // tile ([kQ, kTile] floats = 16 KiB) stays in L1.
  constexpr size_t kQ = 8, kTile = 512;
  auto work = [&](size_t begin, size_t end) {
    std::vector<float> tile(kQ * kTile);  // [kQ, kTile] summed column distances
    for (size_t q0 = begin; q0 < end; q0 += kQ) {
      const size_t nq = std::min(kQ, end - q0);
      float best[kQ];
      float qnum[kQ];
      int32_t qcat[kQ];
      std::fill(best, best + kQ, INFINITY);
      for (size_t t0 = 0; t0 < n; t0 += kTile) {
        const size_t nt = std::min(kTile, n - t0);
        std::fill(tile.begin(), tile.end(), 0.0f);
        for (size_t c = 0; c < reference.num.size(); ++c) {
          const float* __restrict col = reference.num[c].data() + t0;
          for (size_t i = 0; i < nq; ++i) qnum[i] = queries.num[c][query_rows[q0 + i]];
          for (size_t i = 0; i < nq; ++i) {
            float* __restrict d = &tile[i * kTile];
            const float v = qnum[i];
            for (size_t j = 0; j < nt; ++j) d[j] += std::min(std::fabs(col[j] - v), 1.0f);
          }
        }
        for (size_t c = 0; c < reference.cat.size(); ++c) {
          const int32_t* __restrict col = reference.cat[c].data() + t0;
          for (size_t i = 0; i < nq; ++i) qcat[i] = queries.cat[c][query_rows[q0 + i]];
          for (size_t i = 0; i < nq; ++i) {
            float* __restrict d = &tile[i * kTile];
            const int32_t v = qcat[i];
            for (size_t j = 0; j < nt; ++j) d[j] += col[j] != v ? 1.0f : 0.0f;
          }
        }
        for (size_t i = 0; i < nq; ++i) {
          const float* d = &tile[i * kTile];
          float b = best[i];
          for (size_t j = 0; j < nt; ++j) b = std::min(b, d[j]);
          best[i] = b;
        }
      }
      for (size_t i = 0; i < nq; ++i) out[q0 + i] = best[i] * inv_cols;
    }
  };
  const int t = std::max(1, std::min<int>(threads, int(m)));
  if (t == 1) {
    work(0, m);
    return out;
  }
  std::vector<std::thread> pool;
  for (int i = 0; i < t; ++i)
    pool.emplace_back(work, m * size_t(i) / size_t(t), m * size_t(i + 1) / size_t(t));
  for (std::thread& th : pool) th.join();
  return out;
}

double RocAuc(const std::vector<float>& member_scores,
              const std::vector<float>& non_member_scores) {
  const size_t n1 = member_scores.size(), n0 = non_member_scores.size();
  if (n1 == 0 || n0 == 0) return 0.5;
  std::vector<std::pair<float, int>> all;  // (score, 1 = member)
  all.reserve(n1 + n0);
  for (float s : member_scores) all.push_back({s, 1});
  for (float s : non_member_scores) all.push_back({s, 0});
  std::sort(all.begin(), all.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  // Sum of member ranks (1-based, ties get their average rank).
  double rank_sum = 0;
  for (size_t i = 0; i < all.size();) {
    size_t j = i;
    size_t members = 0;
    while (j < all.size() && all[j].first == all[i].first) members += size_t(all[j++].second);
    const double avg_rank = 0.5 * double(i + 1 + j);
    rank_sum += avg_rank * double(members);
    i = j;
  }
  const double u = rank_sum - double(n1) * double(n1 + 1) / 2;
  return u / (double(n1) * double(n0));
}

}  // namespace ds
