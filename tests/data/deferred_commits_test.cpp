// DeferredCommits: the outputs of one command go into place together, or none does.

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "expect_throw.hpp"
#include "temp_dir.hpp"
#include "thdpack/core/errors.hpp"
#include "thdpack/data/output_file.hpp"

namespace thdpack {
namespace {

using test_util::TempDir;

std::string content_of(const std::string& path) {
  std::ifstream in(path);
  std::stringstream out;
  out << in.rdbuf();
  return out.str();
}

void write(OutputFile& out, const std::string& text) {
  out.write(text.data(), text.size());
}

size_t temporaries_in(const TempDir& dir) {
  size_t n = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir.path())) {
    n += e.path().filename().string().find(".tmp.") != std::string::npos;
  }
  return n;
}

TEST(DeferredCommits, AFailureBeforeCommitAllReplacesNoOutput) {
  TempDir dir;
  const std::string a = dir.write("a.json", "old a"), b = dir.write("b.html", "old b");
  const std::string c = dir.write("c.bin", "old c"), d = dir.write("c.idx", "old d");
  {
    DeferredCommits outputs;
    OutputFile first(a);
    write(first, "new a");
    first.commit();  // deferred: a is unchanged
    EXPECT_EQ(content_of(a), "old a");
    OutputFile bin(c), idx(d);
    write(bin, "new c");
    write(idx, "new d");
    commit_pair(bin, idx);
    OutputFile last(b);
    write(last, "new b");
    // The command fails here, before commit_all().
  }
  EXPECT_EQ(content_of(a), "old a");
  EXPECT_EQ(content_of(b), "old b");
  EXPECT_EQ(content_of(c), "old c");
  EXPECT_EQ(content_of(d), "old d");
  EXPECT_EQ(temporaries_in(dir), 0u);
}

TEST(DeferredCommits, CommitAllPutsEveryOutputInPlaceAndReadsBackMeanwhile) {
  TempDir dir;
  const std::string a = dir.write("a.json", "old a");
  const std::string c = dir.file("c.bin"), d = dir.file("c.idx");
  DeferredCommits outputs;
  OutputFile first(a);
  write(first, "new a");
  first.commit();
  EXPECT_EQ(content_of(outputs.readable_path(a)), "new a");  // read back before it is in place
  EXPECT_EQ(outputs.readable_path(dir.file("other")), dir.file("other"));
  OutputFile bin(c), idx(d);
  write(bin, "new c");
  write(idx, "new d");
  commit_pair(bin, idx);
  EXPECT_FALSE(std::filesystem::exists(c));
  outputs.commit_all();
  EXPECT_EQ(content_of(a), "new a");
  EXPECT_EQ(content_of(c), "new c");
  EXPECT_EQ(content_of(d), "new d");
  EXPECT_EQ(temporaries_in(dir), 0u);
  // After commit_all, commits are immediate again.
  OutputFile again(a);
  write(again, "newer a");
  again.commit();
  EXPECT_EQ(content_of(a), "newer a");
}

TEST(DeferredCommits, ScopesDoNotNest) {
  DeferredCommits outer;
  test_util::expect_throw_with<InvalidArgument>([] { DeferredCommits inner; },
                                                "outputs are already deferred");
}

}  // namespace
}  // namespace thdpack
