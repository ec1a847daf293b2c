// CSV / line reader throughput.
//
//   build/csv_bench [input.csv] [repeats]
// Builds a temporary file from the input's data rows repeated `repeats` times (default:
// the shared diamonds.csv x 40, ~110 MB), then times CsvReader (all fields), LineReader
// and a gzip copy through CsvReader, best of 3, from the page cache. Prints MB/s
// (MB = 1e6 bytes of file input) by thread CPU time (stable on a shared machine) and by
// wall time.
#include <unistd.h>
#include <zlib.h>

#include <chrono>
#include <cstdio>
#include <ctime>
#include <string>
#include <vector>

#include "io/csv.h"
#include "util/fs.h"

namespace {

// CPU seconds of this thread: robust against other processes sharing the cores.
double CpuNow() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}
double WallNow() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}
struct Timer {
  double w0 = WallNow(), c0 = CpuNow();
  double wall() const { return WallNow() - w0; }
  double cpu() const { return CpuNow() - c0; }
};

int Fail(const ds::Status& s) {
  std::fprintf(stderr, "error: %s\n", s.ToString().c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string src =
      argc > 1 ? argv[1] : std::string(DS_SOURCE_DIR) + "/../shared/datasets/diamonds.csv";
  const int repeats = argc > 2 ? std::atoi(argv[2]) : 40;
  auto text = ds::ReadFile(src);
  if (!text.ok()) return Fail(text.status());
  const size_t nl = text->find('\n');
  const std::string header = text->substr(0, nl + 1), body = text->substr(nl + 1);
  std::string data = header;
  data.reserve(header.size() + body.size() * repeats);
  for (int i = 0; i < repeats; ++i) data += body;
  const std::string tmp = fmt::format("/tmp/csv_bench_{}.csv", ::getpid());
  if (auto s = ds::WriteFileAtomic(tmp, data); !s.ok()) return Fail(s);
  const double mb = data.size() / 1e6;
  std::printf("input: %s x %d = %.1f MB\n", src.c_str(), repeats, mb);

  double best = 1e30, best_wall = 1e30;
  int64_t records = 0, fields_total = 0;
  for (int it = 0; it < 3; ++it) {
    Timer t0;
    auto r = ds::CsvReader::Open(tmp);
    if (!r.ok()) return Fail(r.status());
    std::vector<std::string> fields;
    int64_t nf = 0;
    for (;;) {
      auto more = (*r)->Next(&fields);
      if (!more.ok()) return Fail(more.status());
      if (!*more) break;
      nf += static_cast<int64_t>(fields.size());
    }
    best = std::min(best, t0.cpu());
    best_wall = std::min(best_wall, t0.wall());
    records = (*r)->records_read();
    fields_total = nf;
  }
  std::printf("CsvReader:  %8.1f MB/s cpu, %8.1f MB/s wall  (%lld records, %lld fields)\n",
              mb / best, mb / best_wall, static_cast<long long>(records),
              static_cast<long long>(fields_total));

  best = best_wall = 1e30;
  int64_t lines = 0;
  for (int it = 0; it < 3; ++it) {
    Timer t0;
    auto r = ds::LineReader::Open(tmp);
    if (!r.ok()) return Fail(r.status());
    std::string line;
    for (;;) {
      auto more = (*r)->Next(&line);
      if (!more.ok()) return Fail(more.status());
      if (!*more) break;
    }
    best = std::min(best, t0.cpu());
    best_wall = std::min(best_wall, t0.wall());
    lines = (*r)->line();
  }
  std::printf("LineReader: %8.1f MB/s cpu, %8.1f MB/s wall  (%lld lines)\n", mb / best,
              mb / best_wall, static_cast<long long>(lines));

  const std::string gz = tmp + ".gz";
  gzFile g = gzopen(gz.c_str(), "wb6");
  gzwrite(g, data.data(), static_cast<unsigned>(data.size()));
  gzclose(g);
  best = best_wall = 1e30;
  for (int it = 0; it < 2; ++it) {
    Timer t0;
    auto r = ds::CsvReader::Open(gz);
    if (!r.ok()) return Fail(r.status());
    std::vector<std::string> fields;
    for (;;) {
      auto more = (*r)->Next(&fields);
      if (!more.ok()) return Fail(more.status());
      if (!*more) break;
    }
    best = std::min(best, t0.cpu());
    best_wall = std::min(best_wall, t0.wall());
  }
  std::printf("CsvReader (gzip): %8.1f MB/s cpu, %8.1f MB/s wall (decompressed CSV bytes)\n",
              mb / best, mb / best_wall);
  ::unlink(tmp.c_str());
  ::unlink(gz.c_str());
  return 0;
}
