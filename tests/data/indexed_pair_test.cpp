// An indexed dataset's .bin and .idx are one unit (indexed_dataset.hpp): the index is sealed with
// the data file it was written with, every mix of two writes is refused with one line (naming a
// data file a commit kept), writers of one prefix exclude each other, and a reader racing a
// writer's commits only ever opens whole pairs.

#include <gtest/gtest.h>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "data/indexed_pair.hpp"
#include "expect_throw.hpp"
#include "megatron_index.hpp"
#include "temp_dir.hpp"
#include "thdpack/core/errors.hpp"
#include "thdpack/data/indexed_dataset.hpp"

namespace thdpack {
namespace {

using test_util::expect_throw_with;
using test_util::TempDir;
using testing::read_bytes;
using testing::write_bytes;

using Sequences = std::vector<std::vector<int64_t>>;

void write_dataset(const std::string& prefix, const Sequences& sequences) {
  IndexedDatasetWriter writer(prefix, TokenDType::kInt32);
  for (const auto& s : sequences) writer.add_sequence(s);
  writer.finish();
}

// `count` sequences of seeded lengths in [1, max_length] and seeded tokens.
Sequences random_sequences(uint64_t seed, int count, int max_length) {
  std::mt19937_64 rng(seed);
  Sequences out(static_cast<size_t>(count));
  for (auto& s : out) {
    s.resize(1 + rng() % static_cast<uint64_t>(max_length));
    for (auto& t : s) t = static_cast<int64_t>(rng() % 50000);
  }
  return out;
}

// Puts `bytes` at `path` by a rename, as writers do (a reader's map of the old file stays valid).
void replace_file(const std::string& path, const std::string& bytes) {
  write_bytes(path + ".new", bytes);
  std::filesystem::rename(path + ".new", path);
}

std::string contents_of(const IndexedDataset& d) {
  std::string all;
  for (int64_t i = 0; i < d.size(); ++i) {
    for (int64_t t : d.sample(i).input_ids) all.append(std::to_string(t)).append(",");
    all.append(";");
  }
  return all;
}

TEST(IndexedPair, TheIndexIsSealedWithItsDataFileAndMegatronsLayoutIsUnchangedBeforeTheSeal) {
  TempDir dir;
  const std::string prefix = dir.file("sealed");
  write_dataset(prefix, {{5, 6, 7}, {8}});
  const std::string idx = read_bytes(prefix + ".idx");
  const std::string bin = read_bytes(prefix + ".bin");
  EXPECT_EQ(bin.size(), 16u);  // token bytes only: Megatron's merge concatenates .bin files
  const auto seal = detail::find_seal(std::as_bytes(std::span(idx.data(), idx.size())));
  ASSERT_TRUE(seal.has_value());
  EXPECT_EQ(seal->data_bytes, 16u);
  EXPECT_EQ(seal->fingerprint, detail::data_fingerprint(std::as_bytes(std::span(bin))));
  // Header, lengths, pointers, documents: 34 + 2·4 + 2·8 + 3·8 bytes, then the seal.
  EXPECT_EQ(idx.size(), 34u + 8 + 16 + 24 + detail::kIndexSealBytes);
  EXPECT_EQ(contents_of(*IndexedDataset::open(prefix)), "5,6,7,;8,;");
}

TEST(IndexedPair, TwoWritesOfTheSameDataAreByteIdentical) {
  TempDir dir;
  const std::string a = dir.file("a"), b = dir.file("b");
  write_dataset(a, {{1, 2}});
  write_dataset(b, {{1, 2}});
  const std::string ia = read_bytes(a + ".idx"), ib = read_bytes(b + ".idx");
  const auto sa = detail::find_seal(std::as_bytes(std::span(ia.data(), ia.size())));
  const auto sb = detail::find_seal(std::as_bytes(std::span(ib.data(), ib.size())));
  ASSERT_TRUE(sa && sb);
  EXPECT_EQ(sa->fingerprint, sb->fingerprint);
  EXPECT_EQ(ia, ib);
  EXPECT_EQ(read_bytes(a + ".bin"), read_bytes(b + ".bin"));
}

// Every mix of two different writes is refused, over seeded pairs of datasets: sizes that differ,
// and sizes that agree with contents that differ (the same lengths, other tokens).
TEST(IndexedPair, EveryMixOfTwoDifferentWritesIsRefusedWithOneLine) {
  TempDir dir;
  int same_size_cases = 0;
  for (uint64_t seed = 1; seed <= 60; ++seed) {
    Sequences first = random_sequences(seed, 1 + static_cast<int>(seed % 7), 3000);
    Sequences second =
        seed % 2 == 0 ? random_sequences(seed + 1000, 1 + static_cast<int>(seed % 5), 3000) : first;
    if (seed % 2 == 1) {  // same lengths, one token changed somewhere
      auto& s = second[seed % second.size()];
      s[seed % s.size()] += 1;
      ++same_size_cases;
    }
    const std::string a = dir.file(std::string("a").append(std::to_string(seed)));
    const std::string b = dir.file(std::string("b").append(std::to_string(seed)));
    write_dataset(a, first);
    write_dataset(b, second);
    const std::string mixed = dir.file(std::string("mixed").append(std::to_string(seed)));
    write_bytes(mixed + ".idx", read_bytes(a + ".idx"));
    write_bytes(mixed + ".bin", read_bytes(b + ".bin"));
    SCOPED_TRACE(std::string("seed ").append(std::to_string(seed)));
    const std::string expected = seed % 2 == 1 ? "same size, other contents" : ".bin";
    expect_throw_with<InvalidArgument>([&] { IndexedDataset::open(mixed); }, expected);
    write_bytes(mixed + ".idx", read_bytes(b + ".idx"));
    write_bytes(mixed + ".bin", read_bytes(a + ".bin"));
    expect_throw_with<InvalidArgument>([&] { IndexedDataset::open(mixed); }, mixed + ".bin");
  }
  EXPECT_EQ(same_size_cases, 30);
}

TEST(IndexedPair, AMixedPairNamesTheOldDataFileACommitKept) {
  TempDir dir;
  const std::string prefix = dir.file("crashed");
  write_dataset(prefix, {{1, 2, 3}});
  const std::string old_idx = read_bytes(prefix + ".idx");
  const std::string kept = dir.file(".crashed.bin.old.4242.0");
  write_bytes(kept, read_bytes(prefix + ".bin"));
  write_dataset(prefix, {{4, 5, 6}, {7}});
  write_bytes(prefix + ".idx", old_idx);  // the new .bin renamed, the new .idx never was
  expect_throw_with<InvalidArgument>([&] { IndexedDataset::open(prefix); },
                                     {"the pair is mixed", "kept as '" + kept + "'"});
}

TEST(IndexedPair, AMegatronIndexWithoutSealOpensAndItsSizeIsStillChecked) {
  TempDir dir;
  const std::string prefix = dir.file("megatron");
  write_dataset(prefix, {{1, 2, 3}, {4}});
  std::string idx = read_bytes(prefix + ".idx");
  idx.resize(idx.size() - detail::kIndexSealBytes);
  write_bytes(prefix + ".idx", idx);
  EXPECT_EQ(contents_of(*IndexedDataset::open(prefix)), "1,2,3,;4,;");
  write_bytes(prefix + ".bin", read_bytes(prefix + ".bin") + std::string(8, '\0'));
  expect_throw_with<InvalidArgument>([&] { IndexedDataset::open(prefix); },
                                     "the index does not match this data file");
}

TEST(IndexedPair, ASealThatDisagreesWithTheLengthsIsRefused) {
  TempDir dir;
  const std::string prefix = dir.file("forged");
  write_dataset(prefix, {{1, 2, 3}});
  std::string idx = read_bytes(prefix + ".idx");
  idx[idx.size() - detail::kIndexSealBytes + 8] += 4;  // data_bytes, low byte
  write_bytes(prefix + ".idx", idx);
  expect_throw_with<InvalidArgument>([&] { IndexedDataset::open(prefix); },
                                     {"the seal gives", "lengths cover 12"});
}

TEST(IndexedPair, ASecondWriterOfOnePrefixIsRefusedUntilTheFirstFinishes) {
  TempDir dir;
  const std::string prefix = dir.file("shared");
  auto first = std::make_unique<IndexedDatasetWriter>(prefix, TokenDType::kInt32);
  first->add_sequence(std::vector<int64_t>{1});
  expect_throw_with<InvalidArgument>(
      [&] { IndexedDatasetWriter second(prefix, TokenDType::kInt32); },
      {std::string("is being written by another writer (process ")
           .append(std::to_string(::getpid())),
       detail::prefix_lock_path(prefix)});
  EXPECT_TRUE(detail::writer_active(prefix));
  first->finish();
  EXPECT_FALSE(detail::writer_active(prefix));
  write_dataset(prefix, {{2}});  // the lock is free again once the pair is in place
  first.reset();
  EXPECT_EQ(contents_of(*IndexedDataset::open(prefix)), "2,;");
}

TEST(IndexedPair, AnAbandonedWriterReleasesTheLock) {
  TempDir dir;
  const std::string prefix = dir.file("abandoned");
  { IndexedDatasetWriter writer(prefix, TokenDType::kInt32); }
  EXPECT_FALSE(detail::writer_active(prefix));
  write_dataset(prefix, {{3}});
}

TEST(IndexedPair, LockNamesFitTheFolderAndKeepLongNamesApart) {
  TempDir dir;
  const std::string a = dir.file(std::string(250, 'x') + "a");
  const std::string b = dir.file(std::string(250, 'x') + "b");
  EXPECT_NE(detail::prefix_lock_path(a), detail::prefix_lock_path(b));
  EXPECT_LE(std::filesystem::path(detail::prefix_lock_path(a)).filename().string().size(), 255u);
  write_dataset(a, {{1}});  // 251 bytes leave room for ".bin" and ".idx", not for ".NAME.lock"
  EXPECT_EQ(contents_of(*IndexedDataset::open(a)), "1,;");
}

// A reader that finds a mixed pair while a writer holds the lock waits for the commit to end.
TEST(IndexedPair, AReaderWaitsForTheCommitOfAWriterThatHoldsTheLock) {
  TempDir dir;
  const std::string prefix = dir.file("waiting");
  write_dataset(prefix, {{1, 2, 3}});
  const std::string old_idx = read_bytes(prefix + ".idx");
  write_dataset(prefix, {{4, 5}});
  const std::string new_idx = read_bytes(prefix + ".idx");
  write_bytes(prefix + ".idx", old_idx);
  auto lock = std::make_unique<detail::PrefixLock>(prefix);
  std::thread writer([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    replace_file(prefix + ".idx", new_idx);
    lock.reset();
  });
  std::string seen;
  EXPECT_NO_THROW(seen = contents_of(*IndexedDataset::open(prefix)));
  writer.join();
  EXPECT_EQ(seen, "4,5,;");
}

// The race of the field: another process replaces the dataset over and over with two versions of
// different sizes while this one opens it; every open must give one whole version.
TEST(IndexedPair, OpensRacingReplacementsAlwaysSeeAWholePair) {
  TempDir dir;
  const std::string prefix = dir.file("raced");
  const Sequences versions[2] = {random_sequences(7, 3, 200), random_sequences(8, 5, 200)};
  std::string expected[2];
  for (int v = 0; v < 2; ++v) {
    write_dataset(prefix, versions[v]);
    expected[v] = contents_of(*IndexedDataset::open(prefix));
  }
  const pid_t writer = ::fork();
  ASSERT_GE(writer, 0);
  if (writer == 0) {
    for (int i = 0;; ++i) write_dataset(prefix, versions[i % 2]);
  }
  int opens = 0, wrong = 0;
  std::string first_error;
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  while (std::chrono::steady_clock::now() < end || opens < 50) {
    try {
      const std::string seen = contents_of(*IndexedDataset::open(prefix));
      if (seen != expected[0] && seen != expected[1]) ++wrong;
    } catch (const InvalidArgument& e) {
      if (first_error.empty()) first_error = e.what();
      ++wrong;
    }
    ++opens;
  }
  ::kill(writer, SIGKILL);
  ::waitpid(writer, nullptr, 0);
  EXPECT_EQ(wrong, 0) << "of " << opens << " opens; first: " << first_error;
}

}  // namespace
}  // namespace thdpack
