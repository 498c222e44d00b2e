#include "megatron_flow.hpp"

#include <chrono>
#include <cstring>
#include <unordered_map>

#include "thdpack/packing/cp_partition.hpp"

namespace thdpack::bench {
namespace {

CommStats stats_of(const Communicator& world, const ProcessGroups& g) {
  CommStats s = world.stats();
  for (const Communicator* c : {g.tp.get(), g.cp.get(), g.dp.get(), g.pp.get()}) s += c->stats();
  return s;
}

// One alltoallv of a per-row field: every sample's whole rows go to its destination replica.
template <typename T, typename Get>
std::vector<T> exchange_field(Communicator& dp, const std::vector<std::vector<int64_t>>& to_rank,
                              const std::vector<int64_t>& recv_rows, Get get) {
  std::vector<int64_t> send_counts(to_rank.size(), 0), recv_counts(recv_rows.size(), 0);
  std::vector<T> send;
  for (size_t r = 0; r < to_rank.size(); ++r) {
    for (int64_t local : to_rank[r]) {
      const auto& values = get(local);
      send.insert(send.end(), values.begin(), values.end());
      send_counts[r] += static_cast<int64_t>(values.size() * sizeof(T));
    }
    recv_counts[r] = recv_rows[r] * static_cast<int64_t>(sizeof(T));
  }
  int64_t total = 0;
  for (int64_t c : recv_counts) total += c;
  std::vector<T> recv(static_cast<size_t>(total) / sizeof(T));
  dp.alltoallv(std::as_bytes(std::span<const T>(send)), send_counts,
               std::as_writable_bytes(std::span<T>(recv)), recv_counts);
  return recv;
}

template <typename T>
void broadcast_field(Communicator& tp, std::vector<T>& values) {
  tp.broadcast(std::as_writable_bytes(std::span<T>(values)), 0);
}

}  // namespace

FlowStep megatron_style_step(Communicator& world, ProcessGroups& g, const PipelineOptions& o,
                             std::span<const Sample> local) {
  const auto start = std::chrono::steady_clock::now();
  const CommStats before = stats_of(world, g);
  const int64_t dp_bytes_before = g.dp->stats().bytes_sent;
  const Topology& t = o.topology;
  const Coordinates me = t.coordinates(world.rank());
  const bool reader = reads_data(t, ReadingMode::kMegatron, world.rank());
  const bool first = me.pp == 0, last = me.pp == t.pp() - 1;
  const PackOptions pack = pack_options_of(o);

  FlowStep step;
  std::vector<PackedBatch> microbatches;
  std::vector<int32_t> metadata;  // per micro-batch: count, cu_seqlens, cu_seqlens_padded
  if (reader) {
    // Two gathers over DP: counts, then lengths.
    const std::vector<int64_t> counts =
        allgather_value<int64_t>(*g.dp, static_cast<int64_t>(local.size()));
    std::vector<int64_t> mine;
    for (const Sample& s : local) mine.push_back(static_cast<int64_t>(s.input_ids.size()));
    std::vector<int64_t> byte_counts;
    int64_t total = 0;
    for (int64_t c : counts) {
      byte_counts.push_back(c * 8);
      total += c;
    }
    std::vector<int64_t> lengths(static_cast<size_t>(total));
    g.dp->allgatherv(std::as_bytes(std::span<const int64_t>(mine)),
                     std::as_writable_bytes(std::span<int64_t>(lengths)), byte_counts);
    GlobalBatch b;
    b.samples_per_rank = counts;
    int64_t first_mine = 0;
    for (int d = 0; d < me.dp; ++d) first_mine += counts[static_cast<size_t>(d)];
    // Ids are positions here: the flow does not need dataset ids.
    for (int64_t i = 0; i < total; ++i) {
      b.ids.push_back(i);
      b.real_lengths.push_back(lengths[static_cast<size_t>(i)]);
      b.padded_lengths.push_back(round_up(lengths[static_cast<size_t>(i)], pack.divisor));
    }
    const Plan plan = plan_global_batch(b, o);
    step.microbatches = plan.num_microbatches();

    // Whole padded samples, every field.
    std::vector<PackedBatch> rows;
    for (const Sample& s : local) {
      const SampleView v = view_of(s);
      rows.push_back(pack_samples(std::span(&v, 1), PackOptions{.divisor = pack.divisor}));
    }
    std::vector<std::vector<int64_t>> to_rank(static_cast<size_t>(t.dp()));
    std::vector<int64_t> recv_rows(static_cast<size_t>(t.dp()), 0);
    std::vector<int64_t> source(static_cast<size_t>(total));
    for (int d = 0, at = 0; d < t.dp(); ++d) {
      for (int64_t i = 0; i < counts[static_cast<size_t>(d)]; ++i)
        source[static_cast<size_t>(at++)] = d;
    }
    std::vector<std::vector<int64_t>> my_packs;
    for (int64_t k = 0; k < plan.num_microbatches(); ++k) {
      for (int r = 0; r < t.dp(); ++r) {
        for (int64_t id : plan.pack(k, r)) {
          if (source[static_cast<size_t>(id)] == me.dp)
            to_rank[static_cast<size_t>(r)].push_back(id - first_mine);
          if (r == me.dp)
            recv_rows[static_cast<size_t>(source[static_cast<size_t>(id)])] +=
                b.padded_lengths[static_cast<size_t>(id)];
        }
      }
      auto p = plan.pack(k, me.dp);
      my_packs.emplace_back(p.begin(), p.end());
    }
    // One exchange per field, whole samples (every CP rank gets all rows).
    const auto tokens = exchange_field<int64_t>(*g.dp, to_rank, recv_rows,
                                                [&](int64_t i) -> const std::vector<int64_t>& {
                                                  return rows[static_cast<size_t>(i)].tokens;
                                                });
    const auto labels = exchange_field<int64_t>(*g.dp, to_rank, recv_rows,
                                                [&](int64_t i) -> const std::vector<int64_t>& {
                                                  return rows[static_cast<size_t>(i)].labels;
                                                });
    const auto mask = exchange_field<float>(*g.dp, to_rank, recv_rows,
                                            [&](int64_t i) -> const std::vector<float>& {
                                              return rows[static_cast<size_t>(i)].loss_mask;
                                            });
    const auto positions = exchange_field<int64_t>(
        *g.dp, to_rank, recv_rows, [&](int64_t i) -> const std::vector<int64_t>& {
          return rows[static_cast<size_t>(i)].position_ids;
        });
    std::vector<std::vector<int64_t>> real_of(local.size()), padded_of(local.size());
    for (size_t i = 0; i < local.size(); ++i) {
      real_of[i] = {static_cast<int64_t>(local[i].input_ids.size())};
      padded_of[i] = {rows[i].num_rows()};
    }
    std::vector<int64_t> per_sample(static_cast<size_t>(t.dp()), 0);
    for (int64_t k = 0; k < plan.num_microbatches(); ++k) {
      for (int64_t id : plan.pack(k, me.dp))
        ++per_sample[static_cast<size_t>(source[static_cast<size_t>(id)])];
    }
    exchange_field<int64_t>(
        *g.dp, to_rank, per_sample,
        [&](int64_t i) -> const std::vector<int64_t>& { return real_of[static_cast<size_t>(i)]; });
    exchange_field<int64_t>(*g.dp, to_rank, per_sample,
                            [&](int64_t i) -> const std::vector<int64_t>& {
                              return padded_of[static_cast<size_t>(i)];
                            });

    // Pack whole micro-batches from the received rows, then slice for CP.
    std::vector<int64_t> offset(static_cast<size_t>(t.dp()), 0);
    for (int d = 1; d < t.dp(); ++d)
      offset[static_cast<size_t>(d)] =
          offset[static_cast<size_t>(d) - 1] + recv_rows[static_cast<size_t>(d) - 1];
    for (const auto& ids : my_packs) {
      PackedBatch whole;
      whole.cu_seqlens = {0};
      whole.cu_seqlens_padded = {0};
      for (int64_t id : ids) {
        const auto src = static_cast<size_t>(source[static_cast<size_t>(id)]);
        const int64_t n = b.padded_lengths[static_cast<size_t>(id)];
        const auto at = static_cast<std::ptrdiff_t>(offset[src]);
        whole.tokens.insert(whole.tokens.end(), tokens.begin() + at, tokens.begin() + at + n);
        whole.labels.insert(whole.labels.end(), labels.begin() + at, labels.begin() + at + n);
        whole.loss_mask.insert(whole.loss_mask.end(), mask.begin() + at, mask.begin() + at + n);
        whole.position_ids.insert(whole.position_ids.end(), positions.begin() + at,
                                  positions.begin() + at + n);
        offset[src] += n;
        whole.cu_seqlens.push_back(whole.cu_seqlens.back() +
                                   static_cast<int32_t>(b.real_lengths[static_cast<size_t>(id)]));
        whole.cu_seqlens_padded.push_back(whole.cu_seqlens_padded.back() + static_cast<int32_t>(n));
      }
      whole.padding_mask.assign(whole.tokens.size(), 0);
      microbatches.push_back(cp_slice(whole.view(), t.cp(), me.cp, o.cp_mode));
      metadata.push_back(static_cast<int32_t>(whole.cu_seqlens.size()));
      metadata.insert(metadata.end(), whole.cu_seqlens.begin(), whole.cu_seqlens.end());
      metadata.insert(metadata.end(), whole.cu_seqlens_padded.begin(),
                      whole.cu_seqlens_padded.end());
    }
  }

  // TP: the counts, then per micro-batch one broadcast per field and one of metadata.
  if (first || last) {
    std::vector<int64_t> k = {static_cast<int64_t>(microbatches.size())};
    broadcast_field(*g.tp, k);
    microbatches.resize(static_cast<size_t>(k[0]));
    for (PackedBatch& m : microbatches) {
      std::vector<int64_t> sizes = {m.num_rows(), static_cast<int64_t>(m.cu_seqlens.size())};
      broadcast_field(*g.tp, sizes);
      m.tokens.resize(static_cast<size_t>(sizes[0]));
      m.labels.resize(static_cast<size_t>(sizes[0]));
      m.loss_mask.resize(static_cast<size_t>(sizes[0]));
      m.position_ids.resize(static_cast<size_t>(sizes[0]));
      m.cu_seqlens.resize(static_cast<size_t>(sizes[1]));
      broadcast_field(*g.tp, m.tokens);
      broadcast_field(*g.tp, m.labels);
      broadcast_field(*g.tp, m.loss_mask);
      broadcast_field(*g.tp, m.position_ids);
      broadcast_field(*g.tp, m.cu_seqlens);
    }
  }
  // PP: the first stage sends every micro-batch's metadata to the others.
  if (t.pp() > 1) broadcast_vector(*g.pp, metadata, 0);

  const CommStats after = stats_of(world, g);
  step.collectives = after.collectives - before.collectives;
  step.bytes_sent = after.bytes_sent - before.bytes_sent;
  step.exchange_bytes = g.dp->stats().bytes_sent - dp_bytes_before;
  step.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return step;
}

}  // namespace thdpack::bench
