// The datasynth tensor file: a versioned, checksummed container of named
// float32 arrays, used for weights (weights.bin), checkpoints and optimizer
// state. It is untrusted input: the reader checks every offset and size against
// the file size, the header and per-section CRC-32s, and never executes or
// interprets anything beyond numbers.
//
// Layout (little-endian):
//   [0, 4096)   header page
//     0   char[8]  magic "DSTENSR\0"
//     8   u32      format version (kTensorFileVersion)
//     12  u32      number of sections S (<= kMaxSections)
//     16  u64      file size in bytes
//     24  u32      CRC-32 of the header page with this field zeroed
//     28  u32      reserved (0)
//     32  S x 64-byte section records:
//           char[40] name (NUL-padded), u64 offset, u64 count (floats),
//           u32 CRC-32 of the data, u32 reserved
//   data: each section at a 4096-byte aligned offset (so a mapped file gives
//         page-aligned float pointers), float32 little-endian.
//
// Files are written to a temporary name in the same directory, fsynced and
// renamed, so a reader never sees a half-written file.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "util/status.h"

namespace ds {

inline constexpr uint32_t kTensorFileVersion = 1;
inline constexpr uint32_t kMaxSections = 60;

struct TensorSection {
  std::string name;
  const float* data = nullptr;  // [count]
  size_t count = 0;
};

// Writes the sections atomically to `path`.
Status WriteTensorFile(const std::string& path, const std::vector<TensorSection>& sections);

// A read-only, memory-mapped, verified tensor file. Worker processes that map
// the same file share its pages (the weights are not copied per worker).
class MappedTensorFile {
 public:
  ~MappedTensorFile();
  MappedTensorFile(const MappedTensorFile&) = delete;
  MappedTensorFile& operator=(const MappedTensorFile&) = delete;

  // Maps and verifies (header, bounds, CRCs, finite values).
  static Result<std::unique_ptr<MappedTensorFile>> Open(const std::string& path);

  // The section called `name`; error naming the file if absent or if its
  // size is not `expected_count` (when expected_count != SIZE_MAX).
  Result<const float*> Section(const std::string& name, size_t expected_count = SIZE_MAX) const;
  std::vector<std::string> SectionNames() const;
  const std::string& path() const { return path_; }
  size_t file_bytes() const { return size_; }

 private:
  MappedTensorFile() = default;
  std::string path_;
  void* base_ = nullptr;
  size_t size_ = 0;
  struct Entry {
    std::string name;
    size_t offset, count;
  };
  std::vector<Entry> entries_;
};

uint32_t Crc32(const void* data, size_t bytes, uint32_t crc = 0);

}  // namespace ds
