// MicrobatchPool: a released step's arrays come back emptied with their memory, at most two steps'
// worth are kept, and a step does not keep its pool alive.

#include <gtest/gtest.h>

#include "pipeline/microbatch_pool.hpp"

namespace thdpack::detail {
namespace {

TEST(MicrobatchPool, AReleasedStepsArraysComeBackEmptyWithTheirMemory) {
  auto pool = std::make_shared<MicrobatchPool>();
  const int64_t* tokens = nullptr;
  {
    auto step = pool->new_step();
    PackedBatch m = pool->take();
    m.tokens.assign(1000, 7);
    m.cu_seqlens = {0, 1000};
    m.max_seqlen = 1000;
    tokens = m.tokens.data();
    step->push_back(std::move(m));
  }
  const PackedBatch again = pool->take();
  EXPECT_TRUE(again.tokens.empty());
  EXPECT_TRUE(again.cu_seqlens.empty());
  EXPECT_EQ(again.max_seqlen, 0);
  EXPECT_EQ(again.tokens.data(), tokens);
  EXPECT_GE(again.tokens.capacity(), 1000u);
  EXPECT_EQ(pool->take().tokens.capacity(), 0u) << "one micro-batch was released";
}

TEST(MicrobatchPool, KeepsAtMostTwoStepsWorth) {
  auto pool = std::make_shared<MicrobatchPool>();
  auto release = [&](size_t count) {
    auto step = pool->new_step();
    for (size_t i = 0; i < count; ++i) {
      PackedBatch m;
      m.labels.resize(16);
      step->push_back(std::move(m));
    }
  };
  release(10);
  release(2);  // 10 kept already: more than two steps of 2
  size_t reused = 0;
  while (pool->take().labels.capacity() > 0) ++reused;
  EXPECT_EQ(reused, 10u);
}

// A step does not keep its pool (and the pipeline's kept memory) alive; released after the pool
// is gone, it is freed as usual (ASan and valgrind builds check that memory).
TEST(MicrobatchPool, AStepDoesNotKeepItsPoolAlive) {
  auto pool = std::make_shared<MicrobatchPool>();
  const std::weak_ptr<MicrobatchPool> watch = pool;
  auto step = pool->new_step();
  step->push_back(pool->take());
  step->back().position_ids.resize(64);
  pool.reset();
  EXPECT_TRUE(watch.expired());
  step.reset();
}

}  // namespace
}  // namespace thdpack::detail
