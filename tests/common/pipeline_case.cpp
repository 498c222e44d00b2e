#include "pipeline_case.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "thdpack/data/mock_dataset.hpp"
#include "thdpack/pipeline/step_verification.hpp"

namespace thdpack::testing {

std::string PipelineCase::name() const {
  std::string n = "tp" + std::to_string(tp) + "_pp" + std::to_string(pp) + "_cp" +
                  std::to_string(cp) + "_dp" + std::to_string(dp);
  if (vpp > 1) n += "_vpp" + std::to_string(vpp);
  n += reading == ReadingMode::kMegatron ? "_megatron" : "_allranks";
  if (tail_align != TailAlign::kNone) {
    n += "_tail_" + tail_align_name(tail_align) + std::to_string(tail_multiple) + "_" +
         tail_policy_name(tail_policy);
  }
  if (fixed_cu_seqlens_entries > 0) n += "_cu" + std::to_string(fixed_cu_seqlens_entries);
  if (max_sequences_per_pack > 0) n += "_cap" + std::to_string(max_sequences_per_pack);
  if (tokens_on_last_stage) n += "_mtp";
  if (max_seqlen_per_dp_cp_rank != 512) n += "_m" + std::to_string(max_seqlen_per_dp_cp_rank);
  if (sequence_parallel) n += "_sp";
  if (first_step != 0) n += "_from" + std::to_string(first_step);
  return n + "_" + scheduler;
}

PipelineOptions options_of(const PipelineCase& c) {
  PipelineOptions o;
  o.topology = Topology({.tp = c.tp, .cp = c.cp, .dp = c.dp, .pp = c.pp, .vpp = c.vpp});
  o.max_seqlen_per_dp_cp_rank = c.max_seqlen_per_dp_cp_rank;
  o.sequence_parallel = c.sequence_parallel;
  o.scheduler = c.scheduler;
  o.cost = CostModel{1.0, 1e-3};
  o.reading = c.reading;
  o.oversize = c.oversize;
  o.tail_align = c.tail_align;
  o.tail_multiple = c.tail_multiple;
  o.tail_policy = c.tail_policy;
  o.fixed_cu_seqlens_entries = c.fixed_cu_seqlens_entries;
  o.max_sequences_per_pack = c.max_sequences_per_pack;
  o.tokens_on_last_stage = c.tokens_on_last_stage;
  return o;
}

namespace {

// Mock lengths with a sample in five carrying a loss mask, so masks travel too.
class CaseDataset final : public Dataset {
 public:
  CaseDataset() {
    MockConfig c;
    c.type = LengthDistributionType::kLognormal;
    c.min_seq_len = 1;
    c.max_seq_len = 500;  // fits M = 512 at cp 1
    c.mean_seq_len = 120;
    c.lognormal_sigma = 1.0;
    c.size = 100'000;
    c.seed = 7;
    mock_ = make_mock_dataset(c);
  }
  int64_t size() const override { return mock_->size(); }
  int64_t length(int64_t i) const override { return mock_->length(i); }
  Sample sample(int64_t i) const override {
    Sample s = mock_->sample(i);
    if (i % 5 == 0) {
      s.loss_mask.assign(s.input_ids.size(), 1.0f);
      for (size_t j = 0; j < s.loss_mask.size() / 3; ++j) s.loss_mask[j] = 0.0f;  // a "prompt"
    }
    return s;
  }
  std::string describe() const override { return "pipeline test dataset"; }

 private:
  std::unique_ptr<Dataset> mock_;
};

}  // namespace

const Dataset& case_dataset() {
  static const CaseDataset dataset;
  return dataset;
}

Sample case_sample(int64_t id, int64_t step) {
  Sample s = case_dataset().sample(id);
  if (step % 2 == 0) s.loss_mask.clear();
  return s;
}

std::vector<Sample> local_samples(const PipelineOptions& o, int rank, int64_t step,
                                  int64_t global_batch) {
  if (!reads_data(o.topology, o.reading, rank)) return {};
  const int dp = o.topology.dp();
  const int d = o.topology.coordinates(rank).dp;
  const auto ids = global_batch_indices(step, global_batch, case_dataset().size());
  std::vector<Sample> out;
  const int64_t per = global_batch / dp;
  for (int64_t j = d * per; j < (d + 1) * per; ++j)
    out.push_back(case_sample(ids[static_cast<size_t>(j)], step));
  return out;
}

CaseOutcome run_case(Communicator& world, const PipelineCase& c) {
  const PipelineOptions options = options_of(c);
  Pipeline pipeline(world, options);
  const int64_t global_batch = c.samples_per_replica * c.dp;
  CaseOutcome outcome;
  for (int64_t step = c.first_step; step < c.first_step + c.steps; ++step) {
    const auto local = local_samples(options, world.rank(), step, global_batch);
    const StepResult result = pipeline.run_step(local);
    verify_step(world, options, result, local,
                [step](int64_t id) { return case_sample(id, step); });
    // The step used the wire format case_sample meant it to (see there).
    const bool masked =
        step % 2 == 1 && std::any_of(result.batch.ids.begin(), result.batch.ids.end(),
                                     [](int64_t id) { return id % 5 == 0; });
    if (result.batch.samples_carry_targets != masked) {
      throw std::runtime_error("step " + std::to_string(step) + ": the gather says samples " +
                               (masked ? "carry no" : "carry") + " loss masks");
    }
    ++outcome.steps;
    outcome.microbatches = result.num_microbatches();
    outcome.collectives_max = std::max(outcome.collectives_max, result.traffic.collectives);
  }
  return outcome;
}

std::vector<PipelineCase> layout_matrix() {
  // (tp, pp, cp, dp) from the pipeline issue; the last one needs 16 ranks.
  const int layouts[][4] = {{1, 1, 1, 8}, {2, 1, 1, 4}, {1, 2, 1, 4}, {2, 2, 1, 2}, {1, 1, 2, 4},
                            {2, 1, 2, 2}, {1, 2, 2, 2}, {1, 4, 1, 2}, {2, 4, 1, 1}, {2, 2, 2, 2}};
  std::vector<PipelineCase> out;
  for (const auto& l : layouts) {
    PipelineCase c;
    c.tp = l[0];
    c.pp = l[1];
    c.cp = l[2];
    c.dp = l[3];
    out.push_back(c);
  }
  return out;
}

std::vector<PipelineCase> full_matrix() {
  std::vector<PipelineCase> out;
  for (const PipelineCase& base : layout_matrix()) {
    for (ReadingMode mode : {ReadingMode::kMegatron, ReadingMode::kAllRanks}) {
      for (int vpp : {1, 2}) {
        if (vpp > 1 && base.pp == 1) continue;
        for (const char* scheduler : {"balanced", "dp_balanced", "local"}) {
          PipelineCase c = base;
          c.reading = mode;
          c.vpp = vpp;
          c.scheduler = scheduler;
          out.push_back(c);
        }
      }
    }
  }
  return out;
}

std::vector<PipelineCase> dynamic_cp_matrix() {
  // (tp, pp, cp, dp, vpp, sequence parallel)
  const int layouts[][6] = {{1, 1, 2, 2, 1, 0}, {1, 1, 2, 4, 1, 0}, {2, 1, 4, 2, 1, 1},
                            {1, 2, 2, 2, 1, 0}, {1, 2, 2, 2, 2, 0}, {1, 1, 1, 8, 1, 0}};
  std::vector<PipelineCase> out;
  for (const auto& l : layouts) {
    for (ReadingMode mode : {ReadingMode::kMegatron, ReadingMode::kAllRanks}) {
      for (const char* scheduler : {"default_dynamic_cp", "balanced_dynamic_cp"}) {
        PipelineCase c;
        c.tp = l[0];
        c.pp = l[1];
        c.cp = l[2];
        c.dp = l[3];
        c.vpp = l[4];
        c.sequence_parallel = l[5] != 0;
        c.reading = mode;
        c.scheduler = scheduler;
        c.max_seqlen_per_dp_cp_rank = 128;
        c.steps = 3;
        out.push_back(c);
      }
    }
  }
  return out;
}

}  // namespace thdpack::testing
