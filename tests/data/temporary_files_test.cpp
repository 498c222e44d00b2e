// OutputFile's temporary files: names of every legal length, removal of what a killed writer left,
// and removal of live ones when a signal ends the process.

#include "data/temporary_files.hpp"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <climits>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "temp_dir.hpp"
#include "thdpack/data/output_file.hpp"

namespace thdpack {
namespace {

using test_util::TempDir;

std::vector<std::string> temporaries_in(const std::string& folder) {
  std::vector<std::string> out;
  for (const auto& entry : std::filesystem::directory_iterator(folder)) {
    const std::string name = entry.path().filename().string();
    if (name.find(".tmp.") != std::string::npos) out.push_back(name);
  }
  return out;
}

void touch(const std::string& path) {
  std::ofstream(path) << "left behind";
}

// The PID of a process that has ended.
pid_t ended_process() {
  const pid_t child = ::fork();
  if (child == 0) ::_exit(0);
  int status = 0;
  ::waitpid(child, &status, 0);
  return child;
}

TEST(TemporaryFiles, EveryLegalNameLengthCanBeWritten) {
  TempDir dir;
  for (const size_t length : {size_t{1}, size_t{200}, size_t{244}, size_t{NAME_MAX}}) {
    SCOPED_TRACE(length);
    const std::string path = dir.file(std::string(length, 'n'));
    OutputFile out(path);
    out.write("abc", 3);
    out.commit();
    EXPECT_EQ(std::filesystem::file_size(path), 3u);
    EXPECT_TRUE(temporaries_in(dir.path()).empty());
  }
}

TEST(TemporaryFiles, WhatAKilledWriterLeftIsRemovedByTheNextWriter) {
  TempDir dir;
  const std::string path = dir.file("plans.json");
  // Names as a writer of this host makes them, with the PID part replaced.
  const std::string mine = detail::temporary_template(path);
  const std::string own_pid = std::string(".").append(std::to_string(::getpid())).append(".XXXXXX");
  ASSERT_NE(mine.find(own_pid), std::string::npos) << mine;
  const std::string stem = mine.substr(0, mine.find(own_pid));
  const std::string dead = stem + "." + std::to_string(ended_process()).append(".abc123");
  const std::string running = stem + "." + std::to_string(::getppid()).append(".abc123");
  const std::string other_host =
      dir.file(".plans.json.tmp.some-other-host." + std::to_string(ended_process()) + ".abc123");
  const std::string other_output = dir.file(".results.json.tmp.x.1.a");
  for (const auto& p : {dead, running, other_host, other_output}) touch(p);

  OutputFile out(path);
  EXPECT_FALSE(std::filesystem::exists(dead)) << "a dead writer's temporary stays";
  EXPECT_TRUE(std::filesystem::exists(running)) << "a running writer's temporary was removed";
  EXPECT_TRUE(std::filesystem::exists(other_host)) << "another host's temporary was removed";
  EXPECT_TRUE(std::filesystem::exists(other_output)) << "another output's temporary was removed";
}

TEST(TemporaryFiles, ASignalRemovesTheLiveTemporariesAndEndsTheProcessAsItWould) {
  for (const int signal : {SIGTERM, SIGINT, SIGHUP}) {
    SCOPED_TRACE(signal);
    TempDir dir;
    const pid_t child = ::fork();
    if (child == 0) {
      clean_up_outputs_on_signals();
      OutputFile first(dir.file("a.bin"));
      OutputFile second(dir.file("b.idx"));
      first.write("0123456789", 10);
      ::raise(signal);
      ::_exit(0);  // not reached
    }
    int status = 0;
    ASSERT_EQ(::waitpid(child, &status, 0), child);
    EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == signal);
    EXPECT_TRUE(temporaries_in(dir.path()).empty());
    EXPECT_FALSE(std::filesystem::exists(dir.file("a.bin")));
  }
}

}  // namespace
}  // namespace thdpack
