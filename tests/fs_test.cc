#include "util/fs.h"

#include <dirent.h>
#include <fcntl.h>
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
  EXPECT_EQ(ReadFile("/dev/zero").status().code(), Code::kInvalidInput);  // at once
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


// ---- output safety helpers (issue #13 item 3) ----

TEST_F(FsTest, IdentifyFileSeesThroughSymlinksAndHardLinks) {
  const std::string f = dir_ + "/input.csv", hard = dir_ + "/hard.csv", sym = dir_ + "/sym.csv";
  ASSERT_TRUE(WriteFileAtomic(f, "a,b\n1,2\n").ok());
  ASSERT_EQ(::link(f.c_str(), hard.c_str()), 0);
  ASSERT_EQ(::symlink("input.csv", sym.c_str()), 0);
  std::optional<FileIdentity> id = IdentifyFile(f);
  ASSERT_TRUE(id.has_value());
  EXPECT_EQ(id->path, RealPath(f).value());
  EXPECT_EQ(id->path[0], '/');
  EXPECT_TRUE(IsSameFile(f, *id));
  EXPECT_TRUE(IsSameFile(hard, *id));  // same inode and mtime
  EXPECT_TRUE(IsSameFile(sym, *id));   // followed
  EXPECT_TRUE(IsSameFile(dir_ + "/./input.csv", *id));
  const std::string other = dir_ + "/other.csv";
  ASSERT_TRUE(WriteFileAtomic(other, "x\n").ok());
  EXPECT_FALSE(IsSameFile(other, *id));
  EXPECT_FALSE(IsSameFile(dir_ + "/missing.csv", *id));
  // The same inode number with another mtime and path: not the same file.
  FileIdentity reused = *IdentifyFile(other);
  reused.path = "/elsewhere/other.csv";
  reused.mtime_ns += 1;
  EXPECT_FALSE(IsSameFile(other, reused));
  EXPECT_FALSE(IdentifyFile(dir_).has_value());  // directories are not files
  EXPECT_FALSE(IdentifyFile(dir_ + "/missing").has_value());
}

TEST_F(FsTest, PathIsWithinAndResolvedParent) {
  EXPECT_TRUE(PathIsWithin("/a/b", "/a/b"));
  EXPECT_TRUE(PathIsWithin("/a/b/c", "/a/b"));
  EXPECT_FALSE(PathIsWithin("/a/bc", "/a/b"));
  EXPECT_FALSE(PathIsWithin("/a", "/a/b"));
  EXPECT_TRUE(PathIsWithin("/x", "/"));
  ASSERT_EQ(::mkdir((dir_ + "/model").c_str(), 0755), 0);
  ASSERT_EQ(::symlink("model", (dir_ + "/link").c_str()), 0);
  const std::string real_dir = RealPath(dir_).value();
  EXPECT_EQ(ResolvedParent(dir_ + "/link/out.csv").value(), real_dir + "/model");
  EXPECT_EQ(ResolvedParent(dir_ + "/model/../out.csv").value(), real_dir);
  EXPECT_EQ(ResolvedParent(dir_ + "/nodir/out.csv").status().code(), Code::kNotFound);
}

TEST_F(FsTest, NoFollowOpensRefuseSymlinksAndCreateExclusiveNeverReuses) {
  const std::string victim = dir_ + "/victim", link = dir_ + "/out.partial";
  ASSERT_TRUE(WriteFileAtomic(victim, "keep me").ok());
  ASSERT_EQ(::symlink("victim", link.c_str()), 0);
  Result<int> fd = OpenExistingNoFollow(link, O_RDWR);
  ASSERT_FALSE(fd.ok());
  EXPECT_EQ(fd.status().code(), Code::kInvalidArgument);
  EXPECT_NE(fd.status().message().find("is a symbolic link; refusing to follow it"),
            std::string::npos);
  Result<int> c = CreateExclusive(link, O_RDWR);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), Code::kAlreadyExists);
  // A dangling symlink is not followed either (O_EXCL|O_NOFOLLOW).
  const std::string dangling = dir_ + "/dangling";
  ASSERT_EQ(::symlink("created-through-link", dangling.c_str()), 0);
  EXPECT_EQ(CreateExclusive(dangling, O_RDWR).status().code(), Code::kAlreadyExists);
  EXPECT_FALSE(PathExists(dir_ + "/created-through-link"));
  EXPECT_EQ(ReadFile(victim).value(), "keep me");
  EXPECT_EQ(OpenExistingNoFollow(dir_ + "/missing", O_RDONLY).status().code(), Code::kNotFound);
  EXPECT_EQ(OpenExistingNoFollow(dir_, O_RDONLY).status().code(), Code::kInvalidArgument);
  Result<int> ok = CreateExclusive(dir_ + "/new", O_RDWR, 0600);
  ASSERT_TRUE(ok.ok());
  ::close(*ok);
  Result<int> again = OpenExistingNoFollow(dir_ + "/new", O_RDWR);
  ASSERT_TRUE(again.ok());
  ::close(*again);
}

TEST_F(FsTest, AtomicWriteDoesNotFollowAPlantedTempName) {
  // The temp name is random (O_EXCL|O_NOFOLLOW, see fs.h); what can be planted
  // is a symlink at the destination: the rename replaces the link, never its target.
  const std::string victim = dir_ + "/victim", link = dir_ + "/out.json";
  ASSERT_TRUE(WriteFileAtomic(victim, "keep me").ok());
  ASSERT_EQ(::symlink("victim", link.c_str()), 0);
  ASSERT_TRUE(WriteFileAtomic(link, "new").ok());
  EXPECT_EQ(ReadFile(victim).value(), "keep me");
  struct stat st;
  ASSERT_EQ(::lstat(link.c_str(), &st), 0);
  EXPECT_TRUE(S_ISREG(st.st_mode));
}

TEST_F(FsTest, DirLockIsExclusiveAndCleansUp) {
  const std::string d = dir_ + "/model";
  {
    Result<std::unique_ptr<DirLock>> a = DirLock::Acquire(d, ".lock", "training into");
    ASSERT_TRUE(a.ok()) << a.status().ToString();
    EXPECT_TRUE((*a)->created());
    EXPECT_TRUE(PathExists(d + "/.lock"));
    // A second holder (another open file description, as another process has)
    // fails at once with a clear message.
    Result<std::unique_ptr<DirLock>> b = DirLock::Acquire(d, ".lock", "training into");
    ASSERT_FALSE(b.ok());
    EXPECT_EQ(b.status().code(), Code::kIo);
    EXPECT_NE(b.status().message().find("another datasynth process is already training into"),
              std::string::npos);
    // In a child process too.
    pid_t pid = ::fork();
    if (pid == 0) _exit(DirLock::Acquire(d, ".lock", "x").ok() ? 1 : 0);
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  }
  // Released: the directory it created held nothing else, so it is gone.
  EXPECT_FALSE(PathExists(d));
  {  // and so are the parents it created; RemoveDirOnRelease removes a filled one
    auto a = DirLock::Acquire(dir_ + "/p/q/m", ".lock", "training into");
    ASSERT_TRUE(a.ok());
    ASSERT_TRUE(WriteFileAtomic(dir_ + "/p/q/m/partial.bin", "x").ok());
    (*a)->RemoveDirOnRelease();
  }
  EXPECT_FALSE(PathExists(dir_ + "/p"));
  ASSERT_EQ(::mkdir(d.c_str(), 0755), 0);
  ASSERT_TRUE(WriteFileAtomic(d + "/model_params.json", "{}").ok());
  {
    auto a = DirLock::Acquire(d, ".lock", "training into");
    ASSERT_TRUE(a.ok());
    EXPECT_FALSE((*a)->created());
    (*a)->RemoveDirOnRelease();  // not created by it: ignored
  }
  EXPECT_EQ(List(d), std::vector<std::string>{"model_params.json"});  // lock file removed
  {
    auto a = DirLock::Acquire(d, ".lock", "training into");
    ASSERT_TRUE(a.ok());  // free again
  }
  // A symlink planted at the lock file's name is not followed.
  ASSERT_TRUE(WriteFileAtomic(dir_ + "/victim", "keep me").ok());
  ASSERT_EQ(::symlink("../victim", (d + "/.lock").c_str()), 0);
  auto s = DirLock::Acquire(d, ".lock", "training into");
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("symbolic link"), std::string::npos);
  EXPECT_EQ(ReadFile(dir_ + "/victim").value(), "keep me");
  // Not a directory.
  EXPECT_FALSE(DirLock::Acquire(dir_ + "/victim", ".lock", "x").ok());
}

}  // namespace
}  // namespace ds
