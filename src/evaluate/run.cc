// RunEvaluate: the library side of `datasynth evaluate`.
#include <sys/stat.h>

#include "evaluate/evaluate.h"
#include "util/fs.h"

namespace ds {

namespace {

// A report target must not exist unless the user asked to replace it, and must not
// be a directory or one of the tables being read.
Status CheckTarget(const EvaluateArgs& args, const std::string& path, const char* flag) {
  if (path.empty()) return Status::Ok();
  for (const std::string* in : {&args.real_path, &args.synthetic_path, &args.holdout_path})
    if (path == *in)
      return DS_ERR(kInvalidArgument, "{} {}: is also an input table; choose another file",
                    flag, path);
  struct stat st;
  if (::lstat(path.c_str(), &st) != 0) return Status::Ok();
  if (S_ISDIR(st.st_mode))
    return DS_ERR(kInvalidArgument, "{} {}: is a directory; give a file name", flag, path);
  if (!args.overwrite)
    return DS_ERR(kAlreadyExists, "{}: already exists; pass --overwrite to replace it", path);
  return Status::Ok();
}

}  // namespace

Status RunEvaluate(const EvaluateArgs& args, std::string* summary_text) {
  if (args.real_path.empty()) return DS_ERR(kInvalidArgument, "--real is required");
  if (args.synthetic_path.empty()) return DS_ERR(kInvalidArgument, "--synthetic is required");
  if (!args.report_path.empty() && args.report_path == args.json_path)
    return DS_ERR(kInvalidArgument, "--report and --json name the same file: {}", args.json_path);
  DS_RETURN_IF_ERROR(CheckTarget(args, args.report_path, "--report"));
  DS_RETURN_IF_ERROR(CheckTarget(args, args.json_path, "--json"));
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
      DS_RETURN_IF_ERROR(WriteFileAtomic(args.report_path, ReportToHtml(report)));
    if (!args.json_path.empty())
      DS_RETURN_IF_ERROR(WriteFileAtomic(args.json_path, ReportToJson(report)));
    if (summary_text) *summary_text = ReportToText(report);
    return Status::Ok();
  });
}

}  // namespace ds
