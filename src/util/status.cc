#include "util/status.h"

namespace ds {

const char* CodeName(Code c) {
  switch (c) {
    case Code::kOk: return "ok";
    case Code::kInvalidInput: return "invalid input";
    case Code::kInvalidArgument: return "invalid argument";
    case Code::kNotFound: return "not found";
    case Code::kIo: return "i/o error";
    case Code::kCorrupt: return "corrupt";
    case Code::kAlreadyExists: return "already exists";
    case Code::kResourceExhausted: return "resource exhausted";
    case Code::kCancelled: return "cancelled";
    case Code::kUnavailable: return "unavailable";
    case Code::kInternal: return "internal error";
  }
  return "unknown";
}

std::string Status::ToString(bool where) const {
  if (ok()) return "OK";
  if (where && line_ > 0) return fmt::format("{} [{}:{}]", message_, file_, line_);
  return message_;
}

}  // namespace ds
