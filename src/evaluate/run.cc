// RunEvaluate: the library side of `datasynth evaluate`.
#include <cerrno>
#include <cstring>
#include <fstream>

#include "evaluate/evaluate.h"

namespace ds {

namespace {

Status WriteFile(const std::string& path, const std::string& text) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  if (!f) return DS_ERR(kIo, "{}: cannot write: {}", path, std::strerror(errno));
  f.write(text.data(), std::streamsize(text.size()));
  f.close();
  if (!f) return DS_ERR(kIo, "{}: write failed", path);
  return Status::Ok();
}

}  // namespace

Status RunEvaluate(const EvaluateArgs& args, std::string* summary_text) {
  if (args.real_path.empty()) return DS_ERR(kInvalidArgument, "--real is required");
  if (args.synthetic_path.empty()) return DS_ERR(kInvalidArgument, "--synthetic is required");
  return Capture([&]() -> Status {
    DS_ASSIGN_OR_RETURN(Table real, ReadTable(args.real_path, args.delimiter));
    DS_ASSIGN_OR_RETURN(Table synthetic, ReadTable(args.synthetic_path, args.delimiter));
    Table holdout;
    if (!args.holdout_path.empty()) {
      DS_ASSIGN_OR_RETURN(holdout, ReadTable(args.holdout_path, args.delimiter));
    }
    DS_ASSIGN_OR_RETURN(
        EvalReport report,
        Evaluate(real, synthetic, args.holdout_path.empty() ? nullptr : &holdout, args.options));
    if (!args.report_path.empty())
      DS_RETURN_IF_ERROR(WriteFile(args.report_path, ReportToHtml(report)));
    if (!args.json_path.empty())
      DS_RETURN_IF_ERROR(WriteFile(args.json_path, ReportToJson(report)));
    if (summary_text) *summary_text = ReportToText(report);
    return Status::Ok();
  });
}

}  // namespace ds
