// util/subprocess: spawning with a pipe or a socket, reading to the end,
// exit statuses, killing and reaping.
#include "util/subprocess.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>

namespace ds {
namespace {

TEST(Subprocess, PipeCarriesTheChildsOutputAndExitStatus) {
  auto p = Subprocess::Spawn(Subprocess::Channel::kPipe, [](int fd) {
    WriteAll(fd, "hello ");
    WriteAll(fd, "world");
    ::_exit(3);
  });
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  std::string got;
  p->ReadToEnd(&got);
  EXPECT_EQ(got, "hello world");
  int st = p->Wait();
  EXPECT_FALSE(p->running());
  EXPECT_EQ(DescribeExit(st), "exited with status 3");
  EXPECT_EQ(TermSignal(st), 0);
  Status s = ExitToStatus(st, "the child");
  EXPECT_EQ(s.code(), Code::kInternal);
  EXPECT_EQ(s.message(), "the child exited with status 3");
}

TEST(Subprocess, SocketIsBidirectionalAndNonBlockingForTheParent) {
  auto p = Subprocess::Spawn(Subprocess::Channel::kSocket, [](int fd) {
    char c;
    while (::read(fd, &c, 1) == 1) WriteAll(fd, std::string(1, char(c + 1)));
    ::_exit(0);
  });
  ASSERT_TRUE(p.ok());
  std::string got;
  EXPECT_TRUE(p->ReadAvailable(&got));  // nothing yet, but not the end
  EXPECT_EQ(got, "");
  ASSERT_TRUE(WriteAll(p->fd(), "abc"));
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (got.size() < 3 && std::chrono::steady_clock::now() < deadline) {
    std::vector<pollfd> pfds = {{p->fd(), POLLIN, 0}};
    ASSERT_TRUE(PollFds(&pfds, 100).ok());
    EXPECT_TRUE(p->ReadAvailable(&got));
  }
  EXPECT_EQ(got, "bcd");
  p->CloseChannel();  // the child sees the end of its input and exits 0
  EXPECT_TRUE(ExitToStatus(p->Wait(), "child").ok());
}

TEST(Subprocess, KillReapAllAndDestructorLeaveNoChild) {
  auto sleeper = [](int) {
    ::signal(SIGTERM, SIG_IGN);
    for (;;) ::pause();
  };
  auto a = Subprocess::Spawn(Subprocess::Channel::kPipe, sleeper);
  auto b = Subprocess::Spawn(Subprocess::Channel::kPipe, sleeper);
  ASSERT_TRUE(a.ok() && b.ok());
  int st = a->Kill(SIGKILL);
  EXPECT_EQ(TermSignal(st), SIGKILL);
  EXPECT_NE(DescribeExit(st).find("killed by signal 9"), std::string::npos) << DescribeExit(st);
  // b ignores SIGTERM and never reads its channel: ReapAll kills it after the grace.
  pid_t bp = b->pid();
  auto t0 = std::chrono::steady_clock::now();
  ReapAll({&*b}, 0.2);
  EXPECT_FALSE(b->running());
  EXPECT_GE(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(150));
  EXPECT_NE(::kill(bp, 0), 0);  // gone (reaped)
  pid_t cp;
  {
    auto c = Subprocess::Spawn(Subprocess::Channel::kSocket, sleeper);
    ASSERT_TRUE(c.ok());
    cp = c->pid();
  }  // the destructor kills and reaps
  EXPECT_NE(::kill(cp, 0), 0);
}

}  // namespace
}  // namespace ds
