#include "model/tensor_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <cerrno>
#include <cmath>
#include <cstring>

#include "util/fs.h"

namespace ds {
namespace {

constexpr char kMagic[8] = {'D', 'S', 'T', 'E', 'N', 'S', 'R', '\0'};
constexpr size_t kHeaderBytes = 4096;
constexpr size_t kAlign = 4096;
constexpr size_t kRecordBytes = 64;
constexpr size_t kNameBytes = 40;

size_t AlignUp(size_t x) { return (x + kAlign - 1) / kAlign * kAlign; }

template <typename T>
void Put(std::string* buf, size_t off, T v) {
  std::memcpy(buf->data() + off, &v, sizeof(T));
}
template <typename T>
T Get(const uint8_t* p, size_t off) {
  T v;
  std::memcpy(&v, p + off, sizeof(T));
  return v;
}

}  // namespace

uint32_t Crc32(const void* data, size_t bytes, uint32_t crc) {
  const auto* p = static_cast<const Bytef*>(data);
  uLong c = crc;
  while (bytes > 0) {
    uInt n = bytes > (1u << 30) ? (1u << 30) : uInt(bytes);
    c = crc32(c, p, n);
    p += n;
    bytes -= n;
  }
  return uint32_t(c);
}

Status WriteTensorFile(const std::string& path, const std::vector<TensorSection>& sections) {
  if (sections.size() > kMaxSections)
    return DS_ERR(kInternal, "{}: too many tensor sections ({})", path, sections.size());
  std::string header(kHeaderBytes, '\0');
  std::memcpy(header.data(), kMagic, 8);
  Put<uint32_t>(&header, 8, kTensorFileVersion);
  Put<uint32_t>(&header, 12, uint32_t(sections.size()));
  size_t off = kHeaderBytes;
  std::vector<size_t> offsets;
  for (size_t i = 0; i < sections.size(); ++i) {
    const auto& s = sections[i];
    if (s.name.empty() || s.name.size() >= kNameBytes)
      return DS_ERR(kInternal, "bad tensor section name '{}'", s.name);
    size_t rec = 32 + i * kRecordBytes;
    std::memcpy(header.data() + rec, s.name.data(), s.name.size());
    Put<uint64_t>(&header, rec + 40, off);
    Put<uint64_t>(&header, rec + 48, s.count);
    Put<uint32_t>(&header, rec + 56, Crc32(s.data, s.count * sizeof(float)));
    offsets.push_back(off);
    off = AlignUp(off + s.count * sizeof(float));
  }
  size_t file_size = off;
  Put<uint64_t>(&header, 16, file_size);
  Put<uint32_t>(&header, 24, Crc32(header.data(), header.size()));

  AtomicFileWriter w;
  DS_RETURN_IF_ERROR(w.Open(path));
  DS_RETURN_IF_ERROR(w.Write(header));
  size_t pos = kHeaderBytes;
  static const std::string zeros(kAlign, '\0');
  for (size_t i = 0; i < sections.size(); ++i) {
    if (offsets[i] > pos) DS_RETURN_IF_ERROR(w.Write(std::string_view(zeros.data(), offsets[i] - pos)));
    size_t bytes = sections[i].count * sizeof(float);
    DS_RETURN_IF_ERROR(
        w.Write(std::string_view(reinterpret_cast<const char*>(sections[i].data), bytes)));
    pos = offsets[i] + bytes;
  }
  if (file_size > pos) DS_RETURN_IF_ERROR(w.Write(std::string_view(zeros.data(), file_size - pos)));
  return w.Commit();
}

MappedTensorFile::~MappedTensorFile() {
  if (base_) munmap(base_, size_);
}

Result<std::unique_ptr<MappedTensorFile>> MappedTensorFile::Open(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return DS_ERR(kNotFound, "{}: missing weights file", path);
    return DS_ERR(kIo, "{}: cannot open: {}", path, std::strerror(errno));
  }
  struct stat st;
  if (fstat(fd, &st) != 0) {
    int e = errno;
    ::close(fd);
    return DS_ERR(kIo, "{}: cannot stat: {}", path, std::strerror(e));
  }
  size_t size = size_t(st.st_size);
  if (size < kHeaderBytes) {
    ::close(fd);
    return DS_ERR(kCorrupt, "{}: truncated weights file ({} bytes, header needs {})", path, size,
                  kHeaderBytes);
  }
  void* base = mmap(nullptr, size, PROT_READ, MAP_SHARED, fd, 0);
  ::close(fd);
  if (base == MAP_FAILED) return DS_ERR(kIo, "{}: cannot map: {}", path, std::strerror(errno));
  std::unique_ptr<MappedTensorFile> f(new MappedTensorFile());
  f->path_ = path;
  f->base_ = base;
  f->size_ = size;
  const auto* p = static_cast<const uint8_t*>(base);
  if (std::memcmp(p, kMagic, 8) != 0)
    return DS_ERR(kCorrupt, "{}: not a datasynth weights file (bad magic)", path);
  uint32_t version = Get<uint32_t>(p, 8);
  if (version != kTensorFileVersion)
    return DS_ERR(kCorrupt, "{}: weights format version {} is not supported (this build reads {})",
                  path, version, kTensorFileVersion);
  std::string header(reinterpret_cast<const char*>(p), kHeaderBytes);
  uint32_t stored_crc = Get<uint32_t>(p, 24);
  Put<uint32_t>(&header, 24, 0);
  if (Crc32(header.data(), header.size()) != stored_crc)
    return DS_ERR(kCorrupt, "{}: header checksum mismatch (file edited or corrupted)", path);
  uint64_t declared = Get<uint64_t>(p, 16);
  if (declared != size)
    return DS_ERR(kCorrupt, "{}: file is {} bytes but its header says {} (truncated?)", path, size,
                  declared);
  uint32_t n = Get<uint32_t>(p, 12);
  if (n > kMaxSections) return DS_ERR(kCorrupt, "{}: {} sections (max {})", path, n, kMaxSections);
  for (uint32_t i = 0; i < n; ++i) {
    size_t rec = 32 + i * kRecordBytes;
    char name[kNameBytes + 1] = {};
    std::memcpy(name, p + rec, kNameBytes);
    uint64_t off = Get<uint64_t>(p, rec + 40);
    uint64_t count = Get<uint64_t>(p, rec + 48);
    uint32_t crc = Get<uint32_t>(p, rec + 56);
    if (off % kAlign != 0 || off < kHeaderBytes || count > size / sizeof(float) ||
        off > size - count * sizeof(float))
      return DS_ERR(kCorrupt, "{}: section '{}' out of bounds", path, name);
    if (Crc32(p + off, count * sizeof(float)) != crc)
      return DS_ERR(kCorrupt, "{}: section '{}' checksum mismatch (file edited or corrupted)", path,
                    name);
    const float* data = reinterpret_cast<const float*>(p + off);
    for (uint64_t j = 0; j < count; ++j)
      if (!std::isfinite(data[j]))
        return DS_ERR(kCorrupt, "{}: section '{}' holds a non-finite value at {}", path, name, j);
    f->entries_.push_back({name, size_t(off), size_t(count)});
  }
  return f;
}

Result<const float*> MappedTensorFile::Section(const std::string& name, size_t expected) const {
  for (const auto& e : entries_) {
    if (e.name != name) continue;
    if (expected != SIZE_MAX && e.count != expected)
      return DS_ERR(kCorrupt, "{}: section '{}' holds {} values, the model needs {}", path_, name,
                    e.count, expected);
    return reinterpret_cast<const float*>(static_cast<const uint8_t*>(base_) + e.offset);
  }
  return DS_ERR(kCorrupt, "{}: missing section '{}'", path_, name);
}

std::vector<std::string> MappedTensorFile::SectionNames() const {
  std::vector<std::string> v;
  for (const auto& e : entries_) v.push_back(e.name);
  return v;
}

}  // namespace ds
