// require_agreement: the one way ranks check that they hold the same options, shapes and digests.

#include <gtest/gtest.h>

#include <mutex>
#include <set>

#include "expect_throw.hpp"
#include "thdpack/comm/agreement.hpp"
#include "thdpack/comm/local_communicator.hpp"
#include "thdpack/core/errors.hpp"

namespace thdpack {
namespace {

using test_util::expect_throw_with;

std::vector<AgreedValue> options(const std::string& scheduler, const std::string& batch) {
  return {{"--scheduler", scheduler}, {"--global-batch", batch}};
}

TEST(Agreement, EqualValuesPass) {
  EXPECT_NO_THROW(require_agreement({options("balanced", "64"), options("balanced", "64")}, ""));
  EXPECT_NO_THROW(require_agreement(std::vector<std::vector<AgreedValue>>{}, ""));
}

TEST(Agreement, TheFirstDifferingRankAndValueAreNamed) {
  const std::string message = expect_throw_with<InvalidArgument>(
      [] {
        require_agreement({options("balanced", "64"), options("balanced", "64"),
                           options("balanced", "128"), options("local", "64")},
                          "who: ", "; hint");
      },
      "ranks disagree");
  EXPECT_EQ(message,
            "who: ranks disagree on --global-batch: rank 0 has '64', rank 2 has '128'; hint");
}

TEST(Agreement, AMissingValueReadsNone) {
  std::vector<AgreedValue> fewer = options("balanced", "64");
  fewer.pop_back();
  expect_throw_with<InvalidArgument>(
      [&] {
        require_agreement({options("balanced", "64"), fewer}, "");
      },
      {"ranks disagree on --global-batch: rank 0 has '64', rank 1 has '(none)'"});
  expect_throw_with<InvalidArgument>(
      [&] {
        require_agreement({fewer, options("balanced", "64")}, "");
      },
      {"ranks disagree on --global-batch: rank 0 has '(none)', rank 1 has '64'"});
}

TEST(Agreement, LongValuesAreCut) {
  const std::string long_value(200, 'x');
  const std::string message = expect_throw_with<InvalidArgument>(
      [&] {
        require_agreement({{{"config", long_value}}, {{"config", "y"}}}, "");
      },
      {std::string(80, 'x') + "\xE2\x80\xA6'"});
  EXPECT_EQ(message.find(std::string(81, 'x')), std::string::npos) << message;
}

TEST(Agreement, OverACommunicatorEveryRankThrowsTheSameError) {
  std::mutex lock;
  std::set<std::string> messages;
  run_local(4, [&](Communicator& c) {
    // Any bytes travel: a separator-like value, an empty one, a newline.
    std::vector<AgreedValue> mine = {{"a:b", "1:2\n3"}, {"", ""}, {"ranked", "x"}};
    if (c.rank() == 3) mine.back().value = "y";
    try {
      require_agreement(c, mine, "test: ");
      ADD_FAILURE() << "rank " << c.rank() << " did not throw";
    } catch (const InvalidArgument& e) {
      const std::lock_guard<std::mutex> hold(lock);
      messages.insert(e.what());
    }
    EXPECT_EQ(c.stats().collectives, 2) << "the sizes, then the texts: one allgather of text";
  });
  ASSERT_EQ(messages.size(), 1u);
  EXPECT_EQ(*messages.begin(), "test: ranks disagree on ranked: rank 0 has 'x', rank 3 has 'y'");
}

TEST(Agreement, OverACommunicatorEqualValuesPassOnEveryRank) {
  run_local(3, [](Communicator& c) {
    EXPECT_NO_THROW(require_agreement(c, options("balanced", "64"), ""));
  });
}

}  // namespace
}  // namespace thdpack
