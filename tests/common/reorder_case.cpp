#include "reorder_case.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "expect_throw.hpp"
#include "thdpack/core/errors.hpp"
#include "thdpack/multimodal/vl_workload.hpp"
#include "thdpack/pipeline/reorder_exchange.hpp"

namespace thdpack::testing {
namespace {

VisionLanguageWorkload small_workload(uint64_t seed) {
  VisionLanguageWorkload w;
  w.seed = seed;
  w.pixel_dim = 3;
  w.max_side = 12;
  w.median_text_tokens = 24;
  w.max_text_tokens = 96;
  return w;
}

// This rank's shard of global micro-batch m: the only samples it reads.
std::vector<MultimodalSample> read_shard(const VisionLanguageWorkload& w, int64_t B, int64_t m,
                                         int dp, int rank) {
  const GroupRange positions = shard_positions(B, dp, rank);
  std::vector<MultimodalSample> out;
  for (int64_t p = positions.begin; p < positions.end; ++p) out.push_back(vl_sample(w, m * B + p));
  return out;
}

std::vector<std::vector<MultimodalSample>> read_window(const VisionLanguageWorkload& w, int64_t B,
                                                       int64_t first, int64_t count, int dp,
                                                       int rank) {
  std::vector<std::vector<MultimodalSample>> out;
  for (int64_t m = first; m < first + count; ++m) out.push_back(read_shard(w, B, m, dp, rank));
  return out;
}

void expect_same_sample(const MultimodalSample& got, const MultimodalSample& want,
                        const std::string& where) {
  ASSERT_EQ(got.id, want.id) << where;
  ASSERT_EQ(got.fields.size(), want.fields.size()) << where;
  for (const auto& [name, field] : want.fields) {
    const auto it = got.fields.find(name);
    ASSERT_NE(it, got.fields.end()) << where << " lacks " << name;
    EXPECT_EQ(it->second.type, field.type) << where << " " << name;
    EXPECT_EQ(it->second.shape, field.shape) << where << " " << name;
    EXPECT_TRUE(it->second.data == field.data) << where << " " << name << " bytes differ";
  }
}

struct Collected {
  std::vector<std::vector<MultimodalSample>> microbatches;
  std::vector<std::vector<int64_t>> positions;
  std::vector<ReorderWindowStats> stats;
  void add(ReorderedWindow&& r) {
    for (auto& mb : r.microbatches) microbatches.push_back(std::move(mb));
    for (auto& p : r.positions) positions.push_back(std::move(p));
    stats.push_back(std::move(r.stats));
  }
};

ReorderOptions options_for(const ReorderCase& c, const VisionLanguageWorkload& w) {
  ReorderOptions o;
  o.cost = vl_cost(w);
  o.assignment.method = c.method;
  o.module_dp_sizes = c.module_dp_sizes;
  o.microbatch_size = c.microbatch_size;
  o.window = c.window;
  return o;
}

Collected run_windows(Communicator& group, const ReorderCase& c, bool overlap) {
  const VisionLanguageWorkload w = small_workload(c.seed);
  ReorderExchange exchange(group, vl_schema(), options_for(c, w));
  Collected out;
  const int dp = group.size();
  auto window_at = [&](int64_t first) {
    return read_window(w, c.microbatch_size, first,
                       std::min<int64_t>(c.window, c.microbatches - first), dp, group.rank());
  };
  if (!overlap) {
    for (int64_t first = 0; first < c.microbatches; first += c.window) {
      out.add(exchange.exchange(window_at(first)));
    }
    return out;
  }
  exchange.start(window_at(0));
  for (int64_t first = 0; first < c.microbatches; first += c.window) {
    ReorderedWindow current = exchange.finish();
    if (first + c.window < c.microbatches) exchange.start(window_at(first + c.window));
    out.add(std::move(current));  // "consumed" while the next window is in flight
  }
  return out;
}

}  // namespace

void check_reorder_exchange(Communicator& group, const ReorderCase& c) {
  const VisionLanguageWorkload w = small_workload(c.seed);
  const int dp = group.size();
  const int rank = group.rank();
  const Collected sync = run_windows(group, c, false);
  const Collected overlapped = run_windows(group, c, true);
  ASSERT_EQ(sync.microbatches.size(), static_cast<size_t>(c.microbatches));
  ASSERT_EQ(overlapped.microbatches.size(), static_cast<size_t>(c.microbatches));
  const int64_t expected_windows = (c.microbatches + c.window - 1) / c.window;
  EXPECT_EQ(static_cast<int64_t>(sync.stats.size()), expected_windows);

  // The reference: the whole micro-batch in one process, the same pure assignment.
  const std::vector<int> sizes =
      c.module_dp_sizes.empty() ? std::vector<int>{dp} : c.module_dp_sizes;
  const int64_t G = canonical_groups(sizes);
  const GroupRange mine = owned_groups(G, dp, rank);
  const int64_t shard = c.microbatch_size / dp;
  int64_t moved = 0, moved_bytes = 0;
  for (int64_t m = 0; m < c.microbatches; ++m) {
    std::vector<MultimodalSample> all;
    std::vector<double> costs;
    for (int64_t p = 0; p < c.microbatch_size; ++p) {
      all.push_back(vl_sample(w, m * c.microbatch_size + p));
      costs.push_back(sample_cost(all.back().fields.at(kInputIdsField).int64_values(), vl_cost(w)));
    }
    AssignmentOptions ao;
    ao.method = c.method;
    const GroupAssignment a = assign_groups(costs, G, ao);
    std::vector<int64_t> want;
    for (int64_t g = mine.begin; g < mine.end; ++g) {
      for (int64_t p : a.members[static_cast<size_t>(g)]) want.push_back(p);
    }
    for (int64_t p = 0; p < c.microbatch_size; ++p) {
      const int64_t owner = a.group_of[static_cast<size_t>(p)] / (G / dp);
      if (owner != p / shard) {
        ++moved;
        const std::vector<int64_t> dims = sample_dims(all[static_cast<size_t>(p)], vl_schema());
        moved_bytes += serialized_size(vl_schema(), dims);
      }
    }
    const std::string where = "rank " + std::to_string(rank) + " micro-batch " + std::to_string(m);
    ASSERT_EQ(sync.positions[static_cast<size_t>(m)], want) << where;
    ASSERT_EQ(overlapped.positions[static_cast<size_t>(m)], want) << where << " (overlapped)";
    for (size_t i = 0; i < want.size(); ++i) {
      const MultimodalSample& ref = all[static_cast<size_t>(want[i])];
      expect_same_sample(sync.microbatches[static_cast<size_t>(m)][i], ref, where);
      expect_same_sample(overlapped.microbatches[static_cast<size_t>(m)][i], ref,
                         where + " (overlapped)");
    }
  }
  int64_t stats_moved = 0, stats_bytes = 0;
  for (size_t i = 0; i < sync.stats.size(); ++i) {
    stats_moved += sync.stats[i].samples_moved;
    stats_bytes += sync.stats[i].bytes_moved;
    EXPECT_EQ(sync.stats[i].samples_moved, overlapped.stats[i].samples_moved);
    EXPECT_EQ(sync.stats[i].spread_after, overlapped.stats[i].spread_after);
    for (size_t k = 0; k < sync.stats[i].vision_cost_after.size() && G == dp; ++k) {
      // One group per rank: the refined assignment never raises the costliest rank.
      const auto& before = sync.stats[i].vision_cost_before[k];
      const auto& after = sync.stats[i].vision_cost_after[k];
      EXPECT_LE(*std::max_element(after.begin(), after.end()),
                *std::max_element(before.begin(), before.end()) + 1e-9);
    }
  }
  EXPECT_EQ(stats_moved, moved);
  EXPECT_EQ(stats_bytes, moved_bytes);
}

void check_reorder_uniform_costs_move_nothing(Communicator& group) {
  // Every sample: 8 text tokens and one 2x2-token image (16 patches at merge size 2).
  ReorderOptions o;
  o.cost.image_token_id = 9;
  o.cost.spatial_merge_size = 2;
  o.cost.text_weight = 1;
  o.microbatch_size = 4 * group.size();
  o.window = 2;
  auto make = [](int64_t id) {
    MultimodalSample s;
    s.id = id;
    const std::vector<int64_t> ids = {1, 2, 9, 9, 9, 9, 3, 4, 5, 6, 7, 8};
    s.fields[kInputIdsField] = SampleField::of_int64(ids);
    s.fields[kPixelValuesField] =
        SampleField::of_float32(std::vector<float>(16 * 2, 0.5f), {16, 2});
    const std::vector<int64_t> grid = {1, 4, 4};
    SampleField g = SampleField::of_int64(grid);
    g.shape = {1, 3};
    s.fields[kImageGridField] = std::move(g);
    return s;
  };
  std::vector<std::vector<MultimodalSample>> shards(2);
  for (int64_t k = 0; k < 2; ++k) {
    for (int64_t j = 0; j < 4; ++j) shards[static_cast<size_t>(k)].push_back(make(100 * k + j));
  }
  ReorderExchange exchange(group, schema_of(shards[0][0]), o);
  const int64_t sent_before = group.stats().bytes_sent;
  const ReorderedWindow r = exchange.exchange(shards);
  EXPECT_EQ(r.stats.samples_moved, 0);
  EXPECT_EQ(r.stats.bytes_moved, 0);
  EXPECT_DOUBLE_EQ(r.stats.spread_before, 1.0);
  EXPECT_DOUBLE_EQ(r.stats.spread_after, 1.0);
  // Only the metadata gathers travelled: far less than one sample's bytes per peer.
  EXPECT_LT(group.stats().bytes_sent - sent_before, 1024 * group.size());
  for (int64_t k = 0; k < 2; ++k) {
    ASSERT_EQ(r.microbatches[static_cast<size_t>(k)].size(), 4u);
    for (int64_t j = 0; j < 4; ++j) {
      EXPECT_EQ(r.microbatches[static_cast<size_t>(k)][static_cast<size_t>(j)].id, 100 * k + j);
      EXPECT_EQ(r.positions[static_cast<size_t>(k)][static_cast<size_t>(j)], group.rank() * 4 + j);
    }
  }
}

void check_reorder_errors(Communicator& group) {
  const VisionLanguageWorkload w = small_workload(3);
  ReorderCase c;
  c.microbatch_size = 2 * group.size();
  const ReorderOptions o = options_for(c, w);
  auto expect_everywhere = [](auto&& call, const std::string& needle) {
    test_util::expect_throw_with<InvalidArgument>(call, needle);
  };

  const int last = group.size() - 1;
  // A sample whose image grid disagrees with its placeholders, on the last rank only.
  {
    ReorderExchange exchange(group, vl_schema(), o);
    auto window = read_window(w, c.microbatch_size, 0, 1, group.size(), group.rank());
    if (group.rank() == last) {
      MultimodalSample& s = window[0][0];
      std::vector<int64_t> ids(s.fields.at(kInputIdsField).int64_values().begin(),
                               s.fields.at(kInputIdsField).int64_values().end());
      ids.push_back(w.image_token_id);  // one placeholder more than the vision data covers
      s.fields[kInputIdsField] = SampleField::of_int64(ids);
    }
    expect_everywhere([&] { exchange.exchange(window); }, "DP rank " + std::to_string(last));
  }
  // Ranks disagreeing on the number of micro-batches in a window.
  if (group.size() > 1) {
    ReorderOptions o2 = o;
    o2.window = 2;
    ReorderExchange exchange(group, vl_schema(), o2);
    const int64_t count = group.rank() == 0 ? 1 : 2;
    expect_everywhere(
        [&] {
          exchange.exchange(
              read_window(w, c.microbatch_size, 0, count, group.size(), group.rank()));
        },
        "disagree on the number of micro-batches");
  }
  // Ranks disagreeing on a cost option (here the text weight) would disagree on the assignment.
  if (group.size() > 1) {
    ReorderOptions o2 = o;
    if (group.rank() == last) o2.cost.text_weight += 1.0;
    ReorderExchange exchange(group, vl_schema(), o2);
    expect_everywhere(
        [&] {
          exchange.exchange(read_window(w, c.microbatch_size, 0, 1, group.size(), group.rank()));
        },
        "disagree on the reorder options");
  }
  // An exchange over the byte limit is refused on every rank before anything moves (each rank
  // sends and receives far more than one byte here; with one rank nothing moves at all).
  if (group.size() > 1) {
    ReorderOptions o2 = o;
    o2.max_exchange_bytes = 1;
    ReorderExchange exchange(group, vl_schema(), o2);
    expect_everywhere(
        [&] {
          exchange.exchange(read_window(w, c.microbatch_size, 0, 1, group.size(), group.rank()));
        },
        "bytes in one window, more than the 1 allowed (max_exchange_bytes)");
  }
  // One rank gives up on its window (say its input failed to convert): every rank raises its
  // message, and the next window exchanges normally.
  {
    ReorderExchange exchange(group, vl_schema(), o);
    auto window = read_window(w, c.microbatch_size, 0, 1, group.size(), group.rank());
    if (group.rank() == last) {
      expect_everywhere([&] { exchange.fail("input_ids is float32"); },
                        "DP rank " + std::to_string(last) + ": input_ids is float32");
    } else {
      expect_everywhere([&] { exchange.exchange(window); },
                        "DP rank " + std::to_string(last) + ": input_ids is float32");
    }
    const ReorderedWindow r = exchange.exchange(window);
    EXPECT_EQ(r.microbatches.size(), 1u);
  }
}

void check_reorder_heterogeneous_modules(Communicator& world, int vision_dp, int language_dp) {
  ASSERT_EQ(world.size(), vision_dp + language_dp);
  const bool vision = world.rank() < vision_dp;
  const auto group = world.split(vision ? 0 : 1, world.rank());
  const VisionLanguageWorkload w = small_workload(11);
  ReorderCase c;
  c.module_dp_sizes = {vision_dp, language_dp};
  const int64_t G = canonical_groups(c.module_dp_sizes);
  c.microbatch_size = 2 * G;
  c.window = 2;
  ReorderExchange exchange(*group, vl_schema(), options_for(c, w));
  const ReorderedWindow r =
      exchange.exchange(read_window(w, c.microbatch_size, 0, 2, group->size(), group->rank()));
  // Gather (module, rank, micro-batch, id) of every held sample over the world.
  std::vector<int64_t> mine;
  for (size_t k = 0; k < r.microbatches.size(); ++k) {
    for (const MultimodalSample& s : r.microbatches[k]) {
      mine.insert(mine.end(), {vision ? 0 : 1, group->rank(), static_cast<int64_t>(k), s.id});
    }
  }
  const std::vector<int64_t> all = allgather_vector<int64_t>(world, mine);
  // Every id is held by exactly one rank per module, and the owners are those of its group.
  for (int64_t k = 0; k < 2; ++k) {
    std::vector<std::vector<int64_t>> owner(
        2, std::vector<int64_t>(static_cast<size_t>(c.microbatch_size), -1));
    for (size_t i = 0; i < all.size(); i += 4) {
      if (all[i + 2] != k) continue;
      const int64_t p = all[i + 3] - k * c.microbatch_size;
      ASSERT_GE(p, 0);
      ASSERT_LT(p, c.microbatch_size);
      int64_t& o = owner[static_cast<size_t>(all[i])][static_cast<size_t>(p)];
      EXPECT_EQ(o, -1) << "sample held twice in module " << all[i];
      o = all[i + 1];
    }
    // The reference assignment of this micro-batch, from every sample's cost.
    std::vector<double> costs;
    for (int64_t p = 0; p < c.microbatch_size; ++p) {
      const MultimodalSample s = vl_sample(w, k * c.microbatch_size + p);
      costs.push_back(sample_cost(s.fields.at(kInputIdsField).int64_values(), vl_cost(w)));
    }
    const GroupAssignment a = assign_groups(costs, G, AssignmentOptions{});
    for (int64_t p = 0; p < c.microbatch_size; ++p) {
      const int64_t v = owner[0][static_cast<size_t>(p)], l = owner[1][static_cast<size_t>(p)];
      const int64_t group_of_p = a.group_of[static_cast<size_t>(p)];
      EXPECT_EQ(v, group_of_p / (G / vision_dp)) << "position " << p;
      EXPECT_EQ(l, group_of_p / (G / language_dp)) << "position " << p;
      if (language_dp % vision_dp == 0) {
        // Vision rank v serves exactly language ranks [v·L/V, (v+1)·L/V).
        EXPECT_EQ(v, l / (language_dp / vision_dp)) << "position " << p;
      }
    }
  }
}

}  // namespace thdpack::testing
