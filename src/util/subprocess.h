// Forked child processes with one channel to the parent: the one fork /
// pipe / poll / reap implementation behind the generation workers
// (generate/worker_pool), the tabular batch trainers (tabular/tabular.cc)
// and the GPU probe (backend/device.cc).
//
// A Subprocess is a child forked with fork() (no exec: the child runs a
// function of the parent's image and must end with _exit) and the parent's
// end of its channel:
//   kPipe    the child writes, the parent reads (a pipe);
//   kSocket  both ways (a UNIX stream socketpair).
// The parent's end is non-blocking and close-on-exec. stdio buffers are
// flushed before the fork, so that the child does not write them again.
//
// Ownership: the object owns the child. Destroying (or assigning over) one
// whose child still runs kills it (SIGKILL) and reaps it; callers that want a
// gentler end use Signal / ReapAll first. Moves transfer the child.
//
// Exit statuses: Wait returns the raw waitpid status; DescribeExit words it
// ("killed by signal 9 (Killed)", "exited with status 2") and ExitToStatus
// turns it into a Status (Ok only for exit status 0).
#pragma once

#include <poll.h>
#include <sys/types.h>

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "util/status.h"

namespace ds {

class Subprocess {
 public:
  enum class Channel { kPipe, kSocket };

  // Forks a child that runs child_main(fd) with its end of the channel (it
  // must not return: end it with _exit). Errors: kIo (the pipe or socketpair
  // could not be made) or kResourceExhausted (fork failed), the message being
  // strerror's text alone, for the caller to put in context.
  static Result<Subprocess> Spawn(Channel channel, const std::function<void(int fd)>& child_main);

  Subprocess() = default;
  Subprocess(Subprocess&& o) noexcept;
  Subprocess& operator=(Subprocess&& o) noexcept;
  Subprocess(const Subprocess&) = delete;
  Subprocess& operator=(const Subprocess&) = delete;
  ~Subprocess();

  pid_t pid() const { return pid_; }
  int fd() const { return fd_; }             // the parent's end; -1 once closed
  bool running() const { return pid_ > 0; }  // not reaped yet

  // Appends what the channel holds now without blocking; false at the end of
  // the input (the child closed its end or died) or on a read error.
  bool ReadAvailable(std::string* buf);
  // Blocks until the end of the input, appending everything.
  void ReadToEnd(std::string* buf);
  void CloseChannel();
  void Signal(int sig) const;
  // Waits for the child (EINTR retried) and returns its waitpid status
  // (0 when there is no child to wait for).
  int Wait();
  // Reaps the child if it has exited (true; *status set), else false.
  bool TryWait(int* status);
  // Signals the child, then waits for it.
  int Kill(int sig);

 private:
  void Release();  // kill and reap a running child, close the channel
  pid_t pid_ = -1;
  int fd_ = -1;
};

// Closes every channel (a child reading it sees the end of its input), gives
// the children grace_s seconds (in all) to exit, then SIGKILLs and reaps the
// rest. Reaped children have pid() == -1.
void ReapAll(const std::vector<Subprocess*>& children, double grace_s);

// Writes all of data to fd (EINTR retried); false when the other end is gone.
// A child writing to its channel ignores SIGPIPE first.
bool WriteAll(int fd, std::string_view data);

// poll() over pfds; an interrupted poll counts as "nothing ready" (0).
// kIo "poll failed: ..." on a real error.
Result<int> PollFds(std::vector<pollfd>* pfds, int timeout_ms);

// "killed by signal 9 (Killed)", "exited with status 2", "stopped".
std::string DescribeExit(int status);
// The signal that ended the child, 0 when it was not killed by one.
int TermSignal(int status);
// Ok for exit status 0; else kInternal "<what> <DescribeExit(status)>".
Status ExitToStatus(int status, std::string_view what);

}  // namespace ds
