// FieldTokenizer::FromSchema: the field tokenizer's vocabulary from a public
// schema (schema/public_schema.h) and nothing else. No value of the training
// data is read here, so the tokenizer is the same whatever the private data.
#include <fmt/format.h>

#include <algorithm>
#include <set>

#include "schema/public_schema.h"
#include "tokenize/field_tokenizer.h"
#include "util/utf8.h"

namespace ds {

namespace {

// Uniform bin edges over the scaled range [lo, hi] (see public_schema.h).
std::vector<int64_t> UniformEdges(int64_t lo, int64_t hi, int bins) {
  const int64_t n = hi - lo + 1;
  int64_t nb = bins > 0 ? bins : (n <= PublicSchema::kExactValues ? n : PublicSchema::kDefaultBins);
  nb = std::clamp<int64_t>(nb, 1, n);
  std::vector<int64_t> edges;
  for (int64_t k = 0; k < nb; ++k) {
    const int64_t e = lo + int64_t((__int128)k * n / nb);
    if (edges.empty() || e > edges.back()) edges.push_back(e);
  }
  edges.push_back(hi + 1);
  return edges;
}

}  // namespace

Result<std::unique_ptr<FieldTokenizer>> FieldTokenizer::FromSchema(const PublicSchema& schema) {
  std::unique_ptr<FieldTokenizer> t(new FieldTokenizer());
  t->rare_count_ = 1;
  for (const PublicColumn& pc : schema.columns) {
    Column col;
    col.name = pc.name;
    col.type.type = pc.type;
    col.type.decimals = pc.decimals;
    col.type.trim = pc.trim;
    col.type.format = pc.format;
    col.type.constant = pc.value;
    switch (pc.type) {
      case FieldType::kCategorical:
        col.values = pc.values;
        break;
      case FieldType::kInteger:
      case FieldType::kDecimal: {
        col.missing = pc.missing;
        std::sort(col.missing.begin(), col.missing.end());
        int64_t lo = 0, hi = 0;
        ScaledBounds(pc, &lo, &hi);
        col.edges = UniformEdges(lo, hi, pc.bins);
        break;
      }
      case FieldType::kDatetime:
        col.missing = pc.missing;
        std::sort(col.missing.begin(), col.missing.end());
        col.year_lo = pc.min_year;
        col.year_hi = pc.max_year;
        break;
      case FieldType::kText:
      case FieldType::kId: {
        std::set<std::string> chars;
        size_t pos = 0;
        while (pos < pc.alphabet.size()) {
          const size_t at = pos;
          char32_t cp;
          if (!NextCodePointStrict(pc.alphabet, &pos, &cp))
            return DS_ERR(kInvalidInput, "{}: column '{}': alphabet is not valid UTF-8",
                          schema.source, pc.name);
          chars.insert(pc.alphabet.substr(at, pos - at));
        }
        col.chars.assign(chars.begin(), chars.end());
        col.max_len = pc.max_length;
        col.empty_ok = pc.empty_ok;
        break;
      }
      default:
        break;
    }
    t->cols_.push_back(std::move(col));
  }
  Status st = t->Finalize();
  if (!st.ok()) return st.WithContext(schema.source);
  return t;
}

}  // namespace ds
