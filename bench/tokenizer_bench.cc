// Tokenizer speed: training time, vocabulary size and encode throughput
// (tokens/s, records/s) of each tokenizer variant on shared datasets.
//   ./build/tokenizer_bench [datasets_dir]
// CSVs are read simply (split on ',', surrounding quotes stripped), which is
// right for telco_churn.csv; text files are one record per line.
#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "tokenize/tokenizer.h"

namespace {

using Records = std::vector<std::vector<std::string>>;

Records ReadCsv(const std::string& path) {
  std::ifstream in(path);
  Records out;
  std::string line;
  std::getline(in, line);
  while (std::getline(in, line)) {
    std::vector<std::string> fields;
    std::stringstream ss(line);
    std::string f;
    while (std::getline(ss, f, ',')) {
      if (f.size() >= 2 && f.front() == '"' && f.back() == '"') f = f.substr(1, f.size() - 2);
      fields.push_back(f);
    }
    if (!line.empty() && line.back() == ',') fields.emplace_back();
    out.push_back(std::move(fields));
  }
  return out;
}

Records ReadLines(const std::string& path) {
  std::ifstream in(path);
  Records out;
  std::string line;
  while (std::getline(in, line)) out.push_back({line});
  return out;
}

double Seconds(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

void Run(const char* name, const Records& records, const char* type, const char* sp, bool markers) {
  ds::TokenizerConfig c;
  c.type = type;
  c.sp_model_type = sp;
  c.column_markers = markers;
  c.num_columns = markers ? static_cast<int>(records[0].size()) : 0;
  auto t0 = std::chrono::steady_clock::now();
  auto tok = ds::TrainTokenizer(c, records);
  const double train_s = Seconds(t0);
  if (!tok.ok()) {
    std::printf("%-22s %-14s %-8s markers=%d: %s\n", name, type, sp, markers,
                tok.status().ToString().c_str());
    return;
  }
  // Encode every record repeatedly for >= 0.5 s.
  std::vector<int32_t> ids;
  size_t tokens = 0, recs = 0;
  t0 = std::chrono::steady_clock::now();
  double enc_s = 0;
  do {
    for (const auto& r : records) {
      ids.clear();
      if (!(*tok)->EncodeRecord(r, &ids).ok()) {
        std::printf("encode failed\n");
        return;
      }
      tokens += ids.size();
    }
    recs += records.size();
    enc_s = Seconds(t0);
  } while (enc_s < 0.5);
  // Decode throughput.
  ds::RecordDecoder dec(**tok);
  std::vector<int32_t> all;
  for (const auto& r : records) (void)(*tok)->EncodeRecord(r, &all);
  t0 = std::chrono::steady_clock::now();
  size_t done = 0;
  for (int32_t id : all) done += dec.Push(id);
  const double dec_s = Seconds(t0);
  std::printf(
      "%-22s %-14s %-8s markers=%d: train %.2fs  vocab %6d  %.1f tok/record  encode %.2fM tok/s "
      "(%.0fk "
      "rec/s)  decode %.0fM tok/s\n",
      name, type, sp, markers, train_s, (*tok)->vocab_size(), double(tokens) / recs,
      tokens / enc_s / 1e6, recs / enc_s / 1e3, all.size() / dec_s / 1e6);
  if (done != records.size()) std::printf("decoder records %zu != %zu\n", done, records.size());
}

}  // namespace

int main(int argc, char** argv) {
  const std::string dir = argc > 1 ? argv[1] : DS_SOURCE_DIR "/../shared/datasets";
  const Records telco = ReadCsv(dir + "/telco_churn.csv");
  const Records harvard = ReadLines(dir + "/harvard_sentences.txt");
  std::printf("telco_churn: %zu records; harvard_sentences: %zu records\n", telco.size(),
              harvard.size());
  for (const auto& [name, recs, markers_ok] : {std::tuple{"telco_churn", &telco, true},
                                               std::tuple{"harvard_sentences", &harvard, false}}) {
    Run(name, *recs, "char", "-", false);
    Run(name, *recs, "sentencepiece", "unigram", false);
    Run(name, *recs, "sentencepiece", "bpe", false);
    if (markers_ok) {
      Run(name, *recs, "char", "-", true);
      Run(name, *recs, "sentencepiece", "unigram", true);
    }
  }
  return 0;
}
