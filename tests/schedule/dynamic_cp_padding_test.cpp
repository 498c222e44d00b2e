// Any dp·cp under dynamic CP: the padding divisor is 2·lcm of the CP group sizes a plan may use, so
// every allowed group zigzag-slices every sample; non-power-of-two layouts are padded, not refused.

#include <gtest/gtest.h>

#include "thdpack/packing/packed_batch.hpp"
#include "thdpack/schedule/dynamic_cp.hpp"

namespace thdpack {
namespace {

TEST(DynamicCpPadding, DivisorIsTheLeastThatEveryAllowedGroupSizeSlices) {
  EXPECT_EQ(padding_divisor({.cp = 2, .dynamic_cp = true, .dp = 3}), 24);  // sizes 1, 2, 4, 6
  EXPECT_EQ(padding_divisor({.cp = 1, .dynamic_cp = true, .dp = 12, .min_cp = 3}), 48);
  EXPECT_EQ(padding_divisor({.cp = 4, .dynamic_cp = true, .dp = 4, .min_cp = 2}), 32);
  EXPECT_EQ(
      padding_divisor({.cp = 2, .tp = 2, .sequence_parallel = true, .dynamic_cp = true, .dp = 3}),
      48);
  for (int g = 1; g <= 64; ++g) {
    for (int min_cp = 1; min_cp <= g; ++min_cp) {
      ScheduleOptions o;
      o.cost = CostModel::megatron_workload();
      o.dp = g;
      o.min_cp = min_cp;
      const int64_t d = padding_divisor({.cp = 1, .dynamic_cp = true, .dp = g, .min_cp = min_cp});
      int64_t smallest = 0;  // the least multiple of 2 x every allowed size
      for (int64_t m = 2;; m += 2) {
        bool all = true;
        for (int c = 1; c <= g && all; ++c) all = !allowed_cp_group_size(c, o) || m % (2 * c) == 0;
        if (all) {
          smallest = m;
          break;
        }
      }
      ASSERT_EQ(d, smallest) << "G " << g << " min_cp " << min_cp;
    }
  }
}

}  // namespace
}  // namespace thdpack
