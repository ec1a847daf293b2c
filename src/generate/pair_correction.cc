#include "generate/pair_correction.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "model/tensor_file.h"
#include "util/bytes.h"
#include "util/fs.h"

namespace ds {

namespace {

constexpr char kMagic[8] = {'D', 'S', 'P', 'A', 'I', 'R', 'T', '1'};
constexpr uint32_t kVersion = 2;  // 2: optional group maps
constexpr size_t kFields = 8;  // u32 per table header

// The header fields of one table (t.w not read).
Status CheckShape(const PairTable& t, const std::string& src, size_t k) {
  const int64_t cells = int64_t(t.hi) - t.lo, pcells = int64_t(t.phi) - t.plo;
  if (t.parent < 0 || t.parent >= t.child)
    return DS_ERR(kCorrupt, "{}: table {}: parent column {} is not before child column {}", src,
                  k + 1, t.parent, t.child);
  if (t.lo < 0 || cells < 1 || t.plo < 0 || pcells < 1)
    return DS_ERR(kCorrupt, "{}: table {}: empty id range", src, k + 1);
  if (t.rows < 1 || t.cols < 1 || t.rows > PairTables::kMaxGroups ||
      t.cols > PairTables::kMaxGroups || t.rows > pcells || t.cols > cells)
    return DS_ERR(kCorrupt, "{}: table {}: {} x {} groups do not fit ids {}..{} x {}..{}", src,
                  k + 1, t.rows, t.cols, t.plo, t.phi, t.lo, t.hi);
  return Status::Ok();
}

Status CheckMaps(const PairTable& t, const std::string& src, size_t k);

// Version 2's optional maps of table k (header already read and checked).
Status ReadMaps(ByteReader* rd, PairTable* t, const std::string& src, size_t k) {
  if (rd->remaining() < 4) return DS_ERR(kCorrupt, "{}: truncated in table {}'s maps", src, k + 1);
  const uint32_t maps = rd->Get<uint32_t>();
  if (maps > 3) return DS_ERR(kCorrupt, "{}: table {}: map flags {}", src, k + 1, maps);
  auto read = [&](std::vector<int32_t>* m, int ids) -> Status {
    if (rd->remaining() < 4 * size_t(ids))
      return DS_ERR(kCorrupt, "{}: truncated in table {}'s maps", src, k + 1);
    m->resize(size_t(ids));
    for (int32_t& g : *m) g = int32_t(std::min<uint32_t>(rd->Get<uint32_t>(), 1u << 30));
    return Status::Ok();
  };
  if (maps & 1) DS_RETURN_IF_ERROR(read(&t->row_of, t->phi - t->plo));
  if (maps & 2) DS_RETURN_IF_ERROR(read(&t->col_of, t->hi - t->lo));
  return CheckMaps(*t, src, k);
}

// A group map (empty: the uniform formula): one group in [0, groups) per id,
// every group used.
Status CheckMap(const std::vector<int32_t>& map, int ids, int groups, const char* what,
                const std::string& src, size_t k) {
  if (map.empty()) return Status::Ok();
  if (map.size() != size_t(ids))
    return DS_ERR(kCorrupt, "{}: table {}: {} map of {} ids for {}", src, k + 1, what, map.size(), ids);
  std::vector<char> used(size_t(groups), 0);
  for (int32_t g : map) {
    if (g < 0 || g >= groups)
      return DS_ERR(kCorrupt, "{}: table {}: {} group {} (of {})", src, k + 1, what, g, groups);
    used[size_t(g)] = 1;
  }
  for (char u : used)
    if (!u) return DS_ERR(kCorrupt, "{}: table {}: a {} group holds no id", src, k + 1, what);
  return Status::Ok();
}

Status CheckMaps(const PairTable& t, const std::string& src, size_t k) {
  DS_RETURN_IF_ERROR(CheckMap(t.row_of, t.phi - t.plo, t.rows, "row", src, k));
  return CheckMap(t.col_of, t.hi - t.lo, t.cols, "column", src, k);
}

}  // namespace

void FirstTokenRange(const FieldTokenizer& tok, int col, int* lo, int* hi) {
  FieldTokenizer::Cursor c;
  c.col = col;
  tok.AllowedRange(c, lo, hi);
}

std::string PairTables::Serialize() const {
  std::string s(kMagic, sizeof(kMagic));
  PutU32(&s, kVersion);
  PutU32(&s, uint32_t(tables.size()));
  for (const PairTable& t : tables) {
    for (int v : {t.child, t.parent, t.lo, t.hi, t.plo, t.phi, t.rows, t.cols}) PutU32(&s, uint32_t(v));
    PutU32(&s, uint32_t(t.row_of.empty() ? 0 : 1) | uint32_t(t.col_of.empty() ? 0 : 2));
    for (int32_t g : t.row_of) PutU32(&s, uint32_t(g));
    for (int32_t g : t.col_of) PutU32(&s, uint32_t(g));
    for (float w : t.w) {
      uint32_t u;
      std::memcpy(&u, &w, 4);
      PutU32(&s, u);
    }
  }
  PutU32(&s, Crc32(s.data(), s.size()));
  return s;
}

Status PairTables::Save(const std::string& dir) const {
  return WriteFileAtomic(dir + "/" + kPairTablesFile, Serialize());
}

Result<std::shared_ptr<const PairTables>> PairTables::Parse(std::string_view b,
                                                            const std::string& src) {
  if (b.size() < 20 || std::memcmp(b.data(), kMagic, sizeof(kMagic)) != 0)
    return DS_ERR(kCorrupt, "{}: not a pair table file (no 'DSPAIRT1' header)", src);
  if (ByteReader(b.substr(b.size() - 4)).Get<uint32_t>() != Crc32(b.data(), b.size() - 4))
    return DS_ERR(kCorrupt, "{}: checksum mismatch (file damaged or edited)", src);
  ByteReader rd(b.substr(sizeof(kMagic), b.size() - sizeof(kMagic) - 4));
  const uint32_t version = rd.Get<uint32_t>(), count = rd.Get<uint32_t>();
  if (version != kVersion && version != 1)
    return DS_ERR(kCorrupt, "{}: pair table version {} (this build reads 1 and {})", src, version,
                  kVersion);
  if (count > uint32_t(kMaxTables))
    return DS_ERR(kCorrupt, "{}: {} tables (at most {})", src, count, kMaxTables);
  auto out = std::make_shared<PairTables>();
  for (size_t k = 0; k < count; ++k) {
    if (rd.remaining() < 4 * kFields)
      return DS_ERR(kCorrupt, "{}: truncated at table {} of {}", src, k + 1, count);
    PairTable t;
    int* f[kFields] = {&t.child, &t.parent, &t.lo, &t.hi, &t.plo, &t.phi, &t.rows, &t.cols};
    for (size_t i = 0; i < kFields; ++i) {
      const uint32_t v = rd.Get<uint32_t>();
      if (v > uint32_t(1) << 30) return DS_ERR(kCorrupt, "{}: table {}: field {} is {}", src, k + 1, i + 1, v);
      *f[i] = int(v);
    }
    DS_RETURN_IF_ERROR(CheckShape(t, src, k));
    if (version >= 2) DS_RETURN_IF_ERROR(ReadMaps(&rd, &t, src, k));
    const size_t n = size_t(t.rows) * size_t(t.cols);
    if (rd.remaining() < 4 * n)
      return DS_ERR(kCorrupt, "{}: truncated in table {}'s weights", src, k + 1);
    t.w.resize(n);
    for (size_t i = 0; i < n; ++i) {
      const uint32_t u = rd.Get<uint32_t>();
      std::memcpy(&t.w[i], &u, 4);
      if (!std::isfinite(t.w[i]) || std::fabs(t.w[i]) > kMaxWeight)
        return DS_ERR(kCorrupt, "{}: table {}: weight {} is {} (finite, |w| <= {})", src, k + 1,
                      i + 1, t.w[i], kMaxWeight);
    }
    out->tables.push_back(std::move(t));
  }
  if (!rd.at_end())
    return DS_ERR(kCorrupt, "{}: {} bytes after the {} tables", src, rd.remaining(), count);
  return std::shared_ptr<const PairTables>(std::move(out));
}

Status PairTables::Check(const FieldTokenizer& tok, const std::string& src) const {
  const int ncols = int(tok.columns().size());
  for (size_t k = 0; k < tables.size(); ++k) {
    const PairTable& t = tables[k];
    if (t.child >= ncols)
      return DS_ERR(kCorrupt, "{}: table {}: column {} (the tokenizer has {})", src, k + 1,
                    t.child, ncols);
    DS_RETURN_IF_ERROR(CheckShape(t, src, k));
    DS_RETURN_IF_ERROR(CheckMaps(t, src, k));
    int lo, hi, plo, phi;
    FirstTokenRange(tok, t.child, &lo, &hi);
    FirstTokenRange(tok, t.parent, &plo, &phi);
    if (lo != t.lo || hi != t.hi || plo != t.plo || phi != t.phi)
      return DS_ERR(kCorrupt,
                    "{}: table {}: ids {}..{} x {}..{} are not columns {} and {}'s first tokens "
                    "(tables from another model?)",
                    src, k + 1, t.plo, t.phi, t.lo, t.hi, t.parent, t.child);
    if (t.w.size() != size_t(t.rows) * size_t(t.cols))
      return DS_ERR(kCorrupt, "{}: table {}: {} weights for {} x {}", src, k + 1, t.w.size(),
                    t.rows, t.cols);
  }
  return Status::Ok();
}

}  // namespace ds
