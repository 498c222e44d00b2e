#include <gtest/gtest.h>

#include "thdpack/scheduler.hpp"

TEST(Registry, KnowsTheThreeSchedulers) {
  EXPECT_EQ(thdpack::scheduler_names(), (std::vector<std::string>{"balanced", "dp_balanced", "local"}));
}
