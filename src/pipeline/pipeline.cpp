#include "thdpack/pipeline/pipeline.hpp"

#include <chrono>
#include <sstream>
#include <unordered_map>

#include "pipeline/global_batch_gather.hpp"
#include "pipeline/pack_segments.hpp"
#include "pipeline/planned_step.hpp"
#include "pipeline/sample_exchange.hpp"
#include "pipeline/segment_wire.hpp"
#include "thdpack/comm/agreement.hpp"
#include "thdpack/comm/process_groups.hpp"
#include "thdpack/core/errors.hpp"

namespace thdpack {
namespace {

// Every rank must have been given the same options; a rank that was not would otherwise diverge
// in its collectives and hang. Collective over `world` (it does not depend on the options).
void check_same_options(Communicator& world, const std::string& described) {
  std::vector<AgreedValue> mine;
  std::istringstream fields(described);
  for (std::string field; fields >> field;) {
    const size_t eq = field.find('=');
    mine.push_back({field.substr(0, eq), eq == std::string::npos ? "" : field.substr(eq + 1)});
  }
  require_agreement(world, mine, "",
                    " (PipelineOptions); every rank must be given the same options, or the ranks "
                    "would enter different collectives");
}

// What dynamic CP does not support (static shapes, the sequence cap, contiguous CP).
void check_dynamic_cp_options(const PipelineOptions& o) {
  auto refuse = [&o](const char* what) {
    fail("scheduler ", o.scheduler, " (dynamic CP) does not support ", what);
  };
  if (o.cp_mode != CpMode::kZigzag) refuse("the contiguous CP mode; use zigzag");
  if (o.tail_align != TailAlign::kNone) refuse("tail alignment (static shapes)");
  if (o.fixed_cu_seqlens_entries > 0) refuse("fixed_cu_seqlens_entries");
  if (o.max_sequences_per_pack > 0) refuse("max_sequences_per_pack");
}

CommStats total_stats(std::initializer_list<const Communicator*> comms) {
  CommStats s;
  for (const Communicator* c : comms) s += c->stats();
  return s;
}

}  // namespace

PackedBatchView MicroBatchIterator::next() {
  if (!has_next()) throw InvalidArgument("micro-batch iterator is exhausted");
  PackedBatchView v = (*batches_)[next_++].view();
  if (!fields_.tokens) v.tokens = v.position_ids = {};
  if (!fields_.labels) {
    v.labels = {};
    v.loss_mask = {};
  }
  return v;
}

std::vector<MicroBatchIterator> StepResult::iterators() const {
  std::vector<MicroBatchIterator> out;
  for (StageFields f : virtual_stages) out.emplace_back(microbatches, f);
  return out;
}

struct Pipeline::State {
  Communicator& world;
  PipelineOptions options;
  Coordinates coords;
  bool reader = false;
  StageFields fields;
  PackOptions pack;
  Communicator* dp = nullptr;
  Communicator* tp = nullptr;
  std::unique_ptr<Communicator> owned_dp;  // set when the pipeline split its own groups
  std::unique_ptr<Communicator> owned_tp;
  detail::ExchangeBuffers buffers;     // kept from step to step (see ScratchBuffer)
  detail::GatherSizing gather_sizing;  // likewise (see GatherSizing)

  State(Communicator& w, PipelineOptions o)
      : world(w),
        options(std::move(o)),
        coords(options.topology.coordinates(w.rank())),
        reader(thdpack::reads_data(options.topology, options.reading, w.rank())),
        fields(stage_fields(options, coords.pp)),
        pack(pack_options_of(options)) {
    // Unknown names and unsupported options fail here, on every rank alike.
    if (uses_dynamic_cp(options)) {
      check_dynamic_cp_options(options);
    } else {
      make_scheduler(options.scheduler);
    }
  }
};

namespace {

// The world checks shared by both constructors; collective over `world`.
void check_world(Communicator& world, const PipelineOptions& options) {
  check_same_options(world, options.describe());
  options.topology.check_world_size(world.size());
}

// `group` must be this rank's group of `kind`, in group order. Collective over `group`.
void check_given_group(Communicator& group, Communicator& world, const Topology& t, GroupKind kind,
                       const char* name) {
  const std::vector<int> want = t.group_ranks(kind, world.rank());
  const std::vector<int> got = allgather_value<int>(group, world.rank());
  if (got != want) {
    std::string text;
    for (int r : got) {
      if (!text.empty()) text += ',';
      text += std::to_string(r);
    }
    fail("the ", name, " group given to the pipeline holds world ranks [", text,
         "] in that order, but ", t.describe(), " puts rank ", world.rank(), " in a different ",
         name, " group; build the groups in this rank order or pass the matching order");
  }
}

}  // namespace

Pipeline::Pipeline(Communicator& world, PipelineOptions options) {
  check_world(world, options);
  state_ = std::make_unique<State>(world, std::move(options));
  state_->owned_dp = make_group(world, state_->options.topology, GroupKind::kDp);
  state_->owned_tp = make_group(world, state_->options.topology, GroupKind::kTp);
  state_->dp = state_->owned_dp.get();
  state_->tp = state_->owned_tp.get();
}

Pipeline::Pipeline(Communicator& world, Communicator& dp_group, Communicator& tp_group,
                   PipelineOptions options) {
  check_world(world, options);
  check_given_group(dp_group, world, options.topology, GroupKind::kDp, "DP");
  check_given_group(tp_group, world, options.topology, GroupKind::kTp, "TP");
  state_ = std::make_unique<State>(world, std::move(options));
  state_->dp = &dp_group;
  state_->tp = &tp_group;
}

Pipeline::~Pipeline() = default;

const PipelineOptions& Pipeline::options() const {
  return state_->options;
}
bool Pipeline::reads_data() const {
  return state_->reader;
}
Coordinates Pipeline::coordinates() const {
  return state_->coords;
}

void Pipeline::fail_step(const std::string& error) {
  detail::fail_global_batch_gather(state_->world, state_->options.topology, error,
                                   state_->gather_sizing);
}

void Pipeline::deliver(StepResult& r, std::span<const SampleView> local_samples) {
  State& s = *state_;
  const Topology& t = s.options.topology;
  r.cp_groups = cp_groups_of(r.plan, t, s.world.rank());
  const bool has_rows = s.fields.tokens || s.fields.labels;
  const bool exchanges = s.reader && has_rows;
  // A reader serves every DP index of its CP coordinate; another rank needs only its own packs.
  const detail::StepGeometry geometry(
      r.batch, r.plan, s.pack, s.coords.cp, s.options.cp_mode,
      exchanges ? detail::StepGeometry::kEveryReplica : s.coords.dp);
  detail::MicrobatchPool& pool = *s.buffers.microbatches;
  auto microbatches = pool.new_step();
  for (int64_t k = 0; k < r.plan.num_microbatches(); ++k) {
    const MicrobatchCpGroup& group = r.cp_groups[static_cast<size_t>(k)];
    microbatches->push_back(detail::empty_microbatch(
        geometry.pack(k, s.coords.dp), r.batch, s.fields, s.pack, group.local_cp_size,
        group.cp_rank, s.options.cp_mode, pool.take()));
  }
  const detail::SegmentWire wire(r.batch, s.fields, s.pack);
  if (exchanges) {
    const detail::LocalSamples local(local_samples, geometry.first_of(s.coords.dp),
                                     r.batch.real_lengths, s.pack);
    detail::exchange_samples(*s.dp, geometry, local, wire, s.buffers, *microbatches);
  }
  if (s.options.reading == ReadingMode::kMegatron && has_rows && s.tp->size() > 1) {
    std::vector<std::span<const detail::Segment>> segments;
    for (int64_t k = 0; k < r.plan.num_microbatches(); ++k)
      segments.emplace_back(geometry.pack(k, s.coords.dp).segments);
    detail::broadcast_rows(*s.tp, wire, segments, s.buffers.send, *microbatches);
  }
  r.microbatches = std::move(microbatches);
}

namespace {

std::vector<SampleView> views_of(std::span<const Sample> samples) {
  std::vector<SampleView> views;
  views.reserve(samples.size());
  for (const Sample& s : samples) views.push_back(view_of(s));
  return views;
}

}  // namespace

StepResult Pipeline::run_step(std::span<const Sample> local_samples,
                              std::span<const int64_t> group_ids) {
  return run(views_of(local_samples), group_ids, nullptr);
}

StepResult Pipeline::run_step(std::span<const SampleView> local_samples,
                              std::span<const int64_t> group_ids) {
  return run(local_samples, group_ids, nullptr);
}

StepResult Pipeline::run_planned_step(std::span<const Sample> local_samples,
                                      const PlannedBatch& planned,
                                      std::span<const int64_t> group_ids) {
  return run(views_of(local_samples), group_ids, &planned);
}

StepResult Pipeline::run_planned_step(std::span<const SampleView> local_samples,
                                      const PlannedBatch& planned,
                                      std::span<const int64_t> group_ids) {
  return run(local_samples, group_ids, &planned);
}

StepResult Pipeline::run(std::span<const SampleView> local_samples,
                         std::span<const int64_t> group_ids, const PlannedBatch* planned) {
  State& s = *state_;
  const auto start = std::chrono::steady_clock::now();
  const CommStats before = total_stats({&s.world, s.dp, s.tp});
  const CommStats dp_before = s.dp->stats();
  const CommStats tp_before = s.tp->stats();
  const Topology& t = s.options.topology;

  StepResult r;
  r.batch =
      detail::gather_global_batch(s.world, s.options, local_samples, group_ids, s.gather_sizing);
  for (size_t i = 0; i < r.batch.ids.size(); ++i)
    r.sums.add(r.batch.real_lengths[i], r.batch.padded_lengths[i]);
  for (int v = 0; v < t.vpp(); ++v)
    r.virtual_stages.push_back(virtual_stage_fields(s.options, s.coords.pp, v));
  r.plan = planned ? detail::agreed_plan(s.world, *planned, r.batch, s.options)
                   : plan_global_batch(r.batch, s.options);
  r.dynamic_cp = uses_dynamic_cp(s.options);
  deliver(r, local_samples);

  const CommStats after = total_stats({&s.world, s.dp, s.tp});
  r.traffic.collectives = after.collectives - before.collectives;
  r.traffic.bytes_sent = after.bytes_sent - before.bytes_sent;
  r.traffic.exchange_bytes = s.dp->stats().bytes_sent - dp_before.bytes_sent;
  r.traffic.broadcast_bytes = s.tp->stats().bytes_sent - tp_before.bytes_sent;
  r.traffic.seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return r;
}

int64_t minimum_exchange_bytes(const StepResult& r, const PipelineOptions& o) {
  const Topology& t = o.topology;
  const int64_t exchanging_tp = o.reading == ReadingMode::kAllRanks ? t.tp() : 1;
  std::vector<int> source(r.batch.ids.size());
  std::unordered_map<int64_t, size_t> position;
  size_t at = 0;
  for (int d = 0; d < t.dp(); ++d) {
    for (int64_t i = 0; i < r.batch.samples_per_rank[static_cast<size_t>(d)]; ++i, ++at) {
      source[at] = d;
      position.emplace(r.batch.ids[at], at);
    }
  }
  // Every member of a sample's CP group that is not on the sample's DP index receives its share,
  // 1/size of the sample.
  int64_t moved_bytes = 0;
  for (int64_t k = 0; k < r.plan.num_microbatches(); ++k) {
    for (const CpGroupView g : r.plan.microbatch(k)) {
      for (int64_t id : g.ids) {
        const size_t p = position.at(id);
        int64_t away = 0;
        for (int i = g.first_rank; i < g.first_rank + g.size; ++i) away += i / t.cp() != source[p];
        moved_bytes += detail::minimum_moved_bytes(r.batch, p, t) * away / g.size;
      }
    }
  }
  return moved_bytes * exchanging_tp;
}

std::vector<MicrobatchCpGroup> cp_groups_of(const Plan& plan, const Topology& topology, int rank) {
  const Coordinates me = topology.coordinates(rank);
  const int index = me.dp * topology.cp() + me.cp;
  std::vector<MicrobatchCpGroup> out;
  out.reserve(static_cast<size_t>(plan.num_microbatches()));
  for (int64_t k = 0; k < plan.num_microbatches(); ++k) {
    const CpGroupView group = plan.microbatch(k).group_of(index);
    MicrobatchCpGroup m;
    m.local_cp_size = group.size;
    m.cp_rank = index - group.first_rank;
    m.first_dp_cp_index = group.first_rank;
    for (int i = group.first_rank; i < group.first_rank + group.size; ++i) {
      m.member_ranks.push_back(topology.rank_of(
          {.tp = me.tp, .cp = i % topology.cp(), .dp = i / topology.cp(), .pp = me.pp}));
    }
    out.push_back(std::move(m));
  }
  return out;
}

}  // namespace thdpack
