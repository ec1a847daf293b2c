#include "util/fs.h"

#include <dirent.h>
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstdlib>
#include <string>
#include <vector>

namespace ds {
namespace {

class FsTest : public testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/ds_fs_test_XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override {
    ::chmod(dir_.c_str(), 0755);
    EXPECT_TRUE(RemoveTree(dir_).ok());
  }
  std::vector<std::string> List(const std::string& d) {
    std::vector<std::string> names;
    DIR* h = opendir(d.c_str());
    if (!h) return names;
    while (dirent* e = readdir(h)) {
      std::string n = e->d_name;
      if (n != "." && n != "..") names.push_back(n);
    }
    closedir(h);
    std::sort(names.begin(), names.end());
    return names;
  }
  std::string dir_;
};

TEST_F(FsTest, WriteFileAtomicWritesAndReplaces) {
  const std::string p = dir_ + "/out.txt";
  ASSERT_TRUE(WriteFileAtomic(p, "first").ok());
  EXPECT_EQ(ReadFile(p).value(), "first");
  ASSERT_TRUE(WriteFileAtomic(p, std::string(3 << 20, 'z')).ok());
  EXPECT_EQ(ReadFile(p).value(), std::string(3 << 20, 'z'));
  ASSERT_TRUE(WriteFileAtomic(p, "").ok());
  EXPECT_EQ(ReadFile(p).value(), "");
  EXPECT_EQ(List(dir_), std::vector<std::string>{"out.txt"});  // no temp left behind
  // Mode follows the umask like a plain create (not mkstemp's 0600).
  const mode_t um = ::umask(0);
  ::umask(um);
  struct stat st;
  ASSERT_EQ(::stat(p.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0666 & ~um);
}

TEST_F(FsTest, WriteIntoMissingDirFailsWithPathAndReason) {
  const std::string p = dir_ + "/nope/out.txt";
  Status s = WriteFileAtomic(p, "x");
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), Code::kIo);
  EXPECT_NE(s.message().find(p), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("No such file or directory"), std::string::npos) << s.message();
  EXPECT_TRUE(List(dir_).empty());
}

// As root, directory permissions do not apply: the write then runs in a child process
// that drops to uid/gid 65534 (nobody).
TEST_F(FsTest, WriteIntoReadOnlyDirFailsAndLeavesNothing) {
  const std::string ro = dir_ + "/ro";
  const std::string target = ro + "/out.txt";
  ASSERT_TRUE(MakeDirs(ro).ok());
  ASSERT_EQ(::chmod(dir_.c_str(), 0755), 0);
  ASSERT_EQ(::chmod(ro.c_str(), 0555), 0);
  auto check = [&](const Status& s) -> int {
    if (s.ok()) return 10;
    if (s.code() != Code::kIo) return 11;
    if (s.message().find(target) == std::string::npos) return 12;
    if (s.message().find("Permission denied") == std::string::npos) return 13;
    return 0;
  };
  int rc;
  if (::geteuid() != 0) {
    rc = check(WriteFileAtomic(target, "data"));
  } else {
    const pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      if (::setgid(65534) != 0 || ::setuid(65534) != 0) ::_exit(20);
      ::_exit(check(WriteFileAtomic(target, "data")));
    }
    int wstatus = 0;
    ASSERT_EQ(::waitpid(pid, &wstatus, 0), pid);
    ASSERT_TRUE(WIFEXITED(wstatus));
    rc = WEXITSTATUS(wstatus);
  }
  ::chmod(ro.c_str(), 0755);
  EXPECT_EQ(rc, 0) << "10: no error, 11: wrong code, 12: path missing, 13: no strerror, "
                      "20: cannot drop privileges";
  EXPECT_TRUE(List(ro).empty());
}

// Simulates "disk full" mid-write with RLIMIT_FSIZE (write fails with EFBIG; this works
// for root too): the temp file must be removed and the old destination kept intact.
TEST_F(FsTest, WriteFailureMidFileRemovesTempAndKeepsOldFile) {
  const std::string p = dir_ + "/model.bin";
  ASSERT_TRUE(WriteFileAtomic(p, "old contents").ok());
  struct rlimit old_lim;
  ASSERT_EQ(getrlimit(RLIMIT_FSIZE, &old_lim), 0);
  auto old_handler = std::signal(SIGXFSZ, SIG_IGN);
  struct rlimit lim = old_lim;
  lim.rlim_cur = 1 << 20;
  ASSERT_EQ(setrlimit(RLIMIT_FSIZE, &lim), 0);
  Status s1 = WriteFileAtomic(p, std::string(4 << 20, 'x'));
  AtomicFileWriter w;
  Status open = w.Open(p);
  Status s2 = Status::Ok();
  for (int i = 0; i < 40 && s2.ok(); ++i) s2 = w.Write(std::string(100000, 'y'));
  Status s3 = w.Commit();
  setrlimit(RLIMIT_FSIZE, &old_lim);
  std::signal(SIGXFSZ, old_handler);

  ASSERT_FALSE(s1.ok());
  EXPECT_EQ(s1.code(), Code::kIo);
  EXPECT_NE(s1.message().find(p), std::string::npos) << s1.message();
  EXPECT_NE(s1.message().find("File too large"), std::string::npos) << s1.message();
  ASSERT_TRUE(open.ok());
  EXPECT_FALSE(s2.ok());
  EXPECT_FALSE(s3.ok());  // the error is sticky
  EXPECT_EQ(s3.message(), s2.message());
  EXPECT_FALSE(w.is_open());
  EXPECT_EQ(List(dir_), std::vector<std::string>{"model.bin"});
  EXPECT_EQ(ReadFile(p).value(), "old contents");
}

TEST_F(FsTest, AtomicFileWriterStreamsAndCommits) {
  const std::string p = dir_ + "/big.txt";
  std::string expect;
  AtomicFileWriter w;
  ASSERT_TRUE(w.Open(p).ok());
  EXPECT_NE(w.temp_path(), p);
  EXPECT_TRUE(PathExists(w.temp_path()));
  EXPECT_FALSE(PathExists(p));  // nothing visible before Commit
  // Small, medium and > 1 MiB pieces exercise every buffering path.
  for (size_t n : {size_t{1}, size_t{1000}, size_t{1} << 20, size_t{3} << 20, size_t{7},
                   size_t{900000}, size_t{300000}}) {
    std::string piece(n, static_cast<char>('a' + n % 26));
    expect += piece;
    ASSERT_TRUE(w.Write(piece).ok());
  }
  EXPECT_EQ(w.bytes_written(), expect.size());
  ASSERT_TRUE(w.Commit().ok());
  EXPECT_EQ(ReadFile(p).value(), expect);
  EXPECT_EQ(List(dir_), std::vector<std::string>{"big.txt"});
  EXPECT_EQ(w.Write("more").code(), Code::kInternal);  // closed after Commit
}

TEST_F(FsTest, AtomicFileWriterWithoutCommitLeavesNothing) {
  const std::string p = dir_ + "/never.txt";
  {
    AtomicFileWriter w;
    ASSERT_TRUE(w.Open(p).ok());
    ASSERT_TRUE(w.Write(std::string(2 << 20, 'q')).ok());
    EXPECT_EQ(List(dir_).size(), 1u);  // the temp file
  }
  EXPECT_TRUE(List(dir_).empty());
  // An existing destination is untouched by an abandoned writer.
  ASSERT_TRUE(WriteFileAtomic(p, "keep").ok());
  {
    AtomicFileWriter w;
    ASSERT_TRUE(w.Open(p).ok());
    ASSERT_TRUE(w.Write("replacement").ok());
    w.Abort();
    EXPECT_FALSE(PathExists(w.temp_path()));
  }
  EXPECT_EQ(ReadFile(p).value(), "keep");
  EXPECT_EQ(List(dir_), std::vector<std::string>{"never.txt"});
}

TEST_F(FsTest, ReadFileErrors) {
  const std::string p = dir_ + "/f.txt";
  ASSERT_TRUE(WriteFileAtomic(p, "0123456789").ok());
  EXPECT_EQ(ReadFile(p, 10).value(), "0123456789");
  auto big = ReadFile(p, 9);
  ASSERT_FALSE(big.ok());
  EXPECT_EQ(big.status().code(), Code::kInvalidInput);
  EXPECT_NE(big.status().message().find(p), std::string::npos);
  auto missing = ReadFile(dir_ + "/missing.txt");
  EXPECT_EQ(missing.status().code(), Code::kNotFound);
  EXPECT_NE(missing.status().message().find("missing.txt"), std::string::npos);
  auto d = ReadFile(dir_);
  EXPECT_EQ(d.status().code(), Code::kIo);
  EXPECT_NE(d.status().message().find("directory"), std::string::npos);
}

TEST_F(FsTest, MakeDirsRemoveTreePathExists) {
  const std::string deep = dir_ + "/a/b/c";
  EXPECT_FALSE(PathExists(deep));
  ASSERT_TRUE(MakeDirs(deep).ok());
  ASSERT_TRUE(MakeDirs(deep).ok());        // already there
  ASSERT_TRUE(MakeDirs(deep + "/").ok());  // trailing slash
  EXPECT_TRUE(PathExists(deep));
  ASSERT_TRUE(WriteFileAtomic(deep + "/x.txt", "x").ok());
  Status s = MakeDirs(deep + "/x.txt/sub");
  EXPECT_EQ(s.code(), Code::kIo);
  EXPECT_NE(s.message().find("x.txt"), std::string::npos);
  EXPECT_EQ(MakeDirs(deep + "/x.txt").code(), Code::kIo);  // a file, not a directory
  ASSERT_TRUE(RemoveTree(dir_ + "/a").ok());
  EXPECT_FALSE(PathExists(dir_ + "/a"));
  EXPECT_TRUE(RemoveTree(dir_ + "/a").ok());  // missing is fine
  EXPECT_TRUE(List(dir_).empty());
}

}  // namespace
}  // namespace ds
