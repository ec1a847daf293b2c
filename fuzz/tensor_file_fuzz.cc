// Fuzz target: the tensor file container (model/tensor_file.h), the format of the
// weights and checkpoint files, opened with MappedTensorFile::Open.
//
// A random file almost never passes the header checksum, so the harness builds the file
// from a compact description and can repair the checksums, letting the fuzzer reach the
// section checks behind them:
//   byte 0  mode: bit 0 raw (the rest of the input IS the file; nothing below applies),
//           bit 1 set the file-size field to the real size, bit 2 recompute every
//           in-bounds section's CRC, bit 3 recompute the header CRC (applied last)
//   bytes 1-2  L (little-endian, taken mod 4097): the first L bytes of the rest go to
//           the start of the 4096-byte header page (zero padded); the remaining bytes
//           are the data area from offset 4096 on.
// After a successful Open every section is read in full (out-of-bounds pointers crash)
// and must hold finite values only.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>

#include "fuzz_util.h"
#include "model/tensor_file.h"

namespace ds::fuzz {

inline int TensorFileOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const uint8_t mode = data[0];
  std::string file;
  if (mode & 1) {
    file.assign(AsText(data + 1, size - 1));
  } else {
    if (size < 3) return 0;
    size_t header_len = (size_t(data[1]) | size_t(data[2]) << 8) % 4097;
    const std::string_view rest = AsText(data + 3, size - 3);
    header_len = std::min(header_len, rest.size());
    file.assign(4096, '\0');
    std::memcpy(file.data(), rest.data(), header_len);
    file.append(rest.substr(header_len));
    auto get32 = [&](size_t off) {
      uint32_t v;
      std::memcpy(&v, file.data() + off, 4);
      return v;
    };
    auto get64 = [&](size_t off) {
      uint64_t v;
      std::memcpy(&v, file.data() + off, 8);
      return v;
    };
    auto put32 = [&](size_t off, uint32_t v) { std::memcpy(file.data() + off, &v, 4); };
    if (mode & 2) {
      const uint64_t n = file.size();
      std::memcpy(file.data() + 16, &n, 8);
    }
    if (mode & 4) {
      const uint32_t n = std::min<uint32_t>(get32(12), 63);
      for (uint32_t i = 0; i < n; ++i) {
        const size_t rec = 32 + size_t(i) * 64;
        const uint64_t off = get64(rec + 40), count = get64(rec + 48);
        if (off <= file.size() && count <= (file.size() - off) / 4)
          put32(rec + 56, Crc32(file.data() + off, count * 4));
      }
    }
    if (mode & 8) {
      put32(24, 0);
      put32(24, Crc32(file.data(), 4096));
    }
  }
  MemFile mem(file);
  auto f = MappedTensorFile::Open(mem.path());
  if (!f.ok()) {
    DS_FUZZ_CHECK(!f.status().message().empty());
    return 0;
  }
  DS_FUZZ_CHECK((*f)->file_bytes() == file.size());
  // Read every section in full through the mapping, using the header's own records:
  // Open promised that each lies inside the file and holds finite values only.
  uint32_t n;
  std::memcpy(&n, file.data() + 12, 4);
  DS_FUZZ_CHECK(n <= kMaxSections && (*f)->SectionNames().size() == n);
  for (uint32_t i = 0; i < n; ++i) {
    const size_t rec = 32 + size_t(i) * 64;
    char name[41] = {};
    std::memcpy(name, file.data() + rec, 40);
    uint64_t off, count;
    std::memcpy(&off, file.data() + rec + 40, 8);
    std::memcpy(&count, file.data() + rec + 48, 8);
    auto p = (*f)->Section(name);
    DS_FUZZ_CHECK(p.ok());
    DS_FUZZ_CHECK(uintptr_t(*p) % 4096 == 0);
    if ((*f)->Section(name, count).ok()) {  // the first section of this name
      for (uint64_t j = 0; j < count; ++j) DS_FUZZ_CHECK(std::isfinite((*p)[j]));
    }
  }
  (void)(*f)->Section("params", 16);
  (void)(*f)->Section("no such section");
  return 0;
}

}  // namespace ds::fuzz

#ifndef DS_FUZZ_NO_MAIN
extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return ds::fuzz::TensorFileOneInput(data, size);
}
#endif
