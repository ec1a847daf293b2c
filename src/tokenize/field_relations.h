// Order relations between numeric columns, learned from the training records and kept
// by construction in generation (docs/typed_fields.md, "Relations between columns").
//
// Datetime columns take part too, against datetime columns with the same parts (both
// dates, or both date and time): compared by DateKey, which orders as the dates do.
//
// A relation lo <= hi holds when, on every training row where both columns hold a number,
// value(lo) <= value(hi) (compared exactly, each at its column's decimals), and the
// relation is not implied by the two ranges alone: were the columns independent (each
// drawn from its own values), some row could break it (P(lo' > hi') > 0; and n P >=
// `min_expected_violations`, default 0). A relation the data merely meet by chance
// (n P small: probability about exp(-n P)) is kept too: it truncates a region where the
// real rows hold no mass either (at most about 1/n of it), while a model left free
// writes rows there that no training row resembles (session 9: stocks, 84 rows, 4.8% of
// rows broke GOOG <= AMZN at n P = 2.4). Examples: first-floor area <= living area,
// years at the company <= total working years, temp_min <= temp_max; two equal
// columns give both directions, so generation writes them equal.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace ds {

struct FieldRelation {
  int lo = 0, hi = 0;  // column indices (header order): value(lo) <= value(hi)
  bool operator==(const FieldRelation&) const = default;
};

struct RelationOptions {
  int min_rows = 20;                     // rows with both values present
  double min_expected_violations = 0.0;  // least n P(lo' > hi') under independence (P > 0)
  size_t max_relations = 4096;           // bound on what a model stores
  size_t sample = 20000;                 // values per column kept for P(lo' > hi')
};

// a / 10^da compared with b / 10^db, exactly: -1, 0 or 1.
int CompareScaled(int64_t a, int da, int64_t b, int db);
// The smallest (Ceil) / largest (Floor) s with s / 10^d >= (<=) a / 10^da, saturated to
// the int64 range.
int64_t CeilRescale(int64_t a, int da, int d);
int64_t FloorRescale(int64_t a, int da, int d);

// A datetime as one integer that orders as the datetimes do (parts a format lacks: their
// DateTime defaults); and back.
struct DateTime;  // schema/column_type.h
int64_t DateKey(const DateTime& d);
DateTime DateFromKey(int64_t key);

// Tests every ordered pair of the given numeric columns over a stream of rows: a pair
// drops out at its first row that breaks it, so the cost is rows x surviving pairs. The
// independence estimate uses a reservoir sample of each column (a fixed seed:
// reproducible).
class RelationLearner {
 public:
  static constexpr int64_t kMissing = INT64_MIN;
  // columns[k]: the column index reported for value k of a row; decimals[k] its scale;
  // group[k]: only columns of the same group are paired (empty: one group).
  RelationLearner(std::vector<int> columns, std::vector<int> decimals, RelationOptions opts = {},
                  std::vector<int> group = {});
  // values[k]: the scaled value of column k in this row, or kMissing.
  void AddRow(const int64_t* values);
  // The relations found, sorted by (lo, hi).
  std::vector<FieldRelation> Finish() const;

 private:
  struct Pair {
    int i, j;          // value indices: value i <= value j
    int64_t both = 0;  // rows with both present
  };
  std::vector<int> columns_, decimals_;
  RelationOptions opts_;
  std::vector<Pair> alive_;
  std::vector<std::vector<double>> sample_;  // [k] reservoir of column k's values
  std::vector<int64_t> seen_;                // [k] present values so far
  uint64_t rng_ = 0x9e3779b97f4a7c15ull;
};

}  // namespace ds
