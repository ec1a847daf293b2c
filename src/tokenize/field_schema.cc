// FieldTokenizer::FromSchema: the field tokenizer's vocabulary from a public
// schema (schema/public_schema.h) and nothing else. No value of the training
// data is read here, so the tokenizer is the same whatever the private data;
// under dp the numeric bin edges may instead come from a DP release
// (train/dp_bins.h), passed in.
#include <fmt/format.h>

#include <algorithm>
#include <set>

#include "schema/public_schema.h"
#include "tokenize/field_tokenizer.h"
#include "util/utf8.h"

namespace ds {

Result<std::unique_ptr<FieldTokenizer>> FieldTokenizer::FromSchema(
    const PublicSchema& schema, const std::vector<std::vector<int64_t>>* edges) {
  if (edges && edges->size() != schema.columns.size())
    return DS_ERR(kInternal, "{}: bin edges for {} columns, the schema has {}", schema.source,
                  edges->size(), schema.columns.size());
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
        const size_t i = size_t(&pc - schema.columns.data());
        if (edges && !(*edges)[i].empty()) {
          const std::vector<int64_t>& e = (*edges)[i];
          if (e.front() != lo || e.back() != hi + 1 || !std::is_sorted(e.begin(), e.end()) ||
              std::adjacent_find(e.begin(), e.end()) != e.end() || e.size() > size_t(kExactBins) + 1)
            return DS_ERR(kInternal, "{}: column '{}': bin edges do not partition [{}, {}]",
                          schema.source, pc.name, lo, hi);
          col.edges = e;
        } else {
          col.edges = UniformBinEdges(lo, hi, pc.bins);
        }
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
