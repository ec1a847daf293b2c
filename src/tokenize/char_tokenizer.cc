// Char tokenizer: one text token per distinct code point of the training text.
//
// Ids: the specials (see internal.h), then the code points in ascending order.
// Lookup: a dense table for code points below kDense, a hash map above.
#include <fmt/core.h>

#include <filesystem>
#include <unordered_map>

#include "tokenize/internal.h"
#include "util/utf8.h"

namespace ds::tok_internal {
namespace {

constexpr char32_t kDense = 0x3000;  // dense lookup below this code point

class CharTokenizer final : public TableTokenizer {
 public:
  CharTokenizer(bool markers, int num_columns, const std::vector<char32_t>& chars)
      : TableTokenizer(markers, num_columns), chars_(chars) {
    dense_.assign(kDense, -1);
    for (char32_t cp : chars_) {
      const int id = vocab_size();
      AddText(EncodeCodePoint(cp));
      if (cp < kDense) {
        dense_[cp] = id;
      } else {
        sparse_[cp] = id;
      }
    }
  }

  std::string type() const override { return "char"; }

  Status EncodeField(std::string_view field, std::vector<int32_t>* out) const override {
    size_t pos = 0;
    const size_t start = out->size();
    while (pos < field.size()) {
      char32_t cp;
      const size_t at = pos;
      if (!NextCodePointStrict(field, &pos, &cp)) {
        out->resize(start);
        return DS_ERR(kInvalidInput, "invalid UTF-8 at byte {}", at);
      }
      int id = -1;
      if (cp < kDense) {
        id = dense_[cp];
      } else if (auto it = sparse_.find(cp); it != sparse_.end()) {
        id = it->second;
      }
      if (id < 0) {
        out->resize(start);
        return DS_ERR(kInvalidInput,
                      "character {} at byte {} was not seen in training (char tokenizer)",
                      DescribeCodePoint(cp), at);
      }
      out->push_back(id);
    }
    return Status::Ok();
  }

  Status Save(const std::string& dir) const override {
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    if (ec) return DS_ERR(kIo, "{}: cannot create directory: {}", dir, ec.message());
    nlohmann::json j = CommonJson();
    nlohmann::json chars = nlohmann::json::array();
    for (char32_t cp : chars_) chars.push_back(EncodeCodePoint(cp));
    j["char"] = {{"chars", std::move(chars)}};
    return WriteFile((std::filesystem::path(dir) / kJsonFile).string(), j.dump(1) + "\n");
  }

 private:
  std::vector<char32_t> chars_;                   // [V - S] ascending
  std::vector<int32_t> dense_;                    // [kDense] code point -> id or -1
  std::unordered_map<char32_t, int32_t> sparse_;  // code point >= kDense -> id
};

}  // namespace

Result<std::unique_ptr<Tokenizer>> TrainChar(const TokenizerConfig& config,
                                             const std::vector<char32_t>& chars) {
  return std::unique_ptr<Tokenizer>(
      std::make_unique<CharTokenizer>(config.column_markers, config.num_columns, chars));
}

Result<std::unique_ptr<Tokenizer>> LoadChar(const nlohmann::json& j, bool column_markers,
                                            int num_columns, const std::string& path) {
  const auto& section = JsonField(j, "char", path);
  const auto& arr = JsonArray(section, "chars", 0x110000, path);
  std::vector<char32_t> chars;
  chars.reserve(arr.size());
  for (size_t i = 0; i < arr.size(); ++i) {
    if (!arr[i].is_string()) return DS_ERR(kCorrupt, "{}: chars[{}] is not a string", path, i);
    const std::string& s = arr[i].get_ref<const std::string&>();
    size_t pos = 0;
    char32_t cp;
    if (!NextCodePointStrict(s, &pos, &cp) || pos != s.size())
      return DS_ERR(kCorrupt, "{}: chars[{}] is not exactly one character", path, i);
    if (!chars.empty() && cp <= chars.back())
      return DS_ERR(kCorrupt, "{}: chars[{}] is out of order or repeated", path, i);
    chars.push_back(cp);
  }
  return std::unique_ptr<Tokenizer>(
      std::make_unique<CharTokenizer>(column_markers, num_columns, chars));
}

}  // namespace ds::tok_internal
