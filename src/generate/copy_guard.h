// Copy guard: generation rejects records that exactly copy a RARE training row
// (one seen fewer than `min_count` times in the training data), and samples
// again (docs/privacy.md, "Exact copies of rare rows").
//
//   train:    CopyGuard::Build(tok, records, 2, salt) -> Save(model_dir)
//             (copy_guard.bin; model_params.json names its CRC-32)
//   generate: LoadModel reads it (Model::copy_guard); ValidateRecord marks a
//             record whose fields copy a guarded row invalid, with the
//             explanation kCopyExplain. The scheduler then draws the next
//             attempt, as for any invalid record: every attempt is a pure
//             function of (seed, attempt id), so the output stays
//             byte-identical for any worker count and across --resume.
//
// The file holds only salted 64-bit hashes of the guarded rows, never a value:
//   "DSCOPYG1"  magic (8 bytes)
//   u32 version (1), u32 min_count, u64 salt, u64 count
//   u64 hash[count]   strictly increasing
//   u32 CRC-32 of everything before it
// (little-endian). A row is hashed as generation writes it: through the
// tokenizer's canonical spelling (a normalized number `3e+05` as `300000`).
// Rows seen min_count times or more are not identifying (mpg's own holdout
// repeats 10% of its training rows) and are not guarded.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "config/config.h"
#include "tokenize/tokenizer.h"
#include "util/status.h"

namespace ds {

inline constexpr const char* kCopyGuardFile = "copy_guard.bin";
// The explanation of a rejected copy (GeneratedRecord::explain starts with it).
inline constexpr std::string_view kCopyExplain = "exact copy of a rare training row";

class CopyGuard {
 public:
  // At most this many hashes (8 bytes each: 2 GiB).
  static constexpr uint64_t kMaxRows = uint64_t(1) << 28;

  // The rows of `records` (training fields) seen fewer than min_count times,
  // in their canonical spelling (see the file comment). min_count >= 1 (1:
  // nothing guarded).
  static std::shared_ptr<const CopyGuard> Build(const Tokenizer& tok,
                                                const std::vector<std::vector<std::string>>& records,
                                                int min_count, uint64_t salt);
  // Writes dir/copy_guard.bin atomically.
  Status Save(const std::string& dir) const;
  // Reads and checks a file (untrusted input: size, magic, version, count,
  // order, CRC); errors are kCorrupt naming the file.
  static Result<std::shared_ptr<const CopyGuard>> Load(const std::string& path);
  static Result<std::shared_ptr<const CopyGuard>> Parse(std::string_view bytes,
                                                        const std::string& source);
  std::string Serialize() const;

  // True when `fields` (a generated record's fields) copy a guarded row.
  bool Copies(const std::vector<std::string>& fields) const;

  uint64_t Hash(const std::vector<std::string>& fields) const;
  size_t size() const { return hashes_.size(); }
  int min_count() const { return min_count_; }

 private:
  CopyGuard() = default;
  uint64_t salt_ = 0;
  int min_count_ = 2;
  std::vector<uint64_t> hashes_;  // sorted, unique
};

// Training: builds and saves dir/copy_guard.bin when config.copy_guard is on,
// the data is delimited and the run is not --dp (the hashes answer "was this
// exact row a rare training row?", which a DP guarantee must not); the salt
// comes from the training seed (every rank of an mpirun writes the same file).
// Returns the line for the training log ("" when nothing was written).
Result<std::string> WriteCopyGuard(const Config& config, bool delimited, const Tokenizer& tok,
                                   const std::vector<std::vector<std::string>>& records,
                                   uint64_t seed, const std::string& dir);

}  // namespace ds
