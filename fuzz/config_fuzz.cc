// Fuzz target: the config parser (config/config.h).
//
// Input: byte 0 = mode, the rest = text.
//   mode even: the text is a JSON config file, loaded with Config::LoadFile (as
//              `train --config` does). When it loads and validates, ToJson() must load
//              again into an equal config (the model_params.json round trip).
//   mode odd:  the text is lines "key=value", each applied with Config::Set (the
//              command-line flag path), then Validate, ToJson and ValueString.
#include <cstdint>
#include <string>

#include "config/config.h"
#include "fuzz_util.h"

namespace ds::fuzz {

inline int ConfigOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const uint8_t mode = data[0];
  const std::string_view text = AsText(data + 1, size - 1);
  Config c;
  if (mode % 2 == 0) {
    MemFile file(text);
    Status s = c.LoadFile(file.path());
    if (!s.ok()) {
      DS_FUZZ_CHECK(!s.message().empty());
      return 0;
    }
    if (!c.Validate().ok()) return 0;
    const nlohmann::json out = c.ToJson();
    Config again;
    Status s2 = again.MergeJson(out, "roundtrip");
    if (!s2.ok()) DS_FUZZ_FAIL(("ToJson output does not load: " + s2.message()).c_str());
    DS_FUZZ_CHECK(again.Validate().ok());
    DS_FUZZ_CHECK(again.ToJson() == out);
  } else {
    size_t pos = 0;
    while (pos < text.size()) {
      size_t nl = text.find('\n', pos);
      if (nl == std::string_view::npos) nl = text.size();
      const std::string_view line = text.substr(pos, nl - pos);
      pos = nl + 1;
      const size_t eq = line.find('=');
      if (eq == std::string_view::npos) continue;
      (void)c.Set(std::string(line.substr(0, eq)), std::string(line.substr(eq + 1)));
    }
    (void)c.Validate();
    (void)c.ToJson().dump();
    for (const auto& k : Config::Keys()) (void)c.ValueString(k);
  }
  return 0;
}

}  // namespace ds::fuzz

#ifndef DS_FUZZ_NO_MAIN
extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return ds::fuzz::ConfigOneInput(data, size);
}
#endif
