#include "thdpack/packing/offline_packing.hpp"

#include <algorithm>
#include <numeric>
#include <random>
#include <unordered_map>

#include "packing/sorted_items.hpp"
#include "thdpack/core/checked_arithmetic.hpp"
#include "thdpack/core/errors.hpp"
#include "thdpack/packing/packed_batch.hpp"

namespace thdpack {
namespace {

// Items to pack: samples, or groups of samples when group ids are given.
struct Items {
  std::vector<int64_t> lengths;     // padded tokens per item
  bool grouped = false;             // without groups item i is sample i
  std::vector<int64_t> offsets{0};  // grouped: samples of item i are samples[offsets[i] .. [i+1])
  std::vector<int64_t> samples;
};

/// A sample that fits the capacity until it is padded to the divisor.
InvalidArgument padded_too_long(int64_t id, int64_t length, int64_t divisor, int64_t capacity) {
  return InvalidArgument(message("sample ", id, " has ", length, " tokens, ",
                                 round_up(length, divisor),
                                 " once padded to a multiple of the divisor ", divisor,
                                 ", but the pack capacity is ", capacity,
                                 "; raise the capacity or lower the divisor (capacity, divisor: "
                                 "-C, --divisor on the command line)"));
}

Items make_items(std::span<const int64_t> lengths, const OfflinePackOptions& o) {
  Items items;
  const auto n = static_cast<int64_t>(lengths.size());
  // Real lengths first: rounding a length near 2^63 up to the divisor would overflow.
  check_items_fit(
      lengths, o.capacity, "sample", "the pack capacity",
      "raise the capacity (capacity; -C/--capacity on the command line) or drop the sample");
  if (o.group_ids.empty()) {
    items.lengths.resize(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) {
      const int64_t length = lengths[static_cast<size_t>(i)];
      const int64_t padded = round_up(length, o.divisor);
      if (padded > o.capacity) throw padded_too_long(i, length, o.divisor, o.capacity);
      items.lengths[static_cast<size_t>(i)] = padded;
    }
    return items;
  }
  if (static_cast<int64_t>(o.group_ids.size()) != n) {
    throw InvalidArgument("group ids must be empty or one per sample");
  }
  items.grouped = true;
  std::unordered_map<int64_t, int64_t> index;
  std::vector<int64_t> item_of(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    auto [it, added] =
        index.emplace(o.group_ids[static_cast<size_t>(i)], static_cast<int64_t>(index.size()));
    item_of[static_cast<size_t>(i)] = it->second;
  }
  const auto count = static_cast<size_t>(index.size());
  items.lengths.assign(count, 0);
  items.offsets.assign(count + 1, 0);
  for (int64_t i = 0; i < n; ++i) {
    const auto item = static_cast<size_t>(item_of[static_cast<size_t>(i)]);
    items.lengths[item] =
        checked_add(items.lengths[item], round_up(lengths[static_cast<size_t>(i)], o.divisor),
                    "the padded length of a group");
    ++items.offsets[item + 1];
  }
  std::partial_sum(items.offsets.begin(), items.offsets.end(), items.offsets.begin());
  for (size_t item = 0; item < count; ++item) {
    if (items.lengths[item] > o.capacity) {
      // Name the group as the caller does (its id), not by our numbering of the groups.
      int64_t first = 0;
      while (item_of[static_cast<size_t>(first)] != static_cast<int64_t>(item)) ++first;
      fail("group ", o.group_ids[static_cast<size_t>(first)], " (",
           items.offsets[item + 1] - items.offsets[item], " samples from sample ", first, ") has ",
           items.lengths[item], " padded tokens but the pack capacity is ", o.capacity,
           "; a group is packed whole, so raise the capacity");
    }
  }
  std::vector<int64_t> cursor(items.offsets.begin(), items.offsets.end() - 1);
  items.samples.resize(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    items.samples[static_cast<size_t>(
        cursor[static_cast<size_t>(item_of[static_cast<size_t>(i)])]++)] = i;
  }
  return items;
}

}  // namespace

PackStrategy pack_strategy_from_name(const std::string& name) {
  if (name == "bfd" || name == "best-fit-decreasing") return PackStrategy::kBestFitDecreasing;
  if (name == "ffd" || name == "first-fit-decreasing") return PackStrategy::kFirstFitDecreasing;
  if (name == "next-fit" || name == "nf") return PackStrategy::kNextFit;
  fail("unknown packing strategy '", name, "'; use bfd, ffd or next-fit");
}

std::string pack_strategy_name(PackStrategy strategy) {
  switch (strategy) {
    case PackStrategy::kBestFitDecreasing:
      return "bfd";
    case PackStrategy::kFirstFitDecreasing:
      return "ffd";
    case PackStrategy::kNextFit:
      return "next-fit";
  }
  return "?";
}

OfflinePacking pack_offline(std::span<const int64_t> lengths, const OfflinePackOptions& o) {
  if (o.divisor < 1) throw InvalidArgument("padding divisor must be >= 1");
  const Items items = make_items(lengths, o);
  check_items_fit(items.lengths, o.capacity, o.group_ids.empty() ? "sample" : "group");

  OfflinePacking out;
  std::mt19937_64 rng(o.shuffle_seed.value_or(0));
  Bins item_packs;
  if (o.strategy == PackStrategy::kNextFit) {
    // Next-fit follows the input order, so a shuffle applies to the items themselves.
    std::vector<int64_t> order(items.lengths.size());
    std::iota(order.begin(), order.end(), int64_t{0});
    if (o.shuffle_seed) std::shuffle(order.begin(), order.end(), rng);
    std::vector<int64_t> ordered(order.size());
    for (size_t i = 0; i < order.size(); ++i)
      ordered[i] = items.lengths[static_cast<size_t>(order[i])];
    item_packs = next_fit(ordered, o.capacity);
    for (int64_t& item : item_packs.items) item = order[static_cast<size_t>(item)];
    out.lower_bound_l2 = bins_lower_bound_l2(items.lengths, o.capacity);
  } else {
    // One sort serves the packer and the L2 bound.
    const detail::SortedItems sorted = detail::sort_decreasing(items.lengths, o.capacity);
    out.lower_bound_l2 = detail::l2_bound_of_descending(sorted.lengths, o.capacity);
    item_packs = o.strategy == PackStrategy::kBestFitDecreasing
                     ? detail::best_fit_decreasing_sorted(sorted, o.capacity)
                     : first_fit_decreasing(items.lengths, o.capacity);
  }
  for (int64_t len : items.lengths) out.padded_tokens += len;
  out.lower_bound_l1 = out.padded_tokens / o.capacity + (out.padded_tokens % o.capacity != 0);

  // Emit packs of samples, in shuffled pack order for the decreasing strategies (the packing, and
  // so its fill, is unchanged).
  const bool reorder = o.shuffle_seed && o.strategy != PackStrategy::kNextFit;
  if (!reorder && !items.grouped) {
    out.packs = std::move(item_packs);
  } else {
    std::vector<int64_t> pack_order(static_cast<size_t>(item_packs.count()));
    std::iota(pack_order.begin(), pack_order.end(), int64_t{0});
    if (reorder) std::shuffle(pack_order.begin(), pack_order.end(), rng);
    out.packs.items.reserve(lengths.size());
    out.packs.offsets.reserve(pack_order.size() + 1);
    for (int64_t p : pack_order) {
      for (int64_t item : item_packs.bin(p)) {
        const auto i = static_cast<size_t>(item);
        if (items.grouped) {
          out.packs.items.insert(out.packs.items.end(), items.samples.begin() + items.offsets[i],
                                 items.samples.begin() + items.offsets[i + 1]);
        } else {
          out.packs.items.push_back(item);
        }
      }
      out.packs.offsets.push_back(static_cast<int64_t>(out.packs.items.size()));
    }
  }
  const double packs = static_cast<double>(out.packs.count());
  out.fill =
      packs > 0 ? static_cast<double>(out.padded_tokens) / (packs * static_cast<double>(o.capacity))
                : 0;
  return out;
}

StreamingPacker::StreamingPacker(int64_t capacity, int64_t max_open_packs, int64_t divisor)
    : capacity_(capacity), max_open_(max_open_packs), divisor_(divisor) {
  if (capacity < 1 || max_open_packs < 1 || divisor < 1) {
    throw InvalidArgument("streaming packer needs capacity, open packs and divisor >= 1");
  }
}

void StreamingPacker::close(size_t index, std::vector<std::vector<int64_t>>& closed) {
  closed.push_back(std::move(open_[index].ids));
  open_.erase(open_.begin() + static_cast<std::ptrdiff_t>(index));
}

void StreamingPacker::add(int64_t id, int64_t length, std::vector<std::vector<int64_t>>& closed) {
  // Checked before rounding: rounding a length near 2^63 up to the divisor would overflow.
  if (length < 1 || length > capacity_) {
    fail("sample ", id, " has ", length, " tokens; lengths must be >= 1 and fit the pack capacity ",
         capacity_);
  }
  if (round_up(length, divisor_) > capacity_) {
    throw padded_too_long(id, length, divisor_, capacity_);
  }
  const int64_t padded = round_up(length, divisor_);
  size_t best = open_.size();
  for (size_t i = 0; i < open_.size(); ++i) {
    const int64_t room = capacity_ - open_[i].used;
    if (room >= padded && (best == open_.size() || room < capacity_ - open_[best].used)) best = i;
  }
  if (best == open_.size()) {
    if (static_cast<int64_t>(open_.size()) == max_open_) {
      // Close the fullest pack to make room.
      size_t fullest = 0;
      for (size_t i = 1; i < open_.size(); ++i) {
        if (open_[i].used > open_[fullest].used) fullest = i;
      }
      close(fullest, closed);
    }
    open_.push_back({});
    best = open_.size() - 1;
  }
  open_[best].ids.push_back(id);
  open_[best].used += padded;
  if (open_[best].used == capacity_) close(best, closed);
}

void StreamingPacker::flush(std::vector<std::vector<int64_t>>& closed) {
  std::stable_sort(open_.begin(), open_.end(),
                   [](const OpenPack& a, const OpenPack& b) { return a.used > b.used; });
  for (auto& p : open_) closed.push_back(std::move(p.ids));
  open_.clear();
}

}  // namespace thdpack
