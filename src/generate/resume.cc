#include "generate/resume.h"

#include <fmt/format.h>

#include "util/fs.h"

namespace ds {

namespace {
constexpr const char* kFormatName = "datasynth-generate-progress";
constexpr int kVersion = 1;
constexpr size_t kMaxProgressBytes = 16 << 20;  // settings hold at most a CRC of the prefixes
}  // namespace

std::string PartialPath(const std::string& output) { return output + ".partial"; }
std::string ProgressPath(const std::string& output) { return output + ".progress.json"; }

nlohmann::json GenerationCheckpoint::ToJson() const {
  nlohmann::json j;
  j["format"] = kFormatName;
  j["version"] = kVersion;
  j["bytes"] = bytes;
  j["crc32"] = crc32;
  j["records"] = records;
  j["tokens"] = tokens;
  j["position"] = {{"attempt", position.attempt},
                   {"prefix_try", position.prefix_try},
                   {"valid", position.valid},
                   {"invalid", position.invalid}};
  j["settings"] = settings;
  return j;
}

Result<GenerationCheckpoint> GenerationCheckpoint::FromJson(const nlohmann::json& j,
                                                            const std::string& source) {
  GenerationCheckpoint c;
  try {
    if (!j.is_object() || j.value("format", std::string()) != kFormatName)
      return DS_ERR(kCorrupt, "{}: not a datasynth generation progress file", source);
    int version = j.at("version").get<int>();
    if (version != kVersion)
      return DS_ERR(kCorrupt, "{}: progress file version {} (this build reads {})", source, version,
                    kVersion);
    c.bytes = j.at("bytes").get<uint64_t>();
    c.crc32 = j.at("crc32").get<uint32_t>();
    c.records = j.at("records").get<int64_t>();
    c.tokens = j.at("tokens").get<int64_t>();
    const auto& p = j.at("position");
    c.position.attempt = p.at("attempt").get<uint64_t>();
    c.position.prefix_try = p.at("prefix_try").get<uint32_t>();
    c.position.valid = p.at("valid").get<int64_t>();
    c.position.invalid = p.at("invalid").get<int64_t>();
    c.settings = j.at("settings");
    if (!c.settings.is_object()) return DS_ERR(kCorrupt, "{}: 'settings' is not an object", source);
  } catch (const nlohmann::json::exception& e) {
    return DS_ERR(kCorrupt, "{}: invalid progress file: {}", source, e.what());
  }
  if (c.records < 0 || c.tokens < 0 || c.position.valid < 0 || c.position.invalid < 0)
    return DS_ERR(kCorrupt, "{}: negative counts", source);
  if (c.records > c.position.valid + c.position.invalid)
    return DS_ERR(kCorrupt, "{}: {} records written but only {} released", source, c.records,
                  c.position.valid + c.position.invalid);
  return c;
}

Status WriteCheckpoint(const std::string& path, const GenerationCheckpoint& checkpoint) {
  return WriteFileAtomic(path, checkpoint.ToJson().dump(1) + "\n");
}

Result<std::optional<GenerationCheckpoint>> ReadCheckpoint(const std::string& path) {
  auto text = ReadFile(path, kMaxProgressBytes);
  if (!text.ok()) {
    if (text.status().code() == Code::kNotFound) return std::optional<GenerationCheckpoint>();
    return text.status();
  }
  nlohmann::json j = nlohmann::json::parse(*text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return DS_ERR(kCorrupt, "{}: not valid JSON", path);
  DS_ASSIGN_OR_RETURN(GenerationCheckpoint c, GenerationCheckpoint::FromJson(j, path));
  return std::optional<GenerationCheckpoint>(std::move(c));
}

Status CompareResumeSettings(const nlohmann::json& saved, const nlohmann::json& now,
                             const std::string& source) {
  std::string diffs;
  auto show = [](const nlohmann::json* v) {
    if (!v) return std::string("(not set)");
    std::string s = v->dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    if (s.size() > 80) s = s.substr(0, 77) + "...";
    return s;
  };
  auto add = [&](const std::string& key, const nlohmann::json* a, const nlohmann::json* b) {
    diffs += fmt::format("{}{} = {} in the interrupted run, {} now", diffs.empty() ? "" : "; ", key,
                         show(a), show(b));
  };
  for (auto it = saved.begin(); it != saved.end(); ++it) {
    auto o = now.find(it.key());
    if (o == now.end())
      add(it.key(), &it.value(), nullptr);
    else if (*o != it.value())
      add(it.key(), &it.value(), &*o);
  }
  for (auto it = now.begin(); it != now.end(); ++it)
    if (!saved.contains(it.key())) add(it.key(), nullptr, &it.value());
  if (diffs.empty()) return Status::Ok();
  return DS_ERR(kInvalidArgument,
                "{}: cannot resume with different settings: {} (give the same settings as the "
                "interrupted run, or start again without --resume)",
                source, diffs);
}

}  // namespace ds
