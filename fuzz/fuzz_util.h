// Helpers shared by the libFuzzer targets in fuzz/*_fuzz.cc.
//
// Every target defines its entry as `int ds::fuzz::<Name>OneInput(const uint8_t*, size_t)`
// and, unless DS_FUZZ_NO_MAIN is defined, the libFuzzer entry point
// LLVMFuzzerTestOneInput calling it. tests/fuzz_regressions_test.cc defines
// DS_FUZZ_NO_MAIN, includes every target and replays fuzz/corpus/<target>/* and
// fuzz/regressions/<target>/* through the same functions in the normal (gcc) build.
//
// Invariant violations call DS_FUZZ_FAIL(message): abort() under libFuzzer (a crash
// it reports and saves), a gtest failure in the replay test (which defines it first).
#pragma once

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#ifndef DS_FUZZ_FAIL
#define DS_FUZZ_FAIL(msg)                                       \
  do {                                                          \
    std::fprintf(stderr, "fuzz invariant violated: %s\n", msg); \
    std::abort();                                               \
  } while (0)
#endif

#define DS_FUZZ_CHECK(cond)                             \
  do {                                                  \
    if (!(cond)) DS_FUZZ_FAIL(#cond " (" __FILE__ ")"); \
  } while (0)

namespace ds::fuzz {

// An in-memory file (memfd) holding `bytes`, opened by path (/proc/self/fd/N) like any
// file: the readers under test take paths. Removed when the object goes away.
class MemFile {
 public:
  explicit MemFile(std::string_view bytes) {
    fd_ = ::memfd_create("ds-fuzz", MFD_CLOEXEC);
    if (fd_ < 0) {
      std::perror("memfd_create");
      std::abort();
    }
    size_t done = 0;
    while (done < bytes.size()) {
      const ssize_t w = ::write(fd_, bytes.data() + done, bytes.size() - done);
      if (w <= 0) {
        std::perror("write memfd");
        std::abort();
      }
      done += size_t(w);
    }
    path_ = "/proc/self/fd/" + std::to_string(fd_);
  }
  ~MemFile() { ::close(fd_); }
  MemFile(const MemFile&) = delete;
  MemFile& operator=(const MemFile&) = delete;
  const std::string& path() const { return path_; }

 private:
  int fd_ = -1;
  std::string path_;
};

// A fresh directory for this process under $TMPDIR (or /tmp), removed at exit.
inline std::vector<std::string>& ScratchDirs() {
  static std::vector<std::string>* dirs = new std::vector<std::string>;
  return *dirs;
}
inline void RemoveScratchDirs() {
  std::error_code ec;
  for (const auto& d : ScratchDirs()) std::filesystem::remove_all(d, ec);
}
inline std::string MakeScratchDir(const char* tag) {
  const char* tmp = std::getenv("TMPDIR");
  std::string templ = std::string(tmp && *tmp ? tmp : "/tmp") + "/ds-fuzz-" + tag + "-XXXXXX";
  if (!::mkdtemp(templ.data())) {
    std::perror("mkdtemp");
    std::abort();
  }
  if (ScratchDirs().empty()) std::atexit(RemoveScratchDirs);
  ScratchDirs().push_back(templ);
  return templ;
}

// Plain (non-atomic, no fsync: fast) whole-file write; aborts on failure.
inline void WriteBytes(const std::string& path, std::string_view data) {
  FILE* f = std::fopen(path.c_str(), "wb");
  if (!f || std::fwrite(data.data(), 1, data.size(), f) != data.size() || std::fclose(f) != 0) {
    std::perror(path.c_str());
    std::abort();
  }
}

inline std::string_view AsText(const uint8_t* data, size_t size) {
  return std::string_view(reinterpret_cast<const char*>(data), size);
}

}  // namespace ds::fuzz
