#include "generate/copy_guard.h"

#include <algorithm>
#include <cstring>
#include <unordered_map>

#include "model/tensor_file.h"
#include "tokenize/field_tokenizer.h"
#include "util/bytes.h"
#include "util/fs.h"
#include "util/rng.h"

namespace ds {

namespace {

constexpr char kMagic[8] = {'D', 'S', 'C', 'O', 'P', 'Y', 'G', '1'};
constexpr uint32_t kVersion = 1;
constexpr size_t kHeaderBytes = 8 + 4 + 4 + 8 + 8;


}  // namespace

uint64_t CopyGuard::Hash(const std::vector<std::string>& fields) const {
  uint64_t h = SplitMix64(salt_ ^ uint64_t(fields.size()));
  for (const std::string& f : fields) {
    h = SplitMix64(h ^ uint64_t(f.size()));  // lengths keep ("ab","c") apart from ("a","bc")
    size_t i = 0;
    for (; i + 8 <= f.size(); i += 8) {
      uint64_t w;
      std::memcpy(&w, f.data() + i, 8);
      h = SplitMix64(h ^ w);
    }
    uint64_t w = 0;
    for (size_t k = 0; i + k < f.size(); ++k) w |= uint64_t(uint8_t(f[i + k])) << (8 * k);
    h = SplitMix64(h ^ w ^ 0x100);
  }
  return h;
}

std::shared_ptr<const CopyGuard> CopyGuard::Build(
    const Tokenizer& tok, const std::vector<std::vector<std::string>>& records, int min_count,
    uint64_t salt) {
  std::shared_ptr<CopyGuard> g(new CopyGuard());
  g->salt_ = salt;
  g->min_count_ = std::max(1, min_count);
  const auto* field = dynamic_cast<const FieldTokenizer*>(&tok);
  std::unordered_map<uint64_t, int64_t> counts;
  counts.reserve(records.size());
  std::vector<std::string> row;
  for (const auto& r : records) {
    row = r;
    if (field && row.size() == field->columns().size())
      for (size_t k = 0; k < row.size(); ++k) row[k] = field->CanonicalValue(int(k), row[k]);
    ++counts[g->Hash(row)];
  }
  for (const auto& [h, n] : counts)
    if (n < g->min_count_ && g->hashes_.size() < kMaxRows) g->hashes_.push_back(h);
  std::sort(g->hashes_.begin(), g->hashes_.end());
  return g;
}

bool CopyGuard::Copies(const std::vector<std::string>& fields) const {
  if (hashes_.empty()) return false;
  return std::binary_search(hashes_.begin(), hashes_.end(), Hash(fields));
}

std::string CopyGuard::Serialize() const {
  std::string s(kMagic, sizeof(kMagic));
  s.reserve(kHeaderBytes + 8 * hashes_.size() + 4);
  PutU32(&s, kVersion);
  PutU32(&s, uint32_t(min_count_));
  PutU64(&s, salt_);
  PutU64(&s, uint64_t(hashes_.size()));
  for (uint64_t h : hashes_) PutU64(&s, h);
  PutU32(&s, Crc32(s.data(), s.size()));
  return s;
}

Status CopyGuard::Save(const std::string& dir) const {
  return WriteFileAtomic(dir + "/" + kCopyGuardFile, Serialize());
}

Result<std::shared_ptr<const CopyGuard>> CopyGuard::Parse(std::string_view b,
                                                          const std::string& src) {
  if (b.size() < kHeaderBytes + 4 || std::memcmp(b.data(), kMagic, sizeof(kMagic)) != 0)
    return DS_ERR(kCorrupt, "{}: not a copy guard file (no 'DSCOPYG1' header)", src);
  ByteReader rd(b.substr(sizeof(kMagic)));
  const uint32_t version = rd.Get<uint32_t>();
  if (version != kVersion)
    return DS_ERR(kCorrupt, "{}: copy guard version {} (this build reads {})", src, version,
                  kVersion);
  const uint64_t min_count = rd.Get<uint32_t>();
  const uint64_t salt = rd.Get<uint64_t>();
  const uint64_t count = rd.Get<uint64_t>();
  if (min_count < 1 || min_count > 1000000000)
    return DS_ERR(kCorrupt, "{}: min_count {} is outside 1..1000000000", src, min_count);
  if (count > kMaxRows || b.size() != kHeaderBytes + 8 * count + 4)
    return DS_ERR(kCorrupt, "{}: {} bytes do not hold the {} hashes it announces", src, b.size(),
                  count);
  const uint32_t crc = ByteReader(b.substr(b.size() - 4)).Get<uint32_t>();
  if (crc != Crc32(b.data(), b.size() - 4))
    return DS_ERR(kCorrupt, "{}: checksum mismatch (file damaged or edited)", src);
  std::shared_ptr<CopyGuard> g(new CopyGuard());
  g->min_count_ = int(min_count);
  g->salt_ = salt;
  g->hashes_.resize(size_t(count));
  for (size_t i = 0; i < count; ++i) {
    g->hashes_[i] = rd.Get<uint64_t>();
    if (i > 0 && g->hashes_[i] <= g->hashes_[i - 1])
      return DS_ERR(kCorrupt, "{}: hash {} is out of order", src, i + 1);
  }
  return std::shared_ptr<const CopyGuard>(std::move(g));
}

Result<std::shared_ptr<const CopyGuard>> CopyGuard::Load(const std::string& path) {
  DS_ASSIGN_OR_RETURN(std::string bytes, ReadFile(path, kHeaderBytes + 8 * kMaxRows + 4));
  return Parse(bytes, path);
}

Result<std::string> WriteCopyGuard(const Config& config, bool delimited, const Tokenizer& tok,
                                   const std::vector<std::vector<std::string>>& records,
                                   uint64_t seed, const std::string& dir) {
  if (!config.copy_guard || !delimited || config.dp) return std::string();
  auto guard = CopyGuard::Build(tok, records, config.copy_guard_min_count,
                                SplitMix64(seed ^ 0x636f707967756172ull));
  DS_RETURN_IF_ERROR(guard->Save(dir));
  return fmt::format(
      "copy guard: {} distinct rows of the {} training rows are rare (seen fewer than {} "
      "times); generation rejects exact copies of them ({})",
      guard->size(), records.size(), guard->min_count(), kCopyGuardFile);
}

}  // namespace ds
