#include "generate/worker_pool.h"

#include <errno.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>

#include "backend/cpu/cpu_backend.h"
#include "generate/worker_protocol.h"

namespace ds {

namespace wp = worker_protocol;

WorkerPool::WorkerPool(const GenerationModel& model, const RunPlan& plan, int slots,
                       AttemptScheduler* sched, std::function<void(const std::string&)> warning)
    : model_(model), plan_(plan), slots_(slots), sched_(sched), warning_(std::move(warning)) {}

Status WorkerPool::Start(int n, int64_t kill_after, const std::function<void()>& in_child) {
  if (n == 1 && kill_after < 0 && model_.device == DeviceKind::kCpu) return StartLocal();
  workers_.reserve(size_t(n));
  const pid_t self = ::getpid();
  for (int i = 0; i < n; ++i) {
    auto child = [&](int fd) {
      in_child();
      for (auto& other : workers_) other.proc.CloseChannel();
      wp::WorkerMain(fd, self, model_, plan_, slots_, i == 0 ? kill_after : -1);
    };
    Result<Subprocess> proc = Subprocess::Spawn(Subprocess::Channel::kSocket, child);
    if (!proc.ok()) {
      Status st = proc.status().code() == Code::kIo
                      ? DS_ERR(kIo, "cannot create a worker socket: {}", proc.status().message())
                      : DS_ERR(kResourceExhausted, "cannot start worker {}: {}", i,
                               proc.status().message());
      Stop();
      return st;
    }
    Worker& w = workers_.emplace_back();
    w.index = i;
    w.proc = std::move(proc).value();
    w.alive = true;
  }
  return Status::Ok();
}

Status WorkerPool::StartLocal() {
  auto l = std::make_unique<Local>();
  DS_ASSIGN_OR_RETURN(l->backend, model_.make_backend(slots_));
  // One core, as a worker process runs (omp_set_num_threads(1) there).
  if (auto* cpu = dynamic_cast<cpu::CpuInferBackend*>(l->backend.get())) cpu->SetThreads(1);
  if (model_.make_filter) {
    DS_ASSIGN_OR_RETURN(l->filter, model_.make_filter(slots_));
  }
  l->sampler = std::make_unique<BatchSampler>(*model_.tokenizer, *l->backend, plan_.sampler,
                                              plan_.prefixes, l->filter.get(), plan_.prefix_fields);
  local_ = std::move(l);
  return Status::Ok();
}

// Keeps the sampler's queue one batch deep (RecordGenerator::Next's rule) and
// steps it until records finish or timeout_ms pass, so that the caller's
// checks (cancel, checkpoints, progress) run as often as with processes.
Status WorkerPool::ExchangeLocal(int timeout_ms) {
  using Clock = std::chrono::steady_clock;
  const auto until = Clock::now() + std::chrono::milliseconds(timeout_ms);
  BatchSampler& s = *local_->sampler;
  Status st = Capture([&] {
    while (true) {
      const int64_t room = int64_t(s.slots()) * 2 - s.active() - int64_t(s.queued());
      if (room > 0) {
        tasks_.clear();
        sched_->Issue(room, &tasks_);
        for (const auto& t : tasks_) s.Submit(t);
      }
      if (s.idle()) return;  // nothing to run (the scheduler waits on the output)
      local_->done.clear();
      s.Step(&local_->done);
      for (auto& r : local_->done) {
        ValidateRecord(model_, &r);
        tokens_ += r.tokens;
        sched_->Complete(std::move(r));
      }
      if (!local_->done.empty() || Clock::now() >= until) return;
    }
  });
  return st;
}

int WorkerPool::alive() const {
  if (local_) return 1;
  int n = 0;
  for (const auto& w : workers_) n += w.alive;
  return n;
}

void WorkerPool::Stop() {
  local_.reset();
  std::vector<Subprocess*> procs;
  for (auto& w : workers_) {
    procs.push_back(&w.proc);
    w.alive = false;
  }
  ReapAll(procs, 2.0);
}

void WorkerPool::Remove(Worker& w, const std::string& why) {
  if (!w.alive) return;
  w.alive = false;
  w.proc.CloseChannel();
  std::string how = why;
  if (how.empty()) {
    how = DescribeExit(w.proc.Wait());
  } else {
    w.proc.Kill(SIGKILL);
  }
  ++failures_;
  std::vector<GenTask> lost;
  for (auto& [id, t] : w.outstanding) lost.push_back(t);
  std::sort(lost.begin(), lost.end(), [](auto& a, auto& b) { return a.id < b.id; });
  for (auto& t : lost) sched_->Requeue(t);
  w.outstanding.clear();
  w.in.clear();
  w.out.clear();
  if (warning_)
    warning_(fmt::format(
        "generation worker {} {}; its {} unfinished records are re-run by the other workers",
        w.index, how, lost.size()));
}

void WorkerPool::Flush(Worker& w) {
  while (!w.out.empty()) {
    ssize_t n = ::send(w.proc.fd(), w.out.data(), w.out.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    if (n <= 0) {
      // The worker closed its end: what it sent before (an ERROR frame, the
      // last results) is still to be read; the end of its input removes it.
      w.broken = true;
      w.out.clear();
      return;
    }
    w.out.erase(0, size_t(n));
  }
}

void WorkerPool::HandOut() {
  const int64_t avail = sched_->Available();
  const int live = alive();
  if (avail <= 0 || live == 0) return;
  const int64_t quota = (avail + live - 1) / live;
  const int64_t per_worker = 2 * int64_t(slots_);
  for (auto& w : workers_) {
    if (!w.alive || w.broken) continue;
    int64_t room = per_worker - int64_t(w.outstanding.size());
    int64_t n = std::min({room, quota, int64_t(slots_)});
    if (n <= 0) continue;
    tasks_.clear();
    sched_->Issue(n, &tasks_);
    if (tasks_.empty()) break;
    for (const auto& t : tasks_) w.outstanding[t.id] = t;
    wp::EncodeTasks(tasks_, &w.out);
    Flush(w);
  }
}

Status WorkerPool::Receive(Worker& w) {
  const bool eof = !w.proc.ReadAvailable(&w.in);
  Status st;
  bool ok = wp::ParseFrames(&w.in, [&](uint8_t type, const char* p, const char* end) {
    wp::Reader rd(p, end);
    if (type == wp::kError) {
      std::string msg = rd.Str();
      st = DS_ERR(kInternal, "generation worker {} failed: {}", w.index, msg);
      return true;
    }
    if (type == wp::kStats) {
      AllocatorStats m;
      if (!wp::DecodeStats(rd, &m)) return false;
      if (memory_.size() <= size_t(w.index)) memory_.resize(size_t(w.index) + 1);
      memory_[size_t(w.index)] = m;
      return true;
    }
    if (type != wp::kResult) return false;
    GeneratedRecord r;
    if (!wp::DecodeResult(rd, &r)) return false;
    auto it = w.outstanding.find(r.id);
    if (it == w.outstanding.end()) return false;  // not ours: protocol error
    w.outstanding.erase(it);
    r.text = JoinFields(r.fields, model_.delimiter);
    tokens_ += r.tokens;
    sched_->Complete(std::move(r));
    return true;
  });
  if (!ok) {
    Remove(w, "sent a malformed message (killed)");
  } else if (eof) {
    Remove(w, "");
  }
  return st;
}

Status WorkerPool::Exchange(int timeout_ms) {
  if (local_) return ExchangeLocal(timeout_ms);
  HandOut();
  std::vector<pollfd> pfds;
  std::vector<Worker*> pw;
  for (auto& w : workers_) {
    if (!w.alive) continue;
    pfds.push_back(pollfd{w.proc.fd(), short(POLLIN | (w.out.empty() ? 0 : POLLOUT)), 0});
    pw.push_back(&w);
  }
  DS_ASSIGN_OR_RETURN(int ready, PollFds(&pfds, timeout_ms));
  for (size_t k = 0; ready > 0 && k < pfds.size(); ++k) {
    Worker& w = *pw[k];
    if (!w.alive) continue;
    if (pfds[k].revents & POLLOUT) Flush(w);
    if (!w.alive || !(pfds[k].revents & (POLLIN | POLLHUP | POLLERR))) continue;
    DS_RETURN_IF_ERROR(Receive(w));
  }
  return Status::Ok();
}

}  // namespace ds
