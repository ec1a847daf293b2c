// Fuzz target: the tokenizer loader (tokenize/tokenizer.h LoadTokenizer): tokenizer.json
// of either type and SentencePiece model files (tokenizer.model, a serialized protobuf).
//
// Input: byte 0 = mode, the rest = file content.
//   mode even: the content is tokenizer.json, in a directory that also holds a valid
//              tokenizer.model (trained at start-up) for "sentencepiece" files;
//   mode odd:  the content is tokenizer.model; the harness writes a tokenizer.json that
//              matches it (size, CRC-32, piece count as SentencePiece reports it, no
//              column markers, escapes TAB -> U+E000 and LF -> U+E001), so the bytes
//              reach SentencePiece's model parser and datasynth's piece checks.
// After a successful load every id is inspected; Save + LoadTokenizer must give the
// same vocabulary; for the char tokenizer every text token encodes to itself and a
// record of token texts round-trips through EncodeRecord / RecordDecoder.
// DS_FUZZ_DUMP_SEED=<dir> writes the start-up tokenizer files there (seeds).
#include <sentencepiece_processor.h>
#include <zlib.h>

#include <cstdint>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "fuzz_util.h"
#include "tokenize/tokenizer.h"
#include "util/fs.h"

namespace ds::fuzz {
namespace tokenizer_fuzz {

struct Dirs {
  std::string json_dir;  // tokenizer.json from the input + a valid tokenizer.model
  std::string sp_dir;    // tokenizer.model from the input + a matching tokenizer.json
  std::string save_dir;  // Save() round trip
};

inline const Dirs& Setup() {
  static const Dirs* dirs = [] {
    auto* d = new Dirs;
    d->json_dir = MakeScratchDir("tok-json");
    d->sp_dir = MakeScratchDir("tok-sp");
    d->save_dir = MakeScratchDir("tok-save");
    TokenizerConfig tc;
    tc.type = "sentencepiece";
    tc.vocab_size = 40;
    tc.seed = 1;
    std::vector<std::vector<std::string>> records;
    for (int i = 0; i < 20; ++i)
      records.push_back({"alpha\tbeta " + std::to_string(i * 7), "line\none", "gamma é"});
    auto tok = TrainTokenizer(tc, records).ValueOrThrow();
    ThrowIfError(tok->Save(d->json_dir));
    if (const char* dump = std::getenv("DS_FUZZ_DUMP_SEED")) ThrowIfError(tok->Save(dump));
    return d;
  }();
  return *dirs;
}

inline uint32_t Crc(std::string_view s) {
  return uint32_t(crc32(0L, reinterpret_cast<const Bytef*>(s.data()), uInt(s.size())));
}

inline void Exercise(const Tokenizer& tok, const std::string& save_dir) {
  const int v = tok.vocab_size();
  DS_FUZZ_CHECK(v >= 1);
  std::vector<std::string> texts;
  for (int id = -1; id <= v; ++id) {
    const TokenKind k = tok.kind(id);
    const std::string& t = tok.text(id);
    (void)tok.column(id);
    if (k == TokenKind::kText) {
      DS_FUZZ_CHECK(!t.empty());
      if (texts.size() < 64) texts.push_back(t);
    } else {
      DS_FUZZ_CHECK(t.empty());
    }
  }
  DS_FUZZ_CHECK(tok.kind(tok.end_id()) == TokenKind::kEndOfRecord);
  if (tok.type() == "char") {
    for (int id = 0; id < v; ++id) {
      if (tok.kind(id) != TokenKind::kText) continue;
      std::vector<int32_t> ids;
      DS_FUZZ_CHECK(tok.EncodeField(tok.text(id), &ids).ok());
      DS_FUZZ_CHECK(ids.size() == 1 && ids[0] == id);
    }
  }
  // A record made of token texts: one field per column (or three without markers).
  const size_t nf = tok.column_markers() ? size_t(tok.num_columns()) : 3;
  std::vector<std::string> fields(nf);
  for (size_t i = 0; i < texts.size(); ++i) fields[i % nf] += texts[i];
  std::vector<int32_t> ids;
  Status s = tok.EncodeRecord(fields, &ids);
  if (tok.type() == "char") DS_FUZZ_CHECK(s.ok());
  if (s.ok()) {
    RecordDecoder dec(tok);
    bool done = false;
    for (int32_t id : ids) done = dec.Push(id);
    DS_FUZZ_CHECK(done);
    if (tok.type() == "char") DS_FUZZ_CHECK(dec.fields() == fields);
  }
  (void)tok.EncodeField(std::string_view("\xff\xfe", 2), &ids);  // invalid UTF-8
  // Save and load again: the same vocabulary.
  ThrowIfError(tok.Save(save_dir));
  auto again = LoadTokenizer(save_dir);
  if (!again.ok())
    DS_FUZZ_FAIL(("saved tokenizer does not load: " + again.status().message()).c_str());
  DS_FUZZ_CHECK((*again)->vocab_size() == v);
  for (int id = 0; id < v; ++id) {
    DS_FUZZ_CHECK((*again)->kind(id) == tok.kind(id));
    DS_FUZZ_CHECK((*again)->text(id) == tok.text(id));
  }
}

}  // namespace tokenizer_fuzz

inline int TokenizerOneInput(const uint8_t* data, size_t size) {
  using namespace tokenizer_fuzz;
  if (size < 1) return 0;
  const Dirs& dirs = Setup();
  const std::string_view content = AsText(data + 1, size - 1);
  std::string dir;
  if (data[0] % 2 == 0) {
    dir = dirs.json_dir;
    WriteBytes(dir + "/tokenizer.json", content);
  } else {
    dir = dirs.sp_dir;
    if (content.empty()) return 0;
    int pieces = 1;
    {
      sentencepiece::SentencePieceProcessor sp;
      try {  // SentencePiece throws on some malformed models; LoadTokenizer must not
        if (sp.LoadFromSerializedProto(content).ok()) pieces = std::max(1, sp.GetPieceSize());
      } catch (const std::exception&) {
      }
    }
    nlohmann::json j = {{"format", "datasynth-tokenizer"},
                        {"format_version", 1},
                        {"type", "sentencepiece"},
                        {"vocab_size", pieces + 1},
                        {"column_markers", false},
                        {"num_columns", 0},
                        {"specials", {"<n>", "<d>"}},
                        {"sentencepiece",
                         {{"model_file", "tokenizer.model"},
                          {"model_bytes", content.size()},
                          {"model_crc32", Crc(content)},
                          {"model_type", "unigram"},
                          {"num_pieces", pieces},
                          {"escapes", {{9, 0xE000}, {10, 0xE001}}}}}};
    WriteBytes(dir + "/tokenizer.model", content);
    WriteBytes(dir + "/tokenizer.json", j.dump());
  }
  auto tok = LoadTokenizer(dir);
  if (!tok.ok()) {
    DS_FUZZ_CHECK(!tok.status().message().empty());
    return 0;
  }
  Exercise(**tok, dirs.save_dir);
  return 0;
}

}  // namespace ds::fuzz

#ifndef DS_FUZZ_NO_MAIN
extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return ds::fuzz::TokenizerOneInput(data, size);
}
#endif
