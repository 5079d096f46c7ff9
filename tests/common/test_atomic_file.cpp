// write_file_atomic / rename_atomic: content lands, the temp file is gone, and a failing write
// leaves the previous file untouched and names the path.
#include <gtest/gtest.h>

#include <dirent.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <csignal>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "common/io/atomic_file.h"

namespace lf {
namespace {

class AtomicFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/lf_atomic_XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override {
    for (const std::string& name : list()) ::unlink((dir_ + "/" + name).c_str());
    ::chmod(dir_.c_str(), 0700);
    ::rmdir(dir_.c_str());
  }
  std::vector<std::string> list() const {
    std::vector<std::string> out;
    if (DIR* d = ::opendir(dir_.c_str())) {
      while (dirent* e = ::readdir(d)) {
        std::string n = e->d_name;
        if (n != "." && n != "..") out.push_back(n);
      }
      ::closedir(d);
    }
    return out;
  }
  static std::string slurp(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    std::ostringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }
  std::string dir_;
};

TEST_F(AtomicFileTest, StreamedPiecesAreHashedAsWritten) {
  const std::string path = dir_ + "/out.bin";
  AtomicFileWriter out(path);
  out.write("a", 1);
  out.write("", 0);
  out.write("bc", 2);
  EXPECT_EQ(list().size(), 1u);  // only the temp file so far
  EXPECT_TRUE(list()[0].rfind("out.bin.tmp.", 0) == 0) << list()[0];
  const FileDigest d = out.commit();
  EXPECT_EQ(slurp(path), "abc");
  EXPECT_EQ(d.size, 3u);
  EXPECT_EQ(d.sha256, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(list(), std::vector<std::string>{"out.bin"});
  EXPECT_THROW(out.commit(), std::logic_error);
  EXPECT_EQ(write_file_atomic(path, std::string("abc")).sha256, d.sha256);
}

TEST_F(AtomicFileTest, AnUncommittedWriterLeavesThePreviousFile) {
  const std::string path = dir_ + "/out.bin";
  write_file_atomic(path, std::string("old"));
  {
    AtomicFileWriter out(path);
    out.write("new content", 11);
  }  // e.g. an exception between two pieces
  EXPECT_EQ(slurp(path), "old");
  EXPECT_EQ(list(), std::vector<std::string>{"out.bin"});
}

TEST_F(AtomicFileTest, WritesBytesAndLeavesNoTemp) {
  const std::string path = dir_ + "/out.bin";
  const std::string content("ab\0cd\xff", 6);
  write_file_atomic(path, content);
  EXPECT_EQ(slurp(path), content);
  EXPECT_EQ(list(), std::vector<std::string>{"out.bin"});
}

TEST_F(AtomicFileTest, ReplacesExistingFile) {
  const std::string path = dir_ + "/state.json";
  write_file_atomic(path, std::string("{\"step\":1}"));
  const std::string second = "{\"step\":200}";
  write_file_atomic(path, second.data(), second.size());
  EXPECT_EQ(slurp(path), "{\"step\":200}");
  EXPECT_EQ(list().size(), 1u);
}

TEST_F(AtomicFileTest, EmptyContent) {
  const std::string path = dir_ + "/empty";
  write_file_atomic(path, "", 0);
  struct stat st {};
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_size, 0);
}

TEST_F(AtomicFileTest, UncreatableTempNamesPathAndKeepsOldFile) {
  // A directory squatting on the temp name makes open(2) fail with EISDIR, even as root.
  const std::string path = dir_ + "/keep.txt";
  write_file_atomic(path, std::string("old"));
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  ASSERT_EQ(::mkdir(tmp.c_str(), 0700), 0);
  try {
    write_file_atomic(path, std::string("new"));
    FAIL() << "expected std::runtime_error";
  } catch (const std::runtime_error& e) {
    EXPECT_EQ(std::string(e.what()), tmp + ": create temp file failed (Is a directory)");
  }
  ::rmdir(tmp.c_str());
  EXPECT_EQ(slurp(path), "old");
  EXPECT_EQ(list(), std::vector<std::string>{"keep.txt"});
}

TEST_F(AtomicFileTest, FailedWriteRemovesTempAndKeepsOldFile) {
  // RLIMIT_FSIZE makes write(2) stop short and then fail with EFBIG (SIGXFSZ ignored).
  const std::string path = dir_ + "/big.bin";
  write_file_atomic(path, std::string("previous"));
  struct rlimit old {};
  ASSERT_EQ(::getrlimit(RLIMIT_FSIZE, &old), 0);
  auto old_handler = ::signal(SIGXFSZ, SIG_IGN);
  struct rlimit small = old;
  small.rlim_cur = 16;
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &small), 0);
  std::string error;
  try {
    write_file_atomic(path, std::string(100, 'x'));
  } catch (const std::runtime_error& e) {
    error = e.what();
  }
  ::setrlimit(RLIMIT_FSIZE, &old);
  ::signal(SIGXFSZ, old_handler);
  EXPECT_EQ(error, path + ".tmp." + std::to_string(::getpid()) + ": write failed (File too large)");
  EXPECT_EQ(slurp(path), "previous");
  EXPECT_EQ(list(), std::vector<std::string>{"big.bin"});
}

TEST_F(AtomicFileTest, RenameOntoDirectoryFailsAndRemovesTemp) {
  // rename(2) of a file onto an existing directory fails with EISDIR: the temp must go away.
  const std::string path = dir_ + "/sub";
  ASSERT_EQ(::mkdir(path.c_str(), 0700), 0);
  try {
    write_file_atomic(path, std::string("x"));
    FAIL() << "expected std::runtime_error";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find(path + ": rename from"), std::string::npos) << e.what();
  }
  EXPECT_EQ(list(), std::vector<std::string>{"sub"});
  ::rmdir(path.c_str());
}

TEST_F(AtomicFileTest, MissingDirectoryNamesPath) {
  const std::string path = dir_ + "/no/such/dir/f";
  try {
    write_file_atomic(path, std::string("x"));
    FAIL() << "expected std::runtime_error";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find(dir_ + "/no/such/dir/f.tmp."), std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("No such file or directory"), std::string::npos);
  }
}

TEST_F(AtomicFileTest, RenameAtomicMovesFile) {
  const std::string a = dir_ + "/a", b = dir_ + "/b";
  write_file_atomic(a, std::string("payload"));
  rename_atomic(a, b);
  EXPECT_EQ(slurp(b), "payload");
  EXPECT_EQ(list(), std::vector<std::string>{"b"});
  try {
    rename_atomic(dir_ + "/missing", b);
    FAIL() << "expected std::runtime_error";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find(dir_ + "/missing -> " + b), std::string::npos) << e.what();
  }
}

TEST_F(AtomicFileTest, FsyncDirectoryRejectsMissing) {
  EXPECT_NO_THROW(fsync_directory(dir_));
  EXPECT_THROW(fsync_directory(dir_ + "/nope"), std::runtime_error);
}

TEST(ParentDirectory, Cases) {
  EXPECT_EQ(parent_directory("a/b/c.txt"), "a/b");
  EXPECT_EQ(parent_directory("c.txt"), ".");
  EXPECT_EQ(parent_directory("/c.txt"), "/");
}

}  // namespace
}  // namespace lf
