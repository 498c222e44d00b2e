// Plans that travel: a plan made by one process (a driver, from the gathered lengths) and sent as
// JSON is delivered by the ranks exactly as the plan they would have made (every field of every
// micro-batch, verified against the single-process reference), for every scheduler, fixed and
// dynamic CP; a plan that does not fit the step is refused on every rank with one line.

#include <gtest/gtest.h>

#include <mutex>
#include <string>
#include <vector>

#include "every_rank_failure.hpp"
#include "pipeline_case.hpp"
#include "thdpack/comm/local_communicator.hpp"
#include "thdpack/core/errors.hpp"
#include "thdpack/pipeline/step_verification.hpp"
#include "thdpack/schedule/plan_file.hpp"

namespace thdpack {
namespace {

using testing::PipelineCase;

PipelineCase case_of(const std::string& scheduler) {
  PipelineCase c;
  c.scheduler = scheduler;
  c.tp = 2;
  c.cp = 2;
  c.dp = 2;
  c.max_seqlen_per_dp_cp_rank = scheduler_layout(scheduler) == CpLayout::kDynamic ? 128 : 512;
  return c;
}

bool same_microbatches(const std::vector<PackedBatch>& a, const std::vector<PackedBatch>& b) {
  if (a.size() != b.size()) return false;
  for (size_t k = 0; k < a.size(); ++k) {
    if (a[k].tokens != b[k].tokens || a[k].labels != b[k].labels ||
        a[k].loss_mask != b[k].loss_mask || a[k].position_ids != b[k].position_ids ||
        a[k].padding_mask != b[k].padding_mask || a[k].cu_seqlens != b[k].cu_seqlens ||
        a[k].cu_seqlens_padded != b[k].cu_seqlens_padded || a[k].sample_ids != b[k].sample_ids ||
        a[k].max_seqlen != b[k].max_seqlen) {
      return false;
    }
  }
  return true;
}

// The driver: rank 0's plan of the step, through JSON, as every rank receives it.
PlannedBatch driver_plan(const StepResult& r, const std::string& scheduler) {
  return planned_batch_from_json(
      planned_batch_json({scheduler, r.batch.ids, r.batch.padded_lengths, r.plan}));
}

TEST(PlannedStep, APlanMadeElsewhereIsDeliveredExactlyAsTheLocalOneForEveryScheduler) {
  for (const std::string& scheduler : scheduler_names()) {
    for (int64_t step = 0; step < 3; ++step) {
      const PipelineCase c = case_of(scheduler);
      SCOPED_TRACE(c.name() + " step " + std::to_string(step));
      run_local(c.world_size(), [&](Communicator& world) {
        const PipelineOptions o = testing::options_of(c);
        Pipeline local(world, o);
        Pipeline worker(world, o);
        const auto samples = testing::local_samples(o, world.rank(), step, 16);
        const StepResult made_here = local.run_step(samples);
        const PlannedBatch planned = driver_plan(made_here, scheduler);
        EXPECT_EQ(planned.plan, made_here.plan);
        const StepResult delivered = worker.run_planned_step(samples, planned);
        EXPECT_EQ(delivered.plan, made_here.plan);
        EXPECT_EQ(delivered.cp_groups, made_here.cp_groups);
        EXPECT_TRUE(same_microbatches(*delivered.microbatches, *made_here.microbatches));
        verify_step(world, o, delivered, samples,
                    [&](int64_t id) { return testing::case_sample(id, step); });
      });
    }
  }
}

// A plan of another scheduler of the same layout is delivered as it is (the job's scheduler does
// not run): dp_balanced's plan on a job configured with balanced.
TEST(PlannedStep, ThePlanNotTheJobsSchedulerDecides) {
  const PipelineCase c = case_of("balanced");
  run_local(c.world_size(), [&](Communicator& world) {
    PipelineOptions megatron = testing::options_of(c);
    megatron.scheduler = "dp_balanced";
    Pipeline planner(world, megatron);
    Pipeline worker(world, testing::options_of(c));
    const auto samples = testing::local_samples(megatron, world.rank(), 1, 16);
    const StepResult theirs = planner.run_step(samples);
    const StepResult delivered =
        worker.run_planned_step(samples, driver_plan(theirs, "dp_balanced"));
    EXPECT_EQ(delivered.plan, theirs.plan);
    EXPECT_TRUE(same_microbatches(*delivered.microbatches, *theirs.microbatches));
  });
}

// Each way a plan can fail to fit the step, refused on every rank before any sample moves.
TEST(PlannedStep, APlanThatDoesNotFitIsRefusedOnEveryRank) {
  const PipelineCase c = case_of("balanced");
  std::mutex mutex;
  PlannedBatch good;
  run_local(c.world_size(), [&](Communicator& world) {
    const PipelineOptions o = testing::options_of(c);
    Pipeline p(world, o);
    const StepResult r = p.run_step(testing::local_samples(o, world.rank(), 0, 16));
    std::lock_guard lock(mutex);
    good = driver_plan(r, "balanced");
  });
  auto refused = [&](const std::string& needle, const std::function<PlannedBatch(int)>& plan_of) {
    SCOPED_TRACE(needle);
    test_util::expect_invalid_argument_on_every_rank(
        c.world_size(), needle, [&](Communicator& world) {
          const PipelineOptions o = testing::options_of(c);
          Pipeline p(world, o);
          p.run_planned_step(testing::local_samples(o, world.rank(), 0, 16), plan_of(world.rank()));
        });
  };
  refused("padded tokens in this step", [&](int) {
    PlannedBatch b = good;
    b.padded_lengths[3] += 8;
    return b;
  });
  refused("the plan's is id", [&](int) {
    PlannedBatch b = good;
    std::swap(b.ids[0], b.ids[1]);
    return b;
  });
  refused("made for", [&](int) {
    PlannedBatch b = good;
    b.ids.pop_back();
    b.padded_lengths.pop_back();
    return b;
  });
  refused("laid out for dp=4 cp=1", [&](int) {
    PlannedBatch b = good;
    b.plan = Plan(4, 1);
    return b;
  });
  refused("(dynamic CP); this job's scheduler balanced runs fixed CP", [&](int) {
    PlannedBatch b = good;
    b.scheduler = "balanced_dynamic_cp";
    return b;
  });
  refused("appears twice", [&](int) {
    PlannedBatch b = good;
    Plan doubled(b.plan.dp(), b.plan.cp());
    const int64_t first = b.plan.microbatch(0)[0].ids[0];
    for (int64_t k = 0; k < b.plan.num_microbatches(); ++k) {
      doubled.begin_microbatch();
      for (CpGroup g : b.plan.microbatch(k).groups()) {
        if (k == 0 && g.first_rank > 0) g.ids[0] = first;  // and its own first id is lost
        doubled.add_group(g);
      }
    }
    b.plan = doubled;
    return b;
  });
  // One rank given another plan: every rank refuses (no rank delivers its own).
  refused("different plans", [&](int rank) {
    PlannedBatch b = good;
    if (rank == 5) {
      Plan reversed(b.plan.dp(), b.plan.cp());
      for (int64_t k = good.plan.num_microbatches() - 1; k >= 0; --k) {
        reversed.begin_microbatch();
        for (const CpGroup& g : good.plan.microbatch(k).groups()) reversed.add_group(g);
      }
      b.plan = reversed;
    }
    return b;
  });
}

}  // namespace
}  // namespace thdpack
