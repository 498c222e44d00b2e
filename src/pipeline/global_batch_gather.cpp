// Step 1 of the pipeline: every rank learns the global list of (id, length) and checks that the
// readers agree. All decisions here are made from gathered data, so every rank reaches the same
// verdict and errors surface on every rank instead of leaving some ranks waiting.

#include "pipeline/global_batch_gather.hpp"

#include <algorithm>
#include <cstring>
#include <string>

#include "pipeline/planned_step.hpp"
#include "thdpack/core/errors.hpp"
#include "thdpack/core/hash64.hpp"
#include "thdpack/packing/packed_batch.hpp"
#include "thdpack/pipeline/pipeline.hpp"

namespace thdpack {
namespace {

using detail::GatherSizing;

// What every rank says about its local samples.
struct ReaderHeader {
  int64_t count = 0;
  uint64_t samples_fingerprint = 0;  ///< of the ids and lengths
  int64_t failed = 0;     ///< 1: the rank could not prepare its samples (fail_global_batch_gather)
  int64_t group_ids = 0;  ///< group ids given (0: none, or as many as samples)
  uint64_t group_ids_fingerprint = 0;  ///< of the group ids part (-1 where none are given)
  int64_t carries_targets = 0;         ///< 1: some local sample has its own labels or loss mask
};

// Every rank throws alike when some rank could not prepare its samples.
void check_no_rank_failed(std::span<const ReaderHeader> headers) {
  for (size_t r = 0; r < headers.size(); ++r) {
    check(headers[r].failed == 0, "rank ", r,
          " could not prepare its samples for this step (its own error says "
          "why); every rank stops this step");
  }
}

// The digest of the ids, lengths and group ids.
uint64_t fingerprint(std::span<const int64_t> payload) {
  return Hash64().add_all(payload).digest();
}

std::string where(const Topology& t, int rank) {
  const Coordinates c = t.coordinates(rank);
  return message("rank ", rank, " (tp ", c.tp, ", cp ", c.cp, ", dp ", c.dp, ", pp ", c.pp, ")");
}

// Every rank's header, and its list where it fits the block (see GatherSizing).
struct GatheredBlocks {
  std::vector<ReaderHeader> headers;
  std::vector<std::byte> blocks;  ///< world.size() blocks of sizeof(ReaderHeader) + width bytes
  int64_t width = 0;              ///< 0: headers only

  int64_t block_bytes() const { return static_cast<int64_t>(sizeof(ReaderHeader)) + width; }
};

// One collective: `mine` from every rank, each followed by up to `width` bytes of `list` (all of
// it when it fits, else none).
GatheredBlocks gather_blocks(Communicator& world, const ReaderHeader& mine,
                             std::span<const std::byte> list, int64_t width) {
  GatheredBlocks g;
  g.width = width;
  if (width == 0) {
    g.headers = allgather_value(world, mine);
    return g;
  }
  std::vector<std::byte> block(static_cast<size_t>(g.block_bytes()), std::byte{0});
  std::memcpy(block.data(), &mine, sizeof(ReaderHeader));
  if (static_cast<int64_t>(list.size()) <= width) {
    std::memcpy(block.data() + sizeof(ReaderHeader), list.data(), list.size());
  }
  g.blocks.resize(static_cast<size_t>(g.block_bytes() * world.size()));
  const std::vector<int64_t> counts(static_cast<size_t>(world.size()), g.block_bytes());
  world.allgatherv(block, g.blocks, counts);
  g.headers.resize(static_cast<size_t>(world.size()));
  for (int r = 0; r < world.size(); ++r) {
    std::memcpy(&g.headers[static_cast<size_t>(r)],
                g.blocks.data() + static_cast<size_t>(r) * static_cast<size_t>(g.block_bytes()),
                sizeof(ReaderHeader));
  }
  return g;
}

// The reader that supplies DP index d's list (tp = cp = pp = 0: a reader in every mode).
int source_of(const Topology& t, int d) {
  return t.rank_of({.tp = 0, .cp = 0, .dp = d, .pp = 0});
}

// Bytes of every world rank's list, from the gathered headers: ids, lengths and group ids of each
// DP index's reader, nothing from the other ranks.
std::vector<int64_t> list_bytes(const Topology& t, std::span<const ReaderHeader> headers) {
  std::vector<int64_t> bytes(headers.size(), 0);
  for (int d = 0; d < t.dp(); ++d) {
    const auto r = static_cast<size_t>(source_of(t, d));
    bytes[r] = 3 * headers[r].count * static_cast<int64_t>(sizeof(int64_t));
  }
  return bytes;
}

// The next gather's width (see GatherSizing), from the lists gathered alone: every rank, the
// failing one included, sets the same value after every gather, so the next collective has one
// shape.
void size_next_gather(GatherSizing& sizing, const Topology& t, std::span<const int64_t> bytes) {
  const int64_t largest = *std::max_element(bytes.begin(), bytes.end());  // one per rank
  const bool every_rank_reads = t.tp() == 1 && t.cp() == 1 && t.pp() == 1;
  sizing.width = every_rank_reads ? round_up(largest + largest / 4, 8) : 0;
}

}  // namespace

namespace detail {

void fail_global_batch_gather(Communicator& world, const Topology& topology,
                              const std::string& error, GatherSizing& sizing) {
  ReaderHeader mine;
  mine.failed = 1;
  // The peers learn of the failure from this header, in the collective they are waiting in.
  const GatheredBlocks blocks = gather_blocks(world, mine, {}, sizing.width);
  size_next_gather(sizing, topology, list_bytes(topology, blocks.headers));
  throw InvalidArgument(error);
}

}  // namespace detail

void fail_global_batch_gather(Communicator& world, const std::string& error) {
  ReaderHeader mine;
  mine.failed = 1;
  (void)gather_blocks(world, mine, {}, 0);  // a gather without GatherSizing: two collectives
  throw InvalidArgument(error);
}

GlobalBatch gather_global_batch(Communicator& world, const PipelineOptions& o,
                                std::span<const Sample> local, std::span<const int64_t> group_ids) {
  std::vector<SampleView> views;
  views.reserve(local.size());
  for (const Sample& s : local) views.push_back(view_of(s));
  return gather_global_batch(world, o, std::span<const SampleView>(views), group_ids);
}

GlobalBatch gather_global_batch(Communicator& world, const PipelineOptions& o,
                                std::span<const SampleView> local,
                                std::span<const int64_t> group_ids) {
  GatherSizing sizing;
  return detail::gather_global_batch(world, o, local, group_ids, sizing);
}

namespace {

// This rank's list for the gather, into `payload`: ids, then lengths, then group ids (-1: none),
// and its header. Bad group ids are reported once gathered, so that every rank raises the same
// error.
ReaderHeader local_list(std::span<const SampleView> local, std::span<const int64_t> group_ids,
                        std::vector<int64_t>& payload) {
  const bool with_groups = group_ids.size() == local.size();
  payload.assign(3 * local.size(), -1);
  bool carries_targets = false;  // some sample has its own labels or loss mask
  for (size_t i = 0; i < local.size(); ++i) {
    payload[i] = local[i].id;
    payload[local.size() + i] = static_cast<int64_t>(local[i].input_ids.size());
    if (with_groups) payload[2 * local.size() + i] = group_ids[i];
    carries_targets = carries_targets || !local[i].labels.empty() || !local[i].loss_mask.empty();
  }
  const auto n = static_cast<int64_t>(local.size());
  const std::span<const int64_t> parts(payload);
  return ReaderHeader{n,
                      fingerprint(parts.first(2 * local.size())),
                      0,
                      static_cast<int64_t>(group_ids.size()),
                      fingerprint(parts.subspan(2 * local.size())),
                      carries_targets ? 1 : 0};
}

// Every rank's list, in rank order: from the gathered blocks when every list fit in them, else by
// an allgatherv of the lists (`mine` is empty on ranks that are not their DP index's source).
std::vector<int64_t> all_lists(Communicator& world, const GatheredBlocks& blocks,
                               const std::vector<int64_t>& counts, bool fits,
                               std::span<const std::byte> mine) {
  int64_t total_bytes = 0;
  for (int64_t c : counts) total_bytes += c;
  std::vector<int64_t> gathered(static_cast<size_t>(total_bytes) / sizeof(int64_t));
  const std::span<std::byte> into = std::as_writable_bytes(std::span<int64_t>(gathered));
  if (fits) {
    size_t at = 0;
    for (int r = 0; r < world.size(); ++r) {
      const auto bytes = static_cast<size_t>(counts[static_cast<size_t>(r)]);
      const std::byte* block =
          blocks.blocks.data() + static_cast<size_t>(r) * static_cast<size_t>(blocks.block_bytes());
      std::memcpy(into.data() + at, block + sizeof(ReaderHeader), bytes);
      at += bytes;
    }
  } else {
    world.allgatherv(mine, into, counts);
  }
  return gathered;
}

// Every rank checks every rank's header against the sources, identically.
void check_headers_against_sources(const Topology& t, ReadingMode reading,
                                   const std::vector<ReaderHeader>& headers) {
  for (int r = 0; r < static_cast<int>(headers.size()); ++r) {
    const ReaderHeader& h = headers[static_cast<size_t>(r)];
    if (h.group_ids != 0 && h.group_ids != h.count) {
      fail(where(t, r), " gave ", h.group_ids, " group ids for ", h.count,
           " samples; give one per sample or none");
    }
    if (!reads_data(t, reading, r)) {
      if (h.count != 0) {
        fail(where(t, r), " does not read data in this reading mode but was given ", h.count,
             " samples; pass samples only on reader ranks (see reads_data)");
      }
      continue;
    }
    const ReaderHeader& s = headers[static_cast<size_t>(source_of(t, t.coordinates(r).dp))];
    if (h.count != s.count || h.samples_fingerprint != s.samples_fingerprint) {
      fail(where(t, r), " holds ", h.count, " samples that differ from those of ",
           where(t, source_of(t, t.coordinates(r).dp)), " (", s.count,
           " samples): all readers of one DP index must hold the same samples");
    }
    if (h.group_ids_fingerprint != s.group_ids_fingerprint) {
      fail(where(t, r), " holds the same samples as ", where(t, source_of(t, t.coordinates(r).dp)),
           " but their group ids differ: all readers of one DP index must give "
           "the same group ids");
    }
  }
}

// The global batch from every rank's list: each DP index's samples from its source rank, lengths
// within capacity (or truncated, as options say), group ids checked and made unique.
GlobalBatch batch_of(const Topology& t, const PipelineOptions& o,
                     const std::vector<ReaderHeader>& headers, const std::vector<int64_t>& counts,
                     const std::vector<int64_t>& gathered) {
  const PackOptions pack = pack_options_of(o);
  const std::string cap_name = capacity_name_of(o);
  GlobalBatch b;
  b.samples_carry_targets = std::any_of(
      headers.begin(), headers.end(), [](const ReaderHeader& h) { return h.carries_targets != 0; });
  std::vector<int64_t> rank_offset(headers.size(), 0);
  int64_t at = 0;
  for (size_t r = 0; r < headers.size(); ++r) {
    rank_offset[r] = at;
    at += counts[r] / static_cast<int64_t>(sizeof(int64_t));
  }
  bool grouped = false;
  for (int d = 0; d < t.dp(); ++d) {
    const int src = source_of(t, d);
    const int64_t count = headers[static_cast<size_t>(src)].count;
    const auto base = static_cast<size_t>(rank_offset[static_cast<size_t>(src)]);
    b.samples_per_rank.push_back(count);
    for (int64_t i = 0; i < count; ++i) {
      const int64_t group = gathered[base + static_cast<size_t>(2 * count + i)];
      grouped = grouped || group != -1;
      check(group >= -1, "sample ", gathered[base + static_cast<size_t>(i)], " (DP rank ", d,
            ") has group id ", group, "; group ids must be >= 0");
      b.group_ids.push_back(group);
    }
    for (int64_t i = 0; i < count; ++i) {
      const int64_t id = gathered[base + static_cast<size_t>(i)];
      int64_t real = gathered[base + static_cast<size_t>(count + i)];
      check(real >= 1, "sample ", id, " (DP rank ", d, ") has no tokens");
      const int64_t kept =
          length_within_capacity(id, real, pack.divisor, pack.capacity, o.oversize, cap_name);
      if (kept != real) ++b.truncated;
      real = kept;
      b.ids.push_back(id);
      b.real_lengths.push_back(real);
      b.padded_lengths.push_back(round_up(real, pack.divisor));
    }
  }
  if (!grouped) {
    b.group_ids.clear();
  } else {
    for (size_t i = 0; i < b.group_ids.size(); ++i) {
      if (b.group_ids[i] == -1) b.group_ids[i] = -1 - static_cast<int64_t>(i);
    }
  }
  return b;
}

}  // namespace

GlobalBatch detail::gather_global_batch(Communicator& world, const PipelineOptions& o,
                                        std::span<const SampleView> local,
                                        std::span<const int64_t> group_ids, GatherSizing& sizing) {
  const Topology& t = o.topology;
  t.check_world_size(world.size());
  const bool is_source = source_of(t, t.coordinates(world.rank()).dp) == world.rank();

  // A sample packing would refuse (empty, or loss_mask/labels of another length) is caught here,
  // before the first collective, so that every rank stops at this step instead of the peers
  // waiting in the sample exchange for a rank that threw.
  try {
    for (const SampleView& s : local) validate_sample(s);
  } catch (const InvalidArgument& e) {
    detail::fail_global_batch_gather(world, t, e.what(), sizing);
  }

  std::vector<int64_t> payload;
  const ReaderHeader mine = local_list(local, group_ids, payload);
  const std::span<const std::byte> list = std::as_bytes(std::span<const int64_t>(payload));
  const GatheredBlocks blocks = gather_blocks(world, mine, list, sizing.width);
  const std::vector<ReaderHeader>& headers = blocks.headers;

  const std::vector<int64_t> counts = list_bytes(t, headers);
  const bool fits =
      blocks.width > 0 && *std::max_element(counts.begin(), counts.end()) <= blocks.width;
  size_next_gather(sizing, t, counts);  // before anything here can throw
  check_no_rank_failed(headers);
  const std::vector<int64_t> gathered =
      all_lists(world, blocks, counts, fits, is_source ? list : std::span<const std::byte>());
  check_headers_against_sources(t, o.reading, headers);
  return batch_of(t, o, headers, counts, gathered);
}

Plan plan_global_batch(const GlobalBatch& batch, const PipelineOptions& options) {
  const ScheduleInput input{batch.ids, batch.padded_lengths, batch.samples_per_rank,
                            batch.group_ids};
  Plan plan = make_scheduler(options.scheduler)->schedule(input, schedule_options_of(options));
  // Every group zigzag-slices its samples into 2·size chunks, so the padding must divide by that.
  detail::check_group_slicing(plan, pack_options_of(options).divisor);
  return plan;
}

}  // namespace thdpack
