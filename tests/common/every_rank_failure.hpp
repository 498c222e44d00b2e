#pragma once
// expect_invalid_argument_on_every_rank: runs `body` on `ranks` thread-communicator ranks and
// expects every rank (not just the one whose input is wrong) to throw InvalidArgument whose
// message mentions `needle`: the "all ranks fail together" contract of collective calls.

#include <gtest/gtest.h>

#include <atomic>
#include <functional>
#include <string>

#include "thdpack/comm/local_communicator.hpp"
#include "thdpack/core/errors.hpp"

namespace thdpack::test_util {

inline void expect_invalid_argument_on_every_rank(int ranks, const std::string& needle,
                                                  const std::function<void(Communicator&)>& body) {
  std::atomic<int> errors{0};
  EXPECT_THROW(run_local(ranks,
                         [&](Communicator& world) {
                           try {
                             body(world);
                           } catch (const InvalidArgument& e) {
                             EXPECT_NE(std::string(e.what()).find(needle), std::string::npos)
                                 << e.what();
                             ++errors;
                             throw;
                           }
                         }),
               InvalidArgument);
  EXPECT_EQ(errors.load(), ranks);
}

}  // namespace thdpack::test_util
