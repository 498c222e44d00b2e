// ordered_parallel_map (src/core/ordered_parallel.hpp): results in order whatever the threads, and
// the error of the lowest failing index, as a sequential loop would meet it.

#include "core/ordered_parallel.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <stdexcept>
#include <string>
#include <thread>

namespace thdpack::detail {
namespace {

TEST(OrderedParallelMap, ResultsComeBackInOrderForAnyThreadCount) {
  for (unsigned threads : {0u, 1u, 2u, 3u, 8u, 64u}) {
    for (size_t n : {size_t{0}, size_t{1}, size_t{5}, size_t{200}}) {
      const std::vector<size_t> out = ordered_parallel_map<size_t>(n, threads, [](size_t i) {
        if (i % 7 == 0) std::this_thread::sleep_for(std::chrono::microseconds(50));
        return i * i;
      });
      ASSERT_EQ(out.size(), n);
      for (size_t i = 0; i < n; ++i) ASSERT_EQ(out[i], i * i) << threads << " threads";
    }
  }
}

TEST(OrderedParallelMap, TheLowestFailingIndexIsTheErrorRethrown) {
  // Later indices fail at once while the first failing one is slow: its error still wins.
  for (unsigned threads : {1u, 2u, 4u}) {
    for (int repeat = 0; repeat < 20; ++repeat) {
      try {
        ordered_parallel_map<int>(50, threads, [](size_t i) -> int {
          if (i == 10) {
            std::this_thread::sleep_for(std::chrono::milliseconds(2));
            throw std::runtime_error("task 10");
          }
          if (i > 10) throw std::runtime_error("task " + std::to_string(i));
          return 0;
        });
        FAIL() << "no error";
      } catch (const std::runtime_error& e) {
        ASSERT_STREQ(e.what(), "task 10") << threads << " threads";
      }
    }
  }
}

TEST(OrderedParallelMap, EveryIndexBeforeTheFailureRuns) {
  std::vector<std::atomic<int>> ran(100);
  EXPECT_THROW(ordered_parallel_map<int>(100, 4,
                                         [&](size_t i) -> int {
                                           ran[i]++;
                                           if (i == 60) throw std::logic_error("60");
                                           return 0;
                                         }),
               std::logic_error);
  for (size_t i = 0; i <= 60; ++i) EXPECT_EQ(ran[i].load(), 1) << i;
  for (size_t i = 61; i < 100; ++i) EXPECT_LE(ran[i].load(), 1) << i;
}

TEST(OrderedParallelMap, ReadingThreadsStayWithinTheCap) {
  EXPECT_GE(reading_threads(), 1u);
  EXPECT_LE(reading_threads(), 8u);
  EXPECT_EQ(reading_threads(1), 1u);
}

}  // namespace
}  // namespace thdpack::detail
