// The generation workers' wire protocol and the worker process's main loop
// (generate/workers.h describes the process model).
//
// One UNIX stream socket per worker carries length-prefixed frames:
//   u32 length of (type + payload), u8 type, payload
// with little-endian integers (util/bytes.h):
//   parent -> worker  TASKS   u32 n, n x (u64 id, i32 prefix)
//   worker -> parent  RESULT  u64 id, i32 prefix, u8 flags (1 valid, 2 copy rejected), u64 tokens,
//                             str explain, u32 n, n x str field
//                     ERROR   str message (the worker could not start)
//                     STATS   7 x u64 AllocatorStats (when they changed)
// where str = u32 length, bytes. A frame longer than kMaxFrame, an unknown
// type or a payload that does not decode exactly is malformed.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "generate/generator.h"
#include "util/bytes.h"

namespace ds {
namespace worker_protocol {

enum FrameType : uint8_t { kTasks = 1, kResult = 2, kError = 3, kStats = 4 };
constexpr uint32_t kMaxFrame = 256u << 20;

// Bounds-checked reading of a frame's payload (util/bytes.h).
using Reader = ByteReader;

// Appends one frame to *out.
void EncodeTasks(const std::vector<GenTask>& tasks, std::string* out);
void EncodeResult(const GeneratedRecord& r, std::string* out);
void EncodeError(const std::string& message, std::string* out);
void EncodeStats(const AllocatorStats& m, std::string* out);

// Decode a payload; false when it is malformed.
bool DecodeResult(Reader& rd, GeneratedRecord* r);
bool DecodeStats(Reader& rd, AllocatorStats* m);

// Extracts the complete frames at the start of *buf, calling
// fn(type, payload begin, payload end) for each (fn returns false for a
// malformed one); the frames are removed from *buf. Returns false on a
// malformed frame.
template <typename Fn>
bool ParseFrames(std::string* buf, Fn&& fn) {
  size_t off = 0;
  bool ok = true;
  while (buf->size() - off >= 4) {
    uint32_t len;
    std::memcpy(&len, buf->data() + off, 4);
    if (len == 0 || len > kMaxFrame) {
      ok = false;
      break;
    }
    if (buf->size() - off - 4 < len) break;
    uint8_t type = uint8_t((*buf)[off + 4]);
    if (!fn(type, buf->data() + off + 5, buf->data() + off + 4 + len)) {
      ok = false;
      break;
    }
    off += 4 + size_t(len);
  }
  buf->erase(0, off);
  return ok;
}

// The worker process (forked by the pool, socket `fd`): runs the attempts it
// is sent in a BatchSampler of `slots` slots and sends back validated
// results. Ignores SIGINT, dies with its parent; exits when the parent closes
// the socket. Test hook: kill_after >= 0 SIGKILLs itself after sending that
// many results.
[[noreturn]] void WorkerMain(int fd, pid_t parent, const GenerationModel& model,
                             const RunPlan& plan, int slots, int64_t kill_after);

}  // namespace worker_protocol
}  // namespace ds
