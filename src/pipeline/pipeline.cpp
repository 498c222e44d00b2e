#include "thdpack/pipeline.hpp"

#include <chrono>
#include <sstream>
#include <unordered_map>

#include "pack_segments.hpp"
#include "sample_exchange.hpp"
#include "thdpack/errors.hpp"
#include "thdpack/process_groups.hpp"

namespace thdpack {
namespace {

// The first "key=value" that differs between two describe() texts.
std::string first_difference(const std::string& a, const std::string& b) {
  std::istringstream in_a(a), in_b(b);
  std::string x, y;
  while (in_a >> x) {
    if (!(in_b >> y)) return x + " (missing on the other rank)";
    if (x != y) return y + " instead of " + x;
  }
  return "a trailing option";
}

// Every rank must have been given the same options; a rank that was not would otherwise diverge
// in its collectives and hang. Collective over `world` (it does not depend on the options).
void check_same_options(Communicator& world, const std::string& mine) {
  const std::vector<char> text(mine.begin(), mine.end());
  const std::vector<char> all = allgather_vector<char>(world, text);
  std::vector<int64_t> sizes = allgather_value<int64_t>(world, static_cast<int64_t>(text.size()));
  int64_t at = 0;
  std::string reference;
  for (int r = 0; r < world.size(); ++r) {
    const std::string theirs(all.begin() + at, all.begin() + at + sizes[static_cast<size_t>(r)]);
    at += sizes[static_cast<size_t>(r)];
    if (r == 0) {
      reference = theirs;
    } else if (theirs != reference) {
      throw InvalidArgument("ranks were given different options: rank " + std::to_string(r) +
                            " has " + first_difference(reference, theirs) +
                            " (rank 0: " + reference + ")");
    }
  }
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
  std::unique_ptr<Communicator> dp;
  std::unique_ptr<Communicator> tp;
};

Pipeline::Pipeline(Communicator& world, PipelineOptions options) {
  check_same_options(world, options.describe());
  const Topology& t = options.topology;
  t.check_world_size(world.size());
  auto dp = make_group(world, t, GroupKind::kDp);
  auto tp = make_group(world, t, GroupKind::kTp);
  const Coordinates coords = t.coordinates(world.rank());
  const bool reader = thdpack::reads_data(t, options.reading, world.rank());
  const StageFields fields = stage_fields(t, coords.pp);
  const PackOptions pack = pack_options_of(options);
  make_scheduler(options.scheduler);  // unknown names fail here, on every rank alike
  state_.reset(new State{world, std::move(options), coords, reader, fields, pack, std::move(dp),
                         std::move(tp)});
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

StepResult Pipeline::run_step(std::span<const Sample> local_samples) {
  State& s = *state_;
  const auto start = std::chrono::steady_clock::now();
  const CommStats before = total_stats({&s.world, s.dp.get(), s.tp.get()});
  const CommStats dp_before = s.dp->stats();
  const CommStats tp_before = s.tp->stats();
  const Topology& t = s.options.topology;

  StepResult r;
  r.batch = gather_global_batch(s.world, s.options, local_samples);
  r.plan = plan_global_batch(r.batch, s.options);
  for (size_t i = 0; i < r.batch.ids.size(); ++i)
    r.sums.add(r.batch.real_lengths[i], r.batch.padded_lengths[i]);
  for (int v = 0; v < t.vpp(); ++v)
    r.virtual_stages.push_back(virtual_stage_fields(t, s.coords.pp, v));

  const detail::StepGeometry geometry(r.batch, r.plan, t.cp(), s.coords.cp, s.options.cp_mode);
  auto microbatches = std::make_shared<std::vector<PackedBatch>>();
  for (int64_t k = 0; k < r.plan.num_microbatches(); ++k) {
    microbatches->push_back(detail::empty_microbatch(geometry.pack(k, s.coords.dp), r.batch,
                                                     s.fields, s.pack, t.cp(), s.coords.cp,
                                                     s.options.cp_mode));
  }
  const bool has_rows = s.fields.tokens || s.fields.labels;
  if (s.reader && has_rows) {
    const int64_t first = geometry.first_of(s.coords.dp);
    std::vector<PackedBatch> rows;
    rows.reserve(local_samples.size());
    for (size_t i = 0; i < local_samples.size(); ++i) {
      rows.push_back(detail::sample_rows(
          local_samples[i], r.batch.real_lengths[static_cast<size_t>(first) + i], s.pack));
    }
    detail::exchange_samples(*s.dp, geometry, rows, s.fields, *microbatches);
  }
  if (s.options.reading == ReadingMode::kMegatron && has_rows) {
    detail::broadcast_rows(*s.tp, s.fields, *microbatches);
  }
  r.microbatches = std::move(microbatches);

  const CommStats after = total_stats({&s.world, s.dp.get(), s.tp.get()});
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
  // Tokens for the first stage, labels and loss mask for the last (one stage needs both at pp 1).
  const int64_t bytes_per_row = 8 + 8 + 4;
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
  int64_t moved_rows = 0;
  for (int64_t k = 0; k < r.plan.num_microbatches(); ++k) {
    for (int replica = 0; replica < t.dp(); ++replica) {
      for (int64_t id : r.plan.pack(k, replica)) {
        const size_t p = position.at(id);
        if (source[p] != replica) moved_rows += r.batch.padded_lengths[p];
      }
    }
  }
  return moved_rows * bytes_per_row * exchanging_tp;
}

}  // namespace thdpack
