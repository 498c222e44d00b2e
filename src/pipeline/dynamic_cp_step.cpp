// Dynamic-CP delivery through the pipeline (dynamic_cp_step.hpp), its plan and minimum traffic.

#include "pipeline/dynamic_cp_step.hpp"

#include <algorithm>
#include <memory>
#include <numeric>
#include <string>
#include <unordered_map>

#include "pipeline/pack_segments.hpp"
#include "pipeline/sample_exchange.hpp"
#include "pipeline/segment_wire.hpp"
#include "thdpack/core/errors.hpp"

namespace thdpack {
namespace {

// Where every sample of the batch sits: its position by id and the DP index that read it.
struct BatchIndex {
  std::unordered_map<int64_t, int64_t> position;
  std::vector<int> source;
  std::vector<int64_t> first;  // first position of each DP index's samples

  explicit BatchIndex(const GlobalBatch& batch) {
    position.reserve(batch.ids.size() * 2);
    for (size_t i = 0; i < batch.ids.size(); ++i)
      position.emplace(batch.ids[i], static_cast<int64_t>(i));
    int64_t at = 0;
    for (size_t d = 0; d < batch.samples_per_rank.size(); ++d) {
      first.push_back(at);
      source.insert(source.end(), static_cast<size_t>(batch.samples_per_rank[d]),
                    static_cast<int>(d));
      at += batch.samples_per_rank[d];
    }
  }
};

int dp_cp_index(const Topology& t, const Coordinates& c) {
  return c.dp * t.cp() + c.cp;
}

}  // namespace

namespace detail {

void check_dynamic_cp_pipeline_options(const PipelineOptions& o) {
  auto refuse = [&o](const std::string& what) {
    throw InvalidArgument("scheduler " + o.scheduler + " (dynamic CP) does not support " + what);
  };
  if (o.cp_mode != CpMode::kZigzag) refuse("the contiguous CP mode; use zigzag");
  if (o.tail_align != TailAlign::kNone) refuse("tail alignment (static shapes)");
  if (o.fixed_cu_seqlens_entries > 0) refuse("fixed_cu_seqlens_entries");
  if (o.max_sequences_per_pack > 0) refuse("max_sequences_per_pack");
}

void deliver_dynamic_cp(StepResult& r, Communicator& world, Communicator& tp_group,
                        const PipelineOptions& options, bool reader, StageFields fields,
                        const PackOptions& pack, std::span<const SampleView> local_samples,
                        ExchangeBuffers& buffers) {
  const Topology& t = options.topology;
  const Coordinates me = t.coordinates(world.rank());
  const int dp = t.dp();
  const Plan& plan = r.plan;
  r.cp_groups = cp_groups_of(plan, t, world.rank());
  const int64_t k_count = plan.num_microbatches();
  const BatchIndex index(r.batch);

  // This rank's pack geometry in micro-batch k, as dp_cp index g sees it.
  auto geometry = [&](int64_t k, int g) {
    const CpGroupView group = plan.microbatch(k).group_of(g);
    return pack_geometry(group.ids, r.batch, index.position, pack, group.size, g - group.first_rank,
                         CpMode::kZigzag);
  };
  // A reader serves the ranks of its CP, TP and PP coordinates on every DP index ("column"),
  // so it needs their geometries too; column[k·dp + d] is DP index d's.
  const bool exchanges = reader && (fields.tokens || fields.labels);
  std::vector<PackGeometry> column;
  std::vector<PackGeometry> own;
  if (exchanges) {
    column.reserve(static_cast<size_t>(k_count * dp));
    for (int64_t k = 0; k < k_count; ++k) {
      for (int d = 0; d < dp; ++d) column.push_back(geometry(k, d * t.cp() + me.cp));
    }
  } else {
    for (int64_t k = 0; k < k_count; ++k) own.push_back(geometry(k, dp_cp_index(t, me)));
  }
  auto mine = [&](int64_t k) -> const PackGeometry& {
    return exchanges ? column[static_cast<size_t>(k * dp + me.dp)] : own[static_cast<size_t>(k)];
  };

  auto microbatches = buffers.microbatches->new_step();
  microbatches->reserve(static_cast<size_t>(k_count));
  for (int64_t k = 0; k < k_count; ++k) {
    const MicrobatchCpGroup& g = r.cp_groups[static_cast<size_t>(k)];
    microbatches->push_back(empty_microbatch(mine(k), r.batch, fields, pack, g.local_cp_size,
                                             g.cp_rank, CpMode::kZigzag,
                                             buffers.microbatches->take()));
  }

  // One alltoallv over the world, on every rank (ranks that exchange nothing send and receive 0
  // bytes). Both sides walk the same segments in (micro-batch, segment) order per peer.
  const auto world_size = static_cast<size_t>(world.size());
  std::vector<int64_t> send_counts(world_size, 0), recv_counts(world_size, 0);
  auto peer = [&](int d) {
    return static_cast<size_t>(t.rank_of({.tp = me.tp, .cp = me.cp, .dp = d, .pp = me.pp}));
  };
  const SegmentWire wire(r.batch, fields, pack);
  std::vector<int> targets;  // DP indices this reader sends to, in world-rank order
  if (exchanges) {
    for (int d = 0; d < dp; ++d) {
      if (d != me.dp) targets.push_back(d);
    }
    std::sort(targets.begin(), targets.end(), [&](int a, int b) { return peer(a) < peer(b); });
    for (int d : targets) {
      for (int64_t k = 0; k < k_count; ++k) {
        for (const Segment& s : column[static_cast<size_t>(k * dp + d)].segments) {
          if (s.sample != Segment::kTailRows &&
              index.source[static_cast<size_t>(s.sample)] == me.dp) {
            send_counts[peer(d)] += wire.bytes(s);
          }
        }
      }
    }
    for (int64_t k = 0; k < k_count; ++k) {
      for (const Segment& s : mine(k).segments) {
        const int src = index.source[static_cast<size_t>(s.sample)];
        if (src != me.dp) recv_counts[peer(src)] += wire.bytes(s);
      }
    }
  }
  const int64_t send_total = std::accumulate(send_counts.begin(), send_counts.end(), int64_t{0});
  std::vector<int64_t> recv_offset(world_size, 0);
  std::exclusive_scan(recv_counts.begin(), recv_counts.end(), recv_offset.begin(), int64_t{0});
  const int64_t recv_total = std::accumulate(recv_counts.begin(), recv_counts.end(), int64_t{0});
  const int64_t first_local = exchanges ? index.first[static_cast<size_t>(me.dp)] : 0;
  const LocalSamples local(local_samples, first_local, r.batch.real_lengths, pack);

  const std::span<std::byte> send = buffers.send.get(send_total);
  std::byte* out = send.data();
  for (int d : targets) {
    for (int64_t k = 0; k < k_count; ++k) {
      for (const Segment& s : column[static_cast<size_t>(k * dp + d)].segments) {
        if (s.sample == Segment::kTailRows || index.source[static_cast<size_t>(s.sample)] != me.dp)
          continue;
        wire.write(local, s, out);
        out += wire.bytes(s);
      }
    }
  }
  const std::span<std::byte> recv = buffers.recv.get(recv_total);
  world.alltoallv(send, send_counts, recv, recv_counts);

  if (exchanges) {
    std::vector<int64_t> cursor = recv_offset;
    auto source_of = [&index](int64_t sample) { return index.source[static_cast<size_t>(sample)]; };
    for (int64_t k = 0; k < k_count; ++k) {
      append_rows((*microbatches)[static_cast<size_t>(k)], mine(k).segments, wire, local, me.dp,
                  source_of, peer, recv.data(), cursor);
    }
    for (size_t q = 0; q < world_size; ++q) {
      check<InternalError>(cursor[q] - recv_offset[q] == recv_counts[q],
                           "dynamic CP exchange: consumed ", cursor[q] - recv_offset[q], " of ",
                           recv_counts[q], " bytes received from rank ", q);
    }
  }
  if (options.reading == ReadingMode::kMegatron && (fields.tokens || fields.labels) &&
      tp_group.size() > 1) {
    std::vector<std::span<const Segment>> segments;
    for (int64_t k = 0; k < k_count; ++k) segments.emplace_back(mine(k).segments);
    broadcast_rows(tp_group, wire, segments, buffers.send, *microbatches);
  }
  r.microbatches = std::move(microbatches);
}

int64_t dynamic_cp_minimum_exchange_bytes(const StepResult& r, const PipelineOptions& o) {
  const Topology& t = o.topology;
  const int64_t exchanging_tp = o.reading == ReadingMode::kAllRanks ? t.tp() : 1;
  const BatchIndex index(r.batch);
  int64_t moved_bytes = 0;
  for (int64_t k = 0; k < r.plan.num_microbatches(); ++k) {
    for (const CpGroupView g : r.plan.microbatch(k)) {
      for (int64_t id : g.ids) {
        const auto p = static_cast<size_t>(index.position.at(id));
        for (int i = g.first_rank; i < g.first_rank + g.size; ++i) {
          if (i / t.cp() != index.source[p]) {
            moved_bytes += minimum_moved_bytes(r.batch, p, t) / g.size;
          }
        }
      }
    }
  }
  return moved_bytes * exchanging_tp;
}

}  // namespace detail
}  // namespace thdpack
