#include "util/subprocess.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>

namespace ds {

Result<Subprocess> Subprocess::Spawn(Channel channel,
                                     const std::function<void(int fd)>& child_main) {
  int fds[2];  // [0] the parent's end, [1] the child's
  int made = channel == Channel::kSocket ? ::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds)
                                         : ::pipe2(fds, O_CLOEXEC);
  if (made != 0) return DS_ERR(kIo, "{}", strerror(errno));
  std::fflush(nullptr);  // no duplicated stdio buffers in the child
  pid_t pid = ::fork();
  if (pid < 0) {
    Status st = DS_ERR(kResourceExhausted, "{}", strerror(errno));
    ::close(fds[0]);
    ::close(fds[1]);
    return st;
  }
  if (pid == 0) {
    ::close(fds[0]);
    child_main(fds[1]);
    ::_exit(0);  // child_main should not return
  }
  ::close(fds[1]);
  ::fcntl(fds[0], F_SETFL, ::fcntl(fds[0], F_GETFL) | O_NONBLOCK);
  Subprocess p;
  p.pid_ = pid;
  p.fd_ = fds[0];
  return p;
}

Subprocess::Subprocess(Subprocess&& o) noexcept : pid_(o.pid_), fd_(o.fd_) {
  o.pid_ = -1;
  o.fd_ = -1;
}

Subprocess& Subprocess::operator=(Subprocess&& o) noexcept {
  if (this != &o) {
    Release();
    pid_ = o.pid_;
    fd_ = o.fd_;
    o.pid_ = -1;
    o.fd_ = -1;
  }
  return *this;
}

Subprocess::~Subprocess() { Release(); }

void Subprocess::Release() {
  CloseChannel();
  if (pid_ > 0) Kill(SIGKILL);
}

bool Subprocess::ReadAvailable(std::string* buf) {
  if (fd_ < 0) return false;
  char tmp[65536];
  while (true) {
    ssize_t n = ::read(fd_, tmp, sizeof(tmp));
    if (n > 0) {
      buf->append(tmp, size_t(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return true;
    return false;  // end of input, or a read error
  }
}

void Subprocess::ReadToEnd(std::string* buf) {
  if (fd_ < 0) return;
  ::fcntl(fd_, F_SETFL, ::fcntl(fd_, F_GETFL) & ~O_NONBLOCK);
  ReadAvailable(buf);
}

void Subprocess::CloseChannel() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

void Subprocess::Signal(int sig) const {
  if (pid_ > 0) ::kill(pid_, sig);
}

int Subprocess::Wait() {
  int status = 0;
  if (pid_ <= 0) return 0;
  while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
  }
  pid_ = -1;
  return status;
}

int Subprocess::Kill(int sig) {
  Signal(sig);
  return Wait();
}

bool Subprocess::TryWait(int* status) {
  if (pid_ <= 0) return true;
  while (true) {
    pid_t r = ::waitpid(pid_, status, WNOHANG);
    if (r < 0 && errno == EINTR) continue;
    if (r == 0) return false;
    pid_ = -1;  // reaped (or not ours to wait for)
    return true;
  }
}

void ReapAll(const std::vector<Subprocess*>& children, double grace_s) {
  using Clock = std::chrono::steady_clock;
  for (Subprocess* c : children) c->CloseChannel();
  const auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                           std::chrono::duration<double>(grace_s));
  for (Subprocess* c : children) {
    int status;
    while (!c->TryWait(&status)) {
      if (Clock::now() > deadline) {
        c->Kill(SIGKILL);
        break;
      }
      ::usleep(1000);
    }
  }
}

bool WriteAll(int fd, std::string_view data) {
  size_t off = 0;
  while (off < data.size()) {
    ssize_t w = ::write(fd, data.data() + off, data.size() - off);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    off += size_t(w);
  }
  return true;
}

Result<int> PollFds(std::vector<pollfd>* pfds, int timeout_ms) {
  int pr = ::poll(pfds->data(), nfds_t(pfds->size()), timeout_ms);
  if (pr < 0 && errno == EINTR) return 0;
  if (pr < 0) return DS_ERR(kIo, "poll failed: {}", strerror(errno));
  return pr;
}

std::string DescribeExit(int status) {
  if (WIFSIGNALED(status))
    return fmt::format("killed by signal {} ({})", WTERMSIG(status), strsignal(WTERMSIG(status)));
  if (WIFEXITED(status)) return fmt::format("exited with status {}", WEXITSTATUS(status));
  return "stopped";
}

int TermSignal(int status) { return WIFSIGNALED(status) ? WTERMSIG(status) : 0; }

Status ExitToStatus(int status, std::string_view what) {
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return Status::Ok();
  return DS_ERR(kInternal, "{} {}", what, DescribeExit(status));
}

}  // namespace ds
