// IndexedDatasetWriter after finish(): every call that would write refuses with a clear error (it
// used to write through a closed file), and the finished dataset stays as it was.

#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <vector>

#include "expect_throw.hpp"
#include "temp_dir.hpp"
#include "thdpack/core/errors.hpp"
#include "thdpack/data/indexed_dataset.hpp"

namespace thdpack {
namespace {

TEST(IndexedWriterState, CallsAfterFinishAreRefusedAndTheDatasetStaysIntact) {
  test_util::TempDir dir;
  const std::string prefix = dir.file("d");
  IndexedDatasetWriter writer(prefix, TokenDType::kInt32);
  const std::vector<int64_t> tokens = {4, 5, 6};
  writer.add_sequence(tokens);
  writer.finish();
  test_util::expect_throw_with<InvalidArgument>([&] { writer.finish(); },
                                                {"finish after finish()", prefix});
  test_util::expect_throw_with<InvalidArgument>([&] { writer.add_sequence(tokens); },
                                                {"add_sequence after finish()", prefix});
  test_util::expect_throw_with<InvalidArgument>([&] { writer.add_length_only(3); },
                                                "add_length_only after finish()");
  test_util::expect_throw_with<InvalidArgument>([&] { writer.end_document(); },
                                                "end_document after finish()");
  const auto dataset = IndexedDataset::open(prefix);
  ASSERT_EQ(dataset->size(), 1);
  EXPECT_EQ(dataset->sample(0).input_ids, tokens);
}

TEST(IndexedWriterState, AFailedFinishIsReportedNotTakenForCompletion) {
  test_util::TempDir dir;
  const std::string prefix = dir.file("d");
  IndexedDatasetWriter writer(prefix, TokenDType::kInt32);
  const std::vector<int64_t> tokens = {4, 5, 6};
  writer.add_sequence(tokens);
  std::filesystem::create_directory(prefix + ".idx");  // .idx cannot be written
  test_util::expect_throw_with<InvalidArgument>([&] { writer.finish(); }, "not a regular file");
  test_util::expect_throw_with<InvalidArgument>([&] { writer.finish(); },
                                                {"finish after a failed finish()", prefix});
  test_util::expect_throw_with<InvalidArgument>([&] { writer.add_sequence(tokens); },
                                                "add_sequence after a failed finish()");
  EXPECT_FALSE(std::filesystem::exists(prefix + ".bin"));
  for (const auto& entry : std::filesystem::directory_iterator(dir.path())) {
    EXPECT_EQ(entry.path().filename().string().find(".tmp."), std::string::npos) << entry.path();
  }
}

}  // namespace
}  // namespace thdpack
