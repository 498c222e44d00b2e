#pragma once
#include "thdpack/core/language.hpp"  // C++20, or one clear error
// The distributed pipeline for one global batch (SPEC §7), over a Communicator.
//
// Per step, every rank of the world calls Pipeline::run_step in the same order:
//   1. Readers hold their DP index's samples (Megatron mode: TP-rank 0 of the first and last PP
//      stage; all-ranks mode: every rank). One allgather of fixed-size headers and one allgatherv
//      over the world give every rank the global list of (id, length) — from the readers with
//      tp = cp = pp = 0 — plus every reader's fingerprint of what it holds. Where tp = cp = pp = 1
//      a pipeline sends headers and lists in one allgather once it knows their size from the last
//      step (while they fit a quarter above the largest list of the last gather).
//   2. Every rank computes the same plan from that list (plans are never sent) and the metadata of
//      its micro-batches (cu_seqlens, cu_seqlens_padded, max_seqlen, padding mask, positions).
//   3. Readers run one alltoallv over their DP group: each sample goes from the DP rank that holds
//      it straight to the CP group the plan gives it, already sliced for that group (each member
//      receives only its rows; with fixed CP the group is a DP replica's cp ranks), with only the
//      fields its PP stage needs (first stage: tokens; last stage: labels and loss mask), all
//      fields of a sample in one buffer with sizes known from the plan. Where no sample of the step
//      carries its own labels or loss mask, a sample's slice travels as its tokens alone and labels
//      and loss mask are derived on arrival. Samples that stay on their DP rank never touch the
//      wire.
//   4. Megatron mode: TP-rank 0 broadcasts all its micro-batches' rows to its TP peers in one
//      broadcast, in the same format as step 3. All-ranks mode: nothing is broadcast.
// Intermediate PP stages (and every TP rank of them) get the same metadata from step 1 without any
// transfer of rows. Collectives per step: at most 4 on any rank, whatever the number of fields or
// micro-batches.
//
// The pieces work on their own: scheduling is core (scheduler.hpp), CP slicing is core
// (cp_partition.hpp), and gather_global_batch / plan_global_batch / reference_microbatches below
// can be called without the rest.

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "thdpack/comm/communicator.hpp"
#include "thdpack/core/dataset.hpp"
#include "thdpack/core/topology.hpp"
#include "thdpack/packing/packed_batch.hpp"
#include "thdpack/schedule/cost_model.hpp"
#include "thdpack/schedule/dynamic_cp.hpp"
#include "thdpack/schedule/global_batch.hpp"
#include "thdpack/schedule/plan_file.hpp"
#include "thdpack/schedule/scheduler.hpp"

namespace thdpack {

/// Who reads data.
enum class ReadingMode {
  kMegatron,  ///< TP-rank 0 of the first and last PP stage reads; TP peers get rows by broadcast
  kAllRanks,  ///< every rank reads the samples of its DP index; nothing is broadcast
};

struct PipelineOptions {
  Topology topology;
  int64_t max_seqlen_per_dp_cp_rank = 0;  ///< M; packs hold up to M·cp tokens
  /// A fixed-CP scheduler (scheduler.hpp) or a dynamic-CP one ("default_dynamic_cp",
  /// "balanced_dynamic_cp", dynamic_cp.hpp). With dynamic CP the dp×cp ranks form one group that
  /// every micro-batch splits into CP groups of their own size (see StepResult::cp_groups);
  /// samples are padded to 2·dp·cp (× tp with sequence parallelism), a sample may hold up to
  /// M·dp·cp tokens, and static shapes, the sequence cap, group ids and the contiguous CP mode are
  /// refused (InvalidArgument).
  std::string scheduler = "balanced";
  /// What a sample costs (fixed-CP schedulers; with an empty `model`, also the compute of the
  /// dynamic-CP cost model).
  CostModel cost;
  /// The dynamic-CP cost model balanced_dynamic_cp minimises is the one `thdpack plan` uses
  /// (CostModel::of_preset_or_coefficients): with a model preset name in `model` (flops.hpp;
  /// `cost` should then be CostModel::from_model of it), training FLOPs at `gpu_tflops` plus the
  /// exposed ring communication over a `cp_link_gbps` link and `cp_step_overhead_us` per ring
  /// step and layer; with no preset, `cost` at `gpu_tflops`, compute only. Fixed-CP schedulers
  /// ignore these four; default_dynamic_cp ignores them too (Megatron's L²/c).
  std::string model;
  double gpu_tflops = kDefaultGpuTflops;
  double cp_link_gbps = kDefaultCpLinkGBps;
  double cp_step_overhead_us = kDefaultCpStepOverheadUs;
  /// Smallest CP group a sample may use under dynamic CP (Megatron's min_cp_size), >= 1.
  int min_cp = 1;
  ReadingMode reading = ReadingMode::kMegatron;
  bool sequence_parallel = false;  ///< padding divisor times tp
  CpMode cp_mode = CpMode::kZigzag;
  OversizePolicy oversize = OversizePolicy::kError;
  int64_t pad_id = 0;
  int64_t ignore_id = -100;
  /// Labels ignore_id wherever the loss mask is 0 (PackOptions::ignore_masked_labels).
  bool ignore_masked_labels = false;
  PadPositions pad_positions = PadPositions::kContinue;
  /// Static shapes (CUDA graphs), as in PackOptions: every pack's rows T aligned to
  /// `tail_multiple` (TailAlign::kMultiple, a multiple of the padding divisor) or to the capacity
  /// M·cp (kCapacity), the tail placed by `tail_policy`; `fixed_cu_seqlens_entries` > 0 gives every
  /// cu_seqlens array exactly that many entries (and caps the sequences a pack may hold).
  TailAlign tail_align = TailAlign::kNone;
  int64_t tail_multiple = 0;
  TailPolicy tail_policy = TailPolicy::kAppendDummySeq;
  int64_t fixed_cu_seqlens_entries = 0;
  /// If > 0, no pack holds more samples (Megatron's thd_max_packed_sequences). The plan also keeps
  /// packs within fixed_cu_seqlens_entries - 1 sequences (- 2 when a dummy sequence may be
  /// appended).
  int64_t max_sequences_per_pack = 0;
  /// Multi-token prediction on the last stage: its last (virtual) stage also gets tokens and
  /// position ids, as Megatron gives them to an MTP stage.
  bool tokens_on_last_stage = false;

  /// Every option as canonical text ("tp=2 cp=1 ... scheduler=balanced ..."): equal texts mean
  /// equal options. Used to check that all ranks were configured alike.
  std::string describe() const;
};

/// Which per-row fields a rank (or virtual stage) holds. Metadata and the padding mask are always
/// there.
struct StageFields {
  bool tokens = false;  ///< tokens and position_ids (first stage)
  bool labels = false;  ///< labels and loss_mask (last stage)
  bool operator==(const StageFields&) const = default;
};

/// Fields of PP rank `pp_rank` (all its virtual stages together).
StageFields stage_fields(const Topology& topology, int pp_rank);
/// Fields of virtual stage `virtual_stage` of PP rank `pp_rank`.
StageFields virtual_stage_fields(const Topology& topology, int pp_rank, int virtual_stage);
/// The same under `options` (tokens_on_last_stage adds tokens to the last stage).
StageFields stage_fields(const PipelineOptions& options, int pp_rank);
StageFields virtual_stage_fields(const PipelineOptions& options, int pp_rank, int virtual_stage);
/// Whether `rank` reads samples in `mode`.
bool reads_data(const Topology& topology, ReadingMode mode, int rank);

/// Whether options.scheduler is a dynamic-CP scheduler.
bool uses_dynamic_cp(const PipelineOptions& options);
/// Padding divisor and pack options implied by the pipeline options.
PackOptions pack_options_of(const PipelineOptions& options);
/// The name of the cap a sample's padded length must fit, as errors state it:
/// "max_seqlen_per_dp_cp_rank x cp" (M·cp) with a fixed-CP scheduler,
/// "max_seqlen_per_dp_cp_rank x dp x cp" (M·dp·cp) with a dynamic-CP one.
std::string capacity_name_of(const PipelineOptions& options);
/// Scheduler options implied by the pipeline options (the sequence cap is the tighter of
/// max_sequences_per_pack and what fixed_cu_seqlens_entries allows). With a dynamic-CP scheduler
/// also min_cp and the CP cost model `thdpack plan` builds from the same preset or coefficients,
/// TFLOP/s, link and overhead (see PipelineOptions::model), so a step's plan equals the plan
/// command's for the same batch.
ScheduleOptions schedule_options_of(const PipelineOptions& options);

/// What one step cost this rank.
struct StepTraffic {
  int64_t collectives = 0;      ///< collectives this rank called during the step
  int64_t bytes_sent = 0;       ///< all bytes this rank sent to other ranks
  int64_t exchange_bytes = 0;   ///< of which the sample exchange (alltoallv)
  int64_t broadcast_bytes = 0;  ///< of which the TP broadcast
  double seconds = 0;           ///< wall time of run_step on this rank
};

/// Iterates one virtual stage's view of this rank's micro-batches: fields the stage does not need
/// are empty spans.
class MicroBatchIterator {
 public:
  MicroBatchIterator(std::shared_ptr<const std::vector<PackedBatch>> batches, StageFields fields)
      : batches_(std::move(batches)), fields_(fields) {}
  bool has_next() const { return next_ < batches_->size(); }
  /// The next micro-batch; throws InvalidArgument past the end.
  PackedBatchView next();
  size_t size() const { return batches_->size(); }
  StageFields fields() const { return fields_; }

 private:
  std::shared_ptr<const std::vector<PackedBatch>> batches_;
  StageFields fields_;
  size_t next_ = 0;
};

/// This rank's CP group in one micro-batch.
struct MicrobatchCpGroup {
  int local_cp_size = 1;  ///< the group's size: the CP size attention runs with
  int cp_rank = 0;        ///< this rank's position in the group (its zigzag chunk pair)
  /// The group's members as global ranks of the world, in group order (all with this rank's tp
  /// and pp coordinates). With fixed CP: this rank's CP group.
  std::vector<int> member_ranks;
  /// The members' positions in the dp×cp group (dp_cp index = dp·cp + cp coordinate, the order of
  /// Megatron's data-parallel-with-context-parallel group); consecutive.
  int first_dp_cp_index = 0;
  bool operator==(const MicrobatchCpGroup&) const = default;
};

/// This rank's share of one global batch.
struct StepResult {
  /// The global list every rank agreed on (ids, real and padded lengths, samples per DP rank).
  GlobalBatch batch;
  /// The plan every rank computed (plan.hpp): with a fixed-CP scheduler dp groups of size cp per
  /// micro-batch, with a dynamic-CP one groups of their own sizes over the dp×cp indices.
  Plan plan;
  /// Whether a dynamic-CP scheduler made the plan (samples padded to 2·dp·cp).
  bool dynamic_cp = false;
  /// One per micro-batch: this rank's CP group. Each micro-batch's PackedBatch holds this rank's
  /// zigzag slice over that group (cp_size = local_cp_size, cp_rank) of the group's samples, with
  /// the group's global cu_seqlens; every member of a group holds the same metadata.
  std::vector<MicrobatchCpGroup> cp_groups;
  /// This rank's micro-batches in order (K of them), with the fields of its PP stage.
  std::shared_ptr<const std::vector<PackedBatch>> microbatches;
  /// Σ L and Σ L² of the global batch, real and padded (identical on every rank).
  LengthSums sums;
  StepTraffic traffic;
  /// Fields of each of this rank's virtual stages (vpp entries).
  std::vector<StageFields> virtual_stages;

  int64_t num_microbatches() const { return plan.num_microbatches(); }
  /// One iterator per virtual stage of this rank (vpp of them).
  std::vector<MicroBatchIterator> iterators() const;
};

class Pipeline {
 public:
  /// Collective over `world`. Throws InvalidArgument (on every rank) when world.size() is not
  /// tp·cp·dp·pp or when ranks were given different options (naming the first differing rank and
  /// the options), and CommError when a collective fails.
  Pipeline(Communicator& world, PipelineOptions options);
  /// With the DP and TP groups the caller already has (e.g. torch.distributed process groups, which
  /// cannot be split from an arbitrary group): `dp_group` must hold exactly this rank's DP peers
  /// ordered by DP coordinate, `tp_group` its TP peers ordered by TP coordinate; checked with one
  /// allgather on each (InvalidArgument on every member otherwise). The communicators must
  /// outlive the pipeline.
  Pipeline(Communicator& world, Communicator& dp_group, Communicator& tp_group,
           PipelineOptions options);
  ~Pipeline();
  Pipeline(const Pipeline&) = delete;
  Pipeline& operator=(const Pipeline&) = delete;

  /// Collective over the world. `local_samples`: on a reader, the samples of its DP index for this
  /// step in local order (readers of one DP index must hold the same ones); elsewhere empty.
  /// `group_ids`: empty, or one id >= 0 per local sample; samples with the same id are kept in one
  /// micro-batch (GRPO groups, preference pairs; schedulers "balanced" and "local").
  /// Throws InvalidArgument on every rank when readers disagree, a non-reader was given samples, a
  /// sample is too long (under OversizePolicy::kError) or too few samples were given to schedule.
  StepResult run_step(std::span<const Sample> local_samples,
                      std::span<const int64_t> group_ids = {});
  /// The same with borrowed samples: their arrays are read in place, not copied, and must stay
  /// valid and unchanged until the call returns. The result owns all its data.
  StepResult run_step(std::span<const SampleView> local_samples,
                      std::span<const int64_t> group_ids = {});

  /// The same, delivering `planned` (a plan made elsewhere, for instance by a driver process from
  /// the lengths: plan_file.hpp) instead of planning: the scheduler is not run, and the result's
  /// plan is planned.plan. Every rank must be given the same planned batch. Before any sample
  /// moves, every rank checks it against the gathered step (check_planned_batch) and the ranks
  /// compare digests in one more allreduce; a plan that does not fit, or different plans on
  /// different ranks, throw InvalidArgument on every rank.
  StepResult run_planned_step(std::span<const Sample> local_samples, const PlannedBatch& planned,
                              std::span<const int64_t> group_ids = {});
  StepResult run_planned_step(std::span<const SampleView> local_samples,
                              const PlannedBatch& planned, std::span<const int64_t> group_ids = {});

  /// Collective: this rank's part in a step whose samples it could not prepare (a malformed
  /// sample, a failed read), called instead of run_step. The peers, inside run_step, learn it from
  /// the first gather and throw InvalidArgument naming this rank; this rank throws
  /// InvalidArgument(error). So a local failure reaches every rank instead of leaving the peers
  /// waiting in a collective until their communicator times out.
  [[noreturn]] void fail_step(const std::string& error);

  const PipelineOptions& options() const;
  bool reads_data() const;
  /// This rank's coordinates in the topology.
  Coordinates coordinates() const;

 private:
  struct State;
  /// One step: gather, then `planned`'s plan (checked) or the scheduler's, then delivery.
  StepResult run(std::span<const SampleView> local_samples, std::span<const int64_t> group_ids,
                 const PlannedBatch* planned);
  /// Steps 3-4 of result.plan, for any scheduler: the exchange over the DP group, then (Megatron
  /// mode) the TP broadcast.
  void deliver(StepResult& result, std::span<const SampleView> local_samples);
  std::unique_ptr<State> state_;
};

/// Gathers the global list (step 1 above) over `world` without the rest of the pipeline.
/// Collective over `world`; same errors as Pipeline::run_step.
GlobalBatch gather_global_batch(Communicator& world, const PipelineOptions& options,
                                std::span<const Sample> local_samples,
                                std::span<const int64_t> group_ids = {});
/// The same with borrowed samples (only their ids and lengths are read).
GlobalBatch gather_global_batch(Communicator& world, const PipelineOptions& options,
                                std::span<const SampleView> local_samples,
                                std::span<const int64_t> group_ids = {});

/// This rank's part of gather_global_batch when it could not prepare its samples: the peers throw
/// InvalidArgument naming this rank; this rank throws InvalidArgument(error). Collective.
[[noreturn]] void fail_global_batch_gather(Communicator& world, const std::string& error);

/// The plan every rank computes for a gathered batch, with any scheduler. With a dynamic-CP one,
/// throws InvalidArgument when the batch has group ids, when the scheduler refuses, or when a
/// group's size does not divide the padding (2·dp·cp not a multiple of 2·size).
Plan plan_global_batch(const GlobalBatch& batch, const PipelineOptions& options);

/// Throws InvalidArgument, in one line, when `planned` cannot be delivered as `batch` under
/// `options`: its layout is not the job's dp and cp; its ids or padded lengths are not the batch's
/// (same order); it breaks a contract of the options' scheduler layout (fixed CP: validate_plan
/// under schedule_options_of; dynamic CP: check_dynamic_cp_plan); or a group cannot slice the
/// padding. No communication.
void check_planned_batch(const PlannedBatch& planned, const GlobalBatch& batch,
                         const PipelineOptions& options);

/// Bytes the sample exchange must move at least, summed over ranks: the rows of every sample whose
/// DP replica changes, once, sliced for CP, in the fields each stage needs, for each rank that
/// exchanges (TP rank 0 in Megatron mode, every TP rank in all-ranks mode). Where some sample of
/// the batch carries its own labels or loss mask (GlobalBatch::samples_carry_targets), its padded
/// rows: tokens 8 B for the first stage, labels and loss mask 12 B for the last. Where none does,
/// 8 B per token: its real tokens for the first stage, and for the last the real - 1 that are its
/// labels (labels and loss mask follow from them; one stage needs all real tokens at pp = 1).
int64_t minimum_exchange_bytes(const StepResult& result, const PipelineOptions& options);

/// The micro-batches `rank` must end with, computed in one process: for every micro-batch of
/// `plan` (fixed or dynamic CP), the whole pack of the rank's CP group built from the samples
/// (sample_of(id) returns the sample with that id, truncated here to the batch's real length),
/// sliced for its position in the group, restricted to its stage's fields (rank_microbatches in
/// plan_delivery.hpp). The reference the distributed result is checked against.
std::vector<PackedBatch> reference_microbatches(const GlobalBatch& batch, const Plan& plan,
                                                const std::function<Sample(int64_t)>& sample_of,
                                                const PipelineOptions& options, int rank);

/// This rank's CP group in every micro-batch of `plan` (StepResult::cp_groups).
std::vector<MicrobatchCpGroup> cp_groups_of(const Plan& plan, const Topology& topology, int rank);

}  // namespace thdpack
