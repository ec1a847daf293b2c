#include "generate/worker_protocol.h"

#include <errno.h>
#include <omp.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <memory>

#include "util/subprocess.h"

namespace ds {
namespace worker_protocol {
namespace {

// Appends a frame: u32 length of (type + payload), u8 type, payload.
void PutFrame(std::string* out, FrameType type, const std::string& payload) {
  PutU32(out, uint32_t(payload.size() + 1));
  out->push_back(char(type));
  out->append(payload);
}

}  // namespace

void EncodeTasks(const std::vector<GenTask>& tasks, std::string* out) {
  std::string pl;
  PutU32(&pl, uint32_t(tasks.size()));
  for (const auto& t : tasks) {
    PutU64(&pl, t.id);
    PutU32(&pl, uint32_t(t.prefix));
  }
  PutFrame(out, kTasks, pl);
}

void EncodeError(const std::string& message, std::string* out) {
  std::string pl;
  PutStr(&pl, message);
  PutFrame(out, kError, pl);
}

void EncodeResult(const GeneratedRecord& r, std::string* out) {
  std::string pl;
  PutU64(&pl, r.id);
  PutU32(&pl, uint32_t(r.prefix));
  pl.push_back(char((r.valid ? 1 : 0) | (r.copy_rejected ? 2 : 0)));
  PutU64(&pl, uint64_t(r.tokens));
  PutStr(&pl, r.explain);
  PutU32(&pl, uint32_t(r.fields.size()));
  for (const auto& f : r.fields) PutStr(&pl, f);
  PutFrame(out, kResult, pl);
}

// STATS: the worker's allocator (GPU backends), sent when it changed.
void EncodeStats(const AllocatorStats& m, std::string* out) {
  std::string pl;
  for (uint64_t v :
       {uint64_t(m.allocated_bytes), uint64_t(m.peak_allocated_bytes), uint64_t(m.reserved_bytes),
        uint64_t(m.peak_reserved_bytes), uint64_t(m.limit_bytes), uint64_t(m.num_oom_retries),
        uint64_t(m.num_oom_failures)})
    PutU64(&pl, v);
  PutFrame(out, kStats, pl);
}

bool DecodeStats(Reader& rd, AllocatorStats* m) {
  m->allocated_bytes = size_t(rd.Get<uint64_t>());
  m->peak_allocated_bytes = size_t(rd.Get<uint64_t>());
  m->reserved_bytes = size_t(rd.Get<uint64_t>());
  m->peak_reserved_bytes = size_t(rd.Get<uint64_t>());
  m->limit_bytes = size_t(rd.Get<uint64_t>());
  m->num_oom_retries = int64_t(rd.Get<uint64_t>());
  m->num_oom_failures = int64_t(rd.Get<uint64_t>());
  return rd.ok() && rd.at_end();
}

bool DecodeResult(Reader& rd, GeneratedRecord* r) {
  r->id = rd.Get<uint64_t>();
  r->prefix = int32_t(rd.Get<uint32_t>());
  const uint8_t flags = rd.Get<uint8_t>();
  if (flags > 3) return false;
  r->valid = (flags & 1) != 0;
  r->copy_rejected = (flags & 2) != 0;
  r->tokens = int64_t(rd.Get<uint64_t>());
  r->explain = rd.Str();
  uint32_t n = rd.Get<uint32_t>();
  if (!rd.ok() || n > (1u << 24)) return false;
  r->fields.resize(n);
  for (auto& f : r->fields) f = rd.Str();
  return rd.ok() && rd.at_end();
}

// ---- worker process ----

[[noreturn]] void WorkerMain(int fd, pid_t parent, const GenerationModel& model,
                             const RunPlan& plan, int slots, int64_t kill_after) {
  ::signal(SIGINT, SIG_IGN);
  ::signal(SIGTERM, SIG_DFL);
  ::signal(SIGPIPE, SIG_IGN);
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() != parent) ::_exit(3);
  omp_set_num_threads(1);
  int code = 0;
  try {
    auto made = model.make_backend(slots);
    if (!made.ok()) {
      std::string out;
      EncodeError(made.status().message(), &out);
      WriteAll(fd, out);
      ::_exit(2);
    }
    std::unique_ptr<InferBackend> backend = std::move(made).value();
    std::unique_ptr<TokenFilter> filter;  // constrained decoding (model.make_filter)
    if (model.make_filter) {
      auto f = model.make_filter(slots);
      if (!f.ok()) {
        std::string out;
        EncodeError(f.status().message(), &out);
        WriteAll(fd, out);
        ::_exit(2);
      }
      filter = std::move(f).value();
    }
    BatchSampler sampler(*model.tokenizer, *backend, plan.sampler, plan.prefixes, filter.get(),
                         plan.prefix_fields);
    std::string in, out;
    std::vector<GeneratedRecord> done;
    AllocatorStats last_stats;
    int64_t sent = 0;
    char rbuf[65536];
    while (true) {
      // Read tasks: block only when there is nothing to do.
      while (true) {
        ssize_t n = ::recv(fd, rbuf, sizeof(rbuf), sampler.idle() ? 0 : MSG_DONTWAIT);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
        if (n <= 0) ::_exit(0);  // the parent closed the socket: done
        in.append(rbuf, size_t(n));
        bool ok = ParseFrames(&in, [&](uint8_t type, const char* p, const char* end) {
          if (type != kTasks) return false;
          Reader rd(p, end);
          uint32_t count = rd.Get<uint32_t>();
          for (uint32_t k = 0; k < count && rd.ok(); ++k) {
            GenTask t;
            t.id = rd.Get<uint64_t>();
            t.prefix = int32_t(rd.Get<uint32_t>());
            if (rd.ok()) sampler.Submit(t);
          }
          return rd.ok();
        });
        if (!ok) ::_exit(4);
      }
      done.clear();
      sampler.Step(&done);
      if (done.empty()) continue;
      out.clear();
      for (auto& r : done) {
        ValidateRecord(model, &r);
        EncodeResult(r, &out);
      }
      if (auto m = backend->memory_stats()) {
        if (m->peak_allocated_bytes != last_stats.peak_allocated_bytes ||
            m->peak_reserved_bytes != last_stats.peak_reserved_bytes ||
            m->reserved_bytes != last_stats.reserved_bytes ||
            m->num_oom_retries != last_stats.num_oom_retries) {
          EncodeStats(*m, &out);
          last_stats = *m;
        }
      }
      if (!WriteAll(fd, out)) ::_exit(0);  // parent gone
      sent += int64_t(done.size());
      if (kill_after >= 0 && sent >= kill_after) ::raise(SIGKILL);
    }
  } catch (const std::exception& e) {
    std::string out;
    EncodeError(std::string("worker failed: ") + e.what(), &out);
    WriteAll(fd, out);
    code = 5;
  }
  ::_exit(code);
}

}  // namespace worker_protocol
}  // namespace ds
