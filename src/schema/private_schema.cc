#include "schema/private_schema.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <set>
#include <unordered_map>

#include "privacy/rdp_accountant.h"
#include "util/utf8.h"

namespace ds {

namespace {

// ---- the public cells ----

constexpr int kPrecisions = 11;  // numbers written with 0..9 decimals, or more
constexpr int kLengths = 11;     // other values of 1-8, 9-16, ..., 2049-4096 code points, longer

// Release 1's classes of one column: [missing][number by precision][datetime
// format][other by length].
struct ShapeClasses {
  std::vector<DateFormat> formats;  // DatetimeFormats(), parsed
  int number0() const { return 1; }
  int date0() const { return 1 + kPrecisions; }
  int other0() const { return date0() + int(formats.size()); }
  int size() const { return other0() + kLengths; }
};

ShapeClasses MakeClasses() {
  ShapeClasses c;
  for (const auto& spec : DatetimeFormats()) c.formats.push_back(DateFormat::Parse(spec).value());
  return c;
}

int LengthClass(size_t code_points) {
  int k = 0;
  for (size_t top = 8; k < kLengths - 1 && code_points > top; top *= 2) ++k;
  return k;
}
int LengthClassTop(int k) { return k >= kLengths - 1 ? PublicSchema::kMaxTextLength : 8 << k; }

int ClassOf(const ShapeClasses& cl, std::string_view v) {
  if (IsMissing(v)) return 0;
  DecimalValue d;
  if (ParseDecimal(v, &d)) return cl.number0() + std::min(d.precision, kPrecisions - 1);
  DateTime t;
  for (size_t f = 0; f < cl.formats.size(); ++f)
    if (cl.formats[f].Read(v, &t)) return cl.date0() + int(f);
  bool ok = true;
  return cl.other0() + LengthClass(SplitCodePoints(v, &ok).size());
}

// Numbers: cell i is [edge[i-1], edge[i]) with edge[-1] = -inf, edge[n] = +inf.
const std::vector<double>& MagnitudeEdges() {
  static const std::vector<double> edges = [] {
    std::vector<double> e = {0.0};
    for (int p = -6; p <= 15; ++p)
      for (double m : {1.0, 2.0, 5.0}) {
        e.push_back(m * std::pow(10.0, p));
        e.push_back(-m * std::pow(10.0, p));
      }
    std::sort(e.begin(), e.end());
    return e;
  }();
  return edges;
}
int MagnitudeCell(double v) {
  const auto& e = MagnitudeEdges();
  return int(std::upper_bound(e.begin(), e.end(), v) - e.begin());
}

// Years: [lo, hi) cells.
struct Span {
  int lo, hi;
};
const std::vector<Span>& YearCells() {
  static const std::vector<Span> cells = [] {
    std::vector<Span> c = {{0, 1000}};
    for (int y = 1000; y < 1900; y += 10) c.push_back({y, y + 10});
    for (int y = 1900; y < 2100; ++y) c.push_back({y, y + 1});
    for (int y = 2100; y < 3000; y += 10) c.push_back({y, y + 10});
    c.push_back({3000, 10000});
    return c;
  }();
  return cells;
}
int YearCell(int year) {
  const auto& c = YearCells();
  auto it = std::upper_bound(c.begin(), c.end(), year, [](int y, const Span& s) { return y < s.lo; });
  return int(it - c.begin()) - 1;
}

// ---- noise and what shows through it ----

struct Noise {
  SecureGaussian* gen;
  double s;  // per-cell stddev
  void Add(std::vector<double>* counts) const {
    std::vector<double> z(counts->size());
    gen->FillDouble(z.data(), z.size(), s);
    for (size_t i = 0; i < z.size(); ++i) (*counts)[i] += z[i];
  }
  // A cell of a `cells`-cell grid is visible above this (a false cell in the
  // grid with probability <= 0.1%).
  double Visible(size_t cells) const { return s * GaussianUpperQuantile(0.001 / double(cells)); }
};

// Indexes of the cells above the grid's visibility line (relative to
// `first`); the largest cell when none is.
std::vector<int> VisibleCells(const std::vector<double>& noisy, size_t first, size_t count,
                              const Noise& nz) {
  const double line = nz.Visible(count);
  std::vector<int> out;
  for (size_t i = first; i < first + count; ++i)
    if (noisy[i] > line) out.push_back(int(i - first));
  if (out.empty())
    out.push_back(int(std::max_element(noisy.begin() + long(first),
                                       noisy.begin() + long(first + count)) -
                      (noisy.begin() + long(first))));
  return out;
}


double Sum(const std::vector<double>& v, int a, int b) {
  double s = 0;
  for (int i = a; i < b; ++i) s += v[size_t(i)];
  return s;
}

// Numbers: the cells of MagnitudeEdges() grouped by decade ([1, 2), [2, 5),
// [5, 10) x 10^e, mirrored for negatives; the cells next to 0 and the two
// outer cells alone), so that a decade shows where its three cells would not.
int DecadeOf(size_t i) {
  const auto& e = MagnitudeEdges();
  if (i == 0 || i == e.size()) return i == 0 ? -10000 : 10000;
  const double lo = e[i - 1], hi = e[i];
  if (lo == 0 || hi == 0) return lo == 0 ? 1 : -1;
  return lo > 0 ? 100 + int(std::floor(std::log10(lo) + 1e-9))
                : -(100 + int(std::floor(std::log10(-hi) + 1e-9)));
}

// Consecutive cells with the same key form a group ([first, last]).
template <typename Key>
std::vector<std::pair<int, int>> GroupCells(size_t n, Key key) {
  std::vector<std::pair<int, int>> g;
  for (size_t i = 0; i < n; ++i) {
    if (g.empty() || key(i) != key(size_t(g.back().first)))
      g.push_back({int(i), int(i)});
    else
      g.back().second = int(i);
  }
  return g;
}

// The cells [*lo, *hi] that bounds keep, over groups of cells (decades):
// from the group with the largest sum (the mode: real), widened through
// neighbouring groups whose sum exceeds two stddevs of its noise (contiguous,
// so a false group far out cannot stretch the bounds), then trimmed inside
// the outer groups of cells below one stddev (likely empty). Clipping values
// that are there costs more than a looser bound.
void GroupedHull(const std::vector<double>& fine, const std::vector<std::pair<int, int>>& g,
                 const Noise& nz, int* lo, int* hi) {
  std::vector<double> z(g.size());  // each group's sum in units of its noise
  for (size_t k = 0; k < g.size(); ++k)
    z[k] = Sum(fine, g[k].first, g[k].second + 1) /
           (nz.s * std::sqrt(double(g[k].second - g[k].first + 1)));
  int a = int(std::max_element(z.begin(), z.end()) - z.begin()), b = a;
  while (a > 0 && z[size_t(a - 1)] > 2) --a;
  while (b + 1 < int(g.size()) && z[size_t(b + 1)] > 2) ++b;
  *lo = g[size_t(a)].first;
  *hi = g[size_t(b)].second;
  while (*lo < g[size_t(a)].second && fine[size_t(*lo)] < nz.s) ++*lo;
  while (*hi > g[size_t(b)].first && fine[size_t(*hi)] < nz.s) --*hi;
  if (*lo > *hi) *lo = *hi;
}


// ---- release 1: the type ----

struct ColumnPlan {
  FieldType type = FieldType::kCategorical;  // kCategorical: decided by release 2
  int decimals = 0;
  bool trim = false;
  std::string format;
  int max_length = 64;
  std::string note;
};

// Numeric when numbers show and no other non-missing class does.
ColumnPlan PlanFromShape(const ShapeClasses& cl, const std::vector<double>& c, const Noise& nz) {
  ColumnPlan p;
  const double line = nz.Visible(size_t(cl.size()));
  auto shows = [&](int a, int b) {
    for (int i = a; i < b; ++i)
      if (c[size_t(i)] > line) return true;
    return false;
  };
  const bool numbers = shows(cl.number0(), cl.date0()), dates = shows(cl.date0(), cl.other0()),
             others = shows(cl.other0(), cl.size());
  std::vector<int> long_text = VisibleCells(c, size_t(cl.other0()), kLengths, nz);
  p.max_length = LengthClassTop(long_text.back());
  if (numbers && !dates && !others) {
    // D: the largest precision that shows (a few values with more decimals
    // are rounded, as the exact rule's 99% does).
    const int d = VisibleCells(c, size_t(cl.number0()), kPrecisions, nz).back();
    p.decimals = std::min(d, 9);
    p.type = p.decimals == 0 ? FieldType::kInteger : FieldType::kDecimal;
    p.trim = p.decimals > 0 && shows(cl.number0(), cl.number0() + p.decimals);
    p.note = fmt::format("numbers at {} decimals", p.decimals);
  } else if (dates && !numbers && !others) {
    int best = cl.date0();
    for (int i = cl.date0(); i < cl.other0(); ++i)
      if (c[size_t(i)] > c[size_t(best)]) best = i;
    p.type = FieldType::kDatetime;
    p.format = cl.formats[size_t(best - cl.date0())].spec();
    p.note = "dates " + p.format;
  } else {
    p.note = "values";
  }
  return p;
}

// The type the user gave (public): only what release 1 would have said.
Result<ColumnPlan> PlanFromUser(const std::string& forced) {
  ColumnPlan p;
  p.note = "type given";
  if (forced.rfind("datetime:", 0) == 0) {
    DS_ASSIGN_OR_RETURN(DateFormat f, DateFormat::Parse(forced.substr(9)));
    p.type = FieldType::kDatetime;
    p.format = f.spec();
    return p;
  }
  if (!ParseFieldTypeName(forced, &p.type))
    return DS_ERR(kInvalidArgument, "unknown type '{}'", forced);
  if (p.type == FieldType::kDatetime || p.type == FieldType::kConstant ||
      p.type == FieldType::kEmpty)
    return DS_ERR(kInvalidArgument,
                  "type '{}' cannot be given for a private schema (use datetime:<format>, "
                  "categorical, integer, decimal, text or id)",
                  forced);
  return p;
}

// ---- release 2: the values ----

struct ColumnInput {
  std::vector<std::string_view> values;
  bool measured = false;  // release 1 counted this column
  double rows = 0;        // then: the noisy row count (SharedRowCount)
};

// Cells for the missing spellings (public keys), after `base` grid cells.
void CountMissing(std::string_view v, size_t base, std::vector<double>* cells) {
  const auto& ms = MissingSpellings();
  for (size_t i = 0; i < ms.size(); ++i)
    if (v == ms[i]) (*cells)[base + i] += 1;
}
std::vector<std::string> VisibleMissing(const std::vector<double>& c, size_t base,
                                        const Noise& nz) {
  const auto& ms = MissingSpellings();
  std::vector<std::string> out;
  for (size_t i = 0; i < ms.size(); ++i)
    if (c[base + i] > nz.Visible(ms.size())) out.push_back(ms[i]);
  return out;
}

void FillNumeric(const ColumnInput& in, const Noise& nz, PublicColumn* col) {
  const auto& edges = MagnitudeEdges();
  const size_t grid = edges.size() + 1;
  std::vector<double> cells(grid + MissingSpellings().size(), 0.0);
  for (std::string_view v : in.values) {
    NumberSyntax n;
    if (IsMissing(v)) {
      CountMissing(v, grid, &cells);
    } else if (ScanNumber(v, &n)) {
      cells[size_t(MagnitudeCell(n.value))] += 1;
    }
  }
  nz.Add(&cells);
  int lo = 0, hi = 0;
  // Decades of magnitude below 10^-D hold no number at D decimals (0 apart):
  // left out, so that 0 and 1..9 are neighbours.
  std::vector<std::pair<int, int>> groups;
  for (const auto& g : GroupCells(grid, DecadeOf)) {
    const int d = DecadeOf(size_t(g.first));
    if (d == 1 || d == -1 || std::abs(d) >= 100 - col->decimals) groups.push_back(g);
  }
  GroupedHull(cells, groups, nz, &lo, &hi);
  const double scale = std::pow(10.0, col->decimals), cap = 1e15 / scale;
  const double mn = lo == 0 ? edges.front() : edges[size_t(lo - 1)];
  const double mx = size_t(hi) == edges.size() ? edges.back() : edges[size_t(hi)];
  col->min = std::floor(std::clamp(mn, -cap, cap) * scale) / scale;
  col->max = std::ceil(std::clamp(mx, -cap, cap) * scale) / scale;
  col->missing = VisibleMissing(cells, grid, nz);
}

void FillDatetime(const ColumnInput& in, const Noise& nz, PublicColumn* col) {
  const auto& years = YearCells();
  std::vector<double> cells(years.size() + MissingSpellings().size(), 0.0);
  const DateFormat f = DateFormat::Parse(col->format).value();
  for (std::string_view v : in.values) {
    DateTime d;
    if (IsMissing(v)) {
      CountMissing(v, years.size(), &cells);
    } else if (f.Read(v, &d)) {
      cells[size_t(YearCell(d.year))] += 1;
    }
  }
  nz.Add(&cells);
  int lo = 0, hi = 0;
  GroupedHull(cells,
              GroupCells(years.size(), [&](size_t i) { return years[i].lo / 10; }), nz, &lo,
              &hi);
  col->min_year = years[size_t(lo)].lo;
  col->max_year = years[size_t(hi)].hi - 1;
  col->missing = VisibleMissing(cells, years.size(), nz);
}

// Text of a type the user gave: a histogram of lengths for max_length.
void FillLength(const ColumnInput& in, const Noise& nz, PublicColumn* col) {
  std::vector<double> cells(kLengths + 1, 0.0);  // [0]: the empty string
  for (std::string_view v : in.values) {
    bool ok = true;
    cells[v.empty() ? 0 : size_t(1 + LengthClass(SplitCodePoints(v, &ok).size()))] += 1;
  }
  nz.Add(&cells);
  col->max_length = LengthClassTop(VisibleCells(cells, 1, kLengths, nz).back());
  col->empty_ok = cells[0] > nz.Visible(1);
}

// Categorical or text: each distinct value's noisy count; values above tau
// are released (partition selection), the missing spellings (public keys)
// above their visibility line.
void FillValues(const ColumnInput& in, const Noise& nz, double tau, PublicColumn* col,
                std::string* note) {
  std::map<std::string_view, double> counts;  // ordered: the noise draws do not depend on hashing
  for (std::string_view v : in.values) counts[v] += 1;
  std::vector<double> noisy;
  for (const auto& kv : counts) noisy.push_back(kv.second);
  nz.Add(&noisy);
  double kept = 0;
  size_t i = 0;
  for (const auto& kv : counts) {
    const double c = noisy[i++];
    const bool pub = IsMissing(kv.first);
    if (c > (pub ? nz.Visible(MissingSpellings().size()) : tau)) {
      col->values.emplace_back(kv.first);
      kept += c;
    }
  }
  const bool categorical =
      !col->values.empty() && (!in.measured || kept >= 0.5 * in.rows);
  *note += fmt::format(": {} values released", col->values.size());
  if (categorical) return;
  col->empty_ok = std::find(col->values.begin(), col->values.end(), "") != col->values.end();
  col->values.clear();
  col->type = FieldType::kText;
  col->alphabet = PublicSchema::DefaultAlphabet();  // public: printable ASCII
  *note += fmt::format(" (under half the rows: text up to {} characters)", col->max_length);
}

PublicColumn ColumnOf(const std::string& name, const ColumnPlan& p) {
  PublicColumn c;
  c.name = name;
  c.type = p.type == FieldType::kId ? FieldType::kText : p.type;
  c.decimals = p.decimals;
  c.trim = p.trim;
  c.format = p.format;
  c.max_length = p.max_length;
  if (IsTextField(c.type)) c.alphabet = PublicSchema::DefaultAlphabet();
  return c;
}

// Release 2 for one column (the plan from release 1 or the user).
void FillColumn(const ColumnInput& in, bool given, const Noise& nz, double tau, PublicColumn* col,
                std::string* note) {
  if (IsNumericField(col->type)) {
    FillNumeric(in, nz, col);
    *note += fmt::format(": [{}, {}]", col->min, col->max);
  } else if (col->type == FieldType::kDatetime) {
    FillDatetime(in, nz, col);
    *note += fmt::format(": years {}..{}", col->min_year, col->max_year);
  } else if (given && col->type == FieldType::kText) {
    FillLength(in, nz, col);
    *note += fmt::format(": up to {} characters", col->max_length);
  } else {
    FillValues(in, nz, tau, col, note);
  }
}

// Every column counts the same records: their noisy totals averaged (the
// noise of one total is s sqrt(classes); of the mean, sqrt(columns) less).
void SharedRowCount(std::vector<ColumnInput>* in) {
  double sum = 0;
  int n = 0;
  for (const auto& c : *in)
    if (c.measured) sum += c.rows, ++n;
  for (auto& c : *in)
    if (c.measured) c.rows = sum / n;
}

Status CheckOptions(const std::vector<std::string>& header, const PrivateSchemaOptions& o,
                    size_t records) {
  if (!(o.epsilon > 0) || !std::isfinite(o.epsilon))
    return DS_ERR(kInvalidArgument, "the schema's epsilon must be > 0, got {}", o.epsilon);
  if (!(o.delta > 0 && o.delta < 1))
    return DS_ERR(kInvalidArgument, "the schema's delta must be in (0, 1), got {}", o.delta);
  if (header.empty() || records == 0)
    return DS_ERR(kInvalidInput, "no records to derive a schema from");
  for (const auto& kv : o.field_types)
    if (std::find(header.begin(), header.end(), kv.first) == header.end())
      return DS_ERR(kInvalidArgument, "field_types: no column '{}'", kv.first);
  return Status::Ok();
}

}  // namespace

double GaussianUpperQuantile(double p) {
  double lo = -40, hi = 40;  // P(Z > z) = erfc(z / sqrt 2) / 2, decreasing in z
  for (int i = 0; i < 200; ++i) {
    const double mid = 0.5 * (lo + hi);
    (0.5 * std::erfc(mid / std::sqrt(2.0)) > p ? lo : hi) = mid;
  }
  return 0.5 * (lo + hi);
}

double SchemaNoiseMultiplier(double epsilon, double delta, int releases) {
  const std::vector<double> orders = DefaultOrders();
  auto eps = [&](double sigma) {
    std::vector<double> rdp = GaussianRdp(sigma, orders);
    for (double& r : rdp) r *= releases;
    return RdpToEpsilon(orders, rdp, delta).epsilon;
  };
  double lo = 1e-3, hi = 1e6;
  while (hi / lo > 1 + 1e-7) {
    const double mid = std::sqrt(lo * hi);
    (eps(mid) > epsilon ? lo : hi) = mid;
  }
  return hi;
}

Result<PublicSchema> DerivePrivateSchema(const std::vector<std::string>& header,
                                         const std::vector<std::vector<std::string>>& records,
                                         const PrivateSchemaOptions& o, SecureGaussian* noise,
                                         PrivateSchemaReport* report) {
  DS_RETURN_IF_ERROR(CheckOptions(header, o, records.size()));
  const size_t k = header.size();
  const bool all_given = o.field_types.size() == k;
  PrivateSchemaReport rep;
  rep.releases = all_given ? 1 : 2;
  rep.noise_multiplier = SchemaNoiseMultiplier(o.epsilon, o.delta / 2, rep.releases);
  rep.cell_stddev = rep.noise_multiplier * std::sqrt(double(k));
  rep.value_threshold = 1 + rep.cell_stddev * GaussianUpperQuantile(o.delta / 2 / double(k));
  rep.epsilon = o.epsilon;
  rep.delta = o.delta;
  const Noise nz{noise, rep.cell_stddev};
  const ShapeClasses cl = MakeClasses();
  std::vector<ColumnInput> in(k);
  std::vector<ColumnPlan> plans(k);
  for (size_t j = 0; j < k; ++j) {  // release 1 (or the user's types)
    in[j].values.reserve(records.size());
    for (const auto& r : records) in[j].values.push_back(r.at(j));
    auto it = o.field_types.find(header[j]);
    if (it != o.field_types.end()) {
      auto p = PlanFromUser(it->second);
      if (!p.ok()) return p.status().WithContext(fmt::format("column '{}'", header[j]));
      plans[j] = *p;
      continue;
    }
    std::vector<double> c(size_t(cl.size()), 0.0);
    for (std::string_view v : in[j].values) c[size_t(ClassOf(cl, v))] += 1;
    nz.Add(&c);
    in[j].measured = true;
    in[j].rows = Sum(c, 0, cl.size());
    plans[j] = PlanFromShape(cl, c, nz);
  }
  SharedRowCount(&in);
  PublicSchema s;
  s.source = "derived privately";
  for (size_t j = 0; j < k; ++j) {  // release 2
    PublicColumn col = ColumnOf(header[j], plans[j]);
    std::string note = plans[j].note;
    FillColumn(in[j], o.field_types.count(header[j]) > 0, nz, rep.value_threshold, &col, &note);
    rep.notes.push_back(header[j] + ": " + FieldTypeName(col.type) + ", " + note);
    s.columns.push_back(std::move(col));
  }
  if (report) *report = std::move(rep);
  return s;
}

std::string PrivateSchemaReport::Describe() const {
  return fmt::format(
      "schema derived privately: epsilon {:.4g}, delta {:.3g} ({} Gaussian release{}, noise "
      "multiplier {:.4g}, per-cell stddev {:.4g}; a value is listed only when its noisy count "
      "exceeds {:.4g})",
      epsilon, delta, releases, releases == 1 ? "" : "s", noise_multiplier, cell_stddev,
      value_threshold);
}

}  // namespace ds
