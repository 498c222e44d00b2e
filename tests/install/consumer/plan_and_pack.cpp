// Uses an installed thdpack through its umbrella header: plans one global batch of Megatron's
// sft-8k mock at dp 4 with the balanced scheduler, checks the plan, packs every micro-batch and
// checks the packs. Prints one line; exits non-zero on any failure.

#include <cstdint>
#include <iostream>
#include <vector>

#include "thdpack/core/version.hpp"
#include "thdpack/thdpack.hpp"

int main() {
  using namespace thdpack;
  const Workload w = workload("sft-8k");
  const auto dataset = make_mock_dataset(w.dataset);
  const int dp = 4;
  GlobalBatchOptions gb;
  gb.global_batch = default_global_batch(w, dp);
  gb.dp = dp;
  gb.capacity = w.max_seqlen_per_dp_cp_rank * w.cp;
  const GlobalBatch batch = make_global_batch(*dataset, 0, gb);

  ScheduleInput input{batch.ids, batch.padded_lengths, batch.samples_per_rank, {}};
  ScheduleOptions options;
  options.dp = dp;
  options.cp = w.cp;
  options.max_seqlen_per_dp_cp_rank = w.max_seqlen_per_dp_cp_rank;
  options.cost = CostModel::from_model(model_preset("llama3-8b"));
  const Plan plan = make_scheduler("balanced")->schedule(input, options);
  validate_plan(plan, input, options);

  PackOptions pack_options;
  pack_options.capacity = options.capacity();
  int64_t tokens = 0;
  for (int64_t p = 0; p < plan.num_packs(); ++p) {
    std::vector<Sample> samples;
    for (int64_t id : plan.pack_at(p)) samples.push_back(dataset->sample(id));
    std::vector<SampleView> views;
    for (const Sample& s : samples) views.push_back(view_of(s));
    const PackedBatch packed = pack_samples(views, pack_options);
    check_pack_invariants(packed.view(), pack_options);
    tokens += packed.cu_seqlens.back();
  }
  int64_t expected = 0;
  for (int64_t length : batch.real_lengths) expected += length;
  if (tokens != expected) {
    std::cerr << "packed " << tokens << " tokens, the batch has " << expected << "\n";
    return 1;
  }
  std::cout << "thdpack " << kVersion << ": " << plan.num_microbatches() << " micro-batches x dp "
            << dp << ", " << tokens << " tokens packed, invariants hold\n";
  return 0;
}
