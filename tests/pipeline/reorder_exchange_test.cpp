// The reordering exchange on the local-thread communicator: 1, 2, 4 and 6 ranks, windows of 1, 2
// and 3 micro-batches with a short last window, both assignment methods, heterogeneous modules,
// uniform costs, errors and misuse.

#include <gtest/gtest.h>

#include "expect_throw.hpp"
#include "reorder_case.hpp"
#include "thdpack/comm/local_communicator.hpp"
#include "thdpack/core/errors.hpp"
#include "thdpack/multimodal/vl_workload.hpp"
#include "thdpack/pipeline/reorder_exchange.hpp"

namespace thdpack {
namespace {

class ReorderExchangeLocal : public ::testing::TestWithParam<int> {};

TEST_P(ReorderExchangeLocal, EqualsTheSingleProcessReferenceSyncAndOverlapped) {
  const int ranks = GetParam();
  for (int window : {1, 2, 3}) {
    testing::ReorderCase c;
    c.microbatch_size = 4 * ranks;
    c.microbatches = 5;  // windows of 2 and 3 end short
    c.window = window;
    c.seed = static_cast<uint64_t>(window);
    run_local(ranks, [&](Communicator& g) { testing::check_reorder_exchange(g, c); });
  }
}

TEST_P(ReorderExchangeLocal, ReferenceMethodAndSeveralGroupsPerRank) {
  const int ranks = GetParam();
  testing::ReorderCase c;
  c.method = AssignmentMethod::kLongestFirst;
  c.module_dp_sizes = {ranks, 2 * ranks};  // G = 2·dp: two groups per rank
  c.microbatch_size = 6 * ranks;
  c.seed = 7;
  run_local(ranks, [&](Communicator& g) { testing::check_reorder_exchange(g, c); });
}

TEST_P(ReorderExchangeLocal, UniformCostsMoveNothing) {
  run_local(GetParam(),
            [](Communicator& g) { testing::check_reorder_uniform_costs_move_nothing(g); });
}

TEST_P(ReorderExchangeLocal, BadSamplesFailOnEveryRank) {
  run_local(GetParam(), [](Communicator& g) { testing::check_reorder_errors(g); });
}

INSTANTIATE_TEST_SUITE_P(Ranks, ReorderExchangeLocal, ::testing::Values(1, 2, 4, 6));

TEST(ReorderExchangeModules, VisionAndLanguageWithDifferentDpSizesAgree) {
  run_local(6, [](Communicator& w) { testing::check_reorder_heterogeneous_modules(w, 2, 4); });
  run_local(5, [](Communicator& w) { testing::check_reorder_heterogeneous_modules(w, 2, 3); });
  run_local(3, [](Communicator& w) { testing::check_reorder_heterogeneous_modules(w, 1, 2); });
}

TEST(ReorderExchangeOptions, InvalidSettingsAreRejected) {
  run_local(2, [](Communicator& g) {
    ReorderOptions o;
    o.cost.image_token_id = 5;
    o.microbatch_size = 4;
    auto make = [&](const ReorderOptions& options) { ReorderExchange e(g, vl_schema(), options); };
    ReorderOptions bad = o;
    bad.window = 0;
    test_util::expect_throw_with<InvalidArgument>([&] { make(bad); }, "window must be >= 1");
    bad = o;
    bad.max_exchange_bytes = 0;
    test_util::expect_throw_with<InvalidArgument>([&] { make(bad); },
                                                  "max_exchange_bytes must be 1 to 2147483647");
    bad.max_exchange_bytes = int64_t{1} << 31;
    test_util::expect_throw_with<InvalidArgument>([&] { make(bad); }, "got 2147483648");
    bad = o;
    bad.cost.vision_weight = -1;
    test_util::expect_throw_with<InvalidArgument>([&] { make(bad); }, "negative");
    bad = o;
    bad.cost.vision_weight = 0;
    bad.cost.text_weight = 0;
    test_util::expect_throw_with<InvalidArgument>([&] { make(bad); }, "zero");
    bad = o;
    bad.microbatch_size = 5;
    test_util::expect_throw_with<InvalidArgument>([&] { make(bad); }, {"5", "multiple of G"});
    bad = o;
    bad.module_dp_sizes = {3, 4};
    test_util::expect_throw_with<InvalidArgument>([&] { make(bad); }, "do not include 2");
    ReorderExchange e(g, vl_schema(), o);
    test_util::expect_throw_with<InvalidArgument>([&] { e.finish(); }, "without start");
  });
}

}  // namespace
}  // namespace thdpack
