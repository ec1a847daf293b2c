// Nearest-neighbour search for the privacy checks.
//
// Distance between two records (a Gower distance, in [0, 1]):
//   dist(a, b) = (1 / C) sum_c d_c(a_c, b_c) over the C evaluated columns, with
//   numeric columns   d_c = min(1, |a_c - b_c| / range_c), range_c the training
//                     column's max - min (1 if constant); one side missing: 1,
//                     both missing: 0;
//   other columns     d_c = 0 if the values are equal (both missing counts as
//                     equal), else 1.
// Records are encoded once as float columns (numeric: value / range_c, missing
// as a sentinel far outside [0, 1] so that the clamp gives 1) and int32 codes
// (categorical and text: a dictionary shared by all tables). The search is
// brute force over all reference rows, column by column into a distance
// buffer so the inner loops are contiguous and vectorise, queries split over
// `threads` std::threads.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace ds {

struct EncodedRecords {
  size_t rows = 0;
  std::vector<std::vector<float>> num;    // [numeric columns][rows] value / range
  std::vector<std::vector<int32_t>> cat;  // [other columns][rows] dictionary codes
};

// Missing numeric value in EncodedRecords::num.
constexpr float kMissingScaled = -1e30f;

// For each row q of `queries` listed in `query_rows` ([m] row indices), the
// distance to the nearest row of `reference`: returns [m].
std::vector<float> NearestDistances(const EncodedRecords& reference, const EncodedRecords& queries,
                                    const std::vector<size_t>& query_rows, int threads);

// ROC AUC of `member_scores` over `non_member_scores` (higher score = member),
// ties counted half (Mann-Whitney U / (n1 n0)).
double RocAuc(const std::vector<float>& member_scores, const std::vector<float>& non_member_scores);

}  // namespace ds
