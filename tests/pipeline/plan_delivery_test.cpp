// A plan's delivery, single process (rank_microbatches): for every micro-batch of fixed- and
// dynamic-CP plans, the slices of a group's members put back together are exactly the group's
// whole pack, and each rank knows its group.

#include <gtest/gtest.h>

#include <numeric>
#include <random>

#include "thdpack/core/errors.hpp"
#include "thdpack/packing/cp_partition.hpp"
#include "thdpack/pipeline/plan_delivery.hpp"
#include "thdpack/schedule/dynamic_cp.hpp"
#include "thdpack/schedule/scheduler.hpp"

namespace thdpack {
namespace {

Sample mock_sample(int64_t id, int64_t length) {
  Sample s;
  s.id = id;
  for (int64_t j = 0; j < length; ++j) s.input_ids.push_back(id * 100000 + j);
  return s;
}

bool same_pack(const PackedBatch& a, const PackedBatch& b) {
  return a.tokens == b.tokens && a.labels == b.labels && a.loss_mask == b.loss_mask &&
         a.position_ids == b.position_ids && a.padding_mask == b.padding_mask &&
         a.cu_seqlens == b.cu_seqlens && a.cu_seqlens_padded == b.cu_seqlens_padded &&
         a.sample_ids == b.sample_ids && a.max_seqlen == b.max_seqlen;
}

TEST(DynamicCpDelivery, GroupSlicesReassembleToTheGroupPackForBothSchedulers) {
  for (const std::string name : {"default_dynamic_cp", "balanced_dynamic_cp"}) {
    for (uint64_t seed = 0; seed < 6; ++seed) {
      std::mt19937_64 rng(seed);
      ScheduleOptions o;
      o.cost = CostModel::megatron_workload();
      o.dp = 1 << (seed % 3);  // G = 2, 4, 8: 2·dp·cp pads for every group size
      o.cp = 2;
      o.max_seqlen_per_dp_cp_rank = 256;
      const int g = o.ranks();
      int64_t widest = 1;
      while (widest * 2 <= g) widest *= 2;
      std::lognormal_distribution<double> dist(std::log(120.0), 1.0);
      std::vector<int64_t> ids(40), real(40), padded(40);
      PackOptions pack;
      pack.divisor = 2LL * g;
      for (size_t i = 0; i < ids.size(); ++i) {
        ids[i] = static_cast<int64_t>(i) + 7;
        real[i] =
            std::clamp<int64_t>(static_cast<int64_t>(dist(rng)), 1, 256 * widest - pack.divisor);
        padded[i] = round_up(real[i], pack.divisor);
      }
      const Plan plan = make_scheduler(name)->schedule({ids, padded, {}, {}}, o);
      auto sample_of = [&](int64_t id) {
        return mock_sample(id, real[static_cast<size_t>(id - 7)]);
      };
      std::vector<std::vector<RankMicrobatch>> per_rank;
      for (int r = 0; r < g; ++r) per_rank.push_back(rank_microbatches(plan, sample_of, pack, r));
      for (int64_t k = 0; k < plan.num_microbatches(); ++k) {
        for (const CpGroupView group : plan.microbatch(k)) {
          std::vector<Sample> samples;
          std::vector<SampleView> views;
          for (const int64_t id : group.ids) samples.push_back(sample_of(id));
          for (const auto& s : samples) views.push_back(view_of(s));
          const PackedBatch whole = pack_samples(views, pack);
          std::vector<PackedBatchView> slices;
          for (int r = group.first_rank; r < group.first_rank + group.size; ++r) {
            const auto& mine = per_rank[static_cast<size_t>(r)][static_cast<size_t>(k)];
            ASSERT_EQ(mine.local_cp_size, group.size) << name << " seed " << seed;
            ASSERT_EQ(mine.group_first_rank, group.first_rank);
            ASSERT_EQ(mine.pack.num_rows() * group.size, whole.num_rows());
            slices.push_back(mine.pack.view());
          }
          const PackedBatch back =
              group.size > 1
                  ? cp_unslice(slices)
                  : per_rank[static_cast<size_t>(group.first_rank)][static_cast<size_t>(k)].pack;
          ASSERT_TRUE(same_pack(back, whole)) << name << " seed " << seed << " mb " << k;
        }
      }
    }
  }
}

TEST(DynamicCpDelivery, RefusesARankOutsideTheGroupAndADivisorGroupsCannotSlice) {
  ScheduleOptions o;
  o.cost = CostModel::megatron_workload();
  o.dp = 4;
  o.max_seqlen_per_dp_cp_rank = 100;
  const std::vector<int64_t> ids{0}, lengths{400};
  const Plan plan = schedule_default_dynamic_cp(ids, lengths, o);
  auto sample_of = [](int64_t id) { return mock_sample(id, 400); };
  PackOptions pack;
  pack.divisor = 8;
  EXPECT_THROW(rank_microbatches(plan, sample_of, pack, 4), InvalidArgument);
  pack.divisor = 2;
  EXPECT_THROW(rank_microbatches(plan, sample_of, pack, 0), InvalidArgument);
}

}  // namespace
}  // namespace thdpack
