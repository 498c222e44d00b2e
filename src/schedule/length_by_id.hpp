#pragma once
// A sample's padded length by its id: a vector over the id range when the ids are dense (dataset
// indices of one batch usually are), else a hash map. Planners and their statistics look lengths
// up once per placed sample, a million times on large batches.

#include <algorithm>
#include <cstdint>
#include <span>
#include <unordered_map>
#include <vector>

namespace thdpack::detail {

class LengthById {
 public:
  /// `ids` unique, the same size as `padded_lengths`.
  LengthById(std::span<const int64_t> ids, std::span<const int64_t> padded_lengths) {
    if (ids.empty()) return;
    const auto [lo, hi] = std::minmax_element(ids.begin(), ids.end());
    // hi - lo, not hi - lo + 1: ids spanning all of int64 would wrap that to 0.
    const auto span = static_cast<uint64_t>(*hi) - static_cast<uint64_t>(*lo);
    if (span < 8 * static_cast<uint64_t>(ids.size())) {
      lowest_ = *lo;
      dense_.assign(span + 1, -1);
      for (size_t i = 0; i < ids.size(); ++i) dense_[offset(ids[i])] = padded_lengths[i];
      return;
    }
    sparse_.reserve(ids.size());
    for (size_t i = 0; i < ids.size(); ++i) sparse_.emplace(ids[i], padded_lengths[i]);
  }
  /// The length of `id`; -1 when it is not one of the ids.
  int64_t operator()(int64_t id) const {
    if (!dense_.empty()) {
      const uint64_t at = offset(id);
      return at < dense_.size() ? dense_[at] : -1;
    }
    const auto it = sparse_.find(id);
    return it == sparse_.end() ? -1 : it->second;
  }

 private:
  uint64_t offset(int64_t id) const {
    return static_cast<uint64_t>(id) - static_cast<uint64_t>(lowest_);
  }
  int64_t lowest_ = 0;
  std::vector<int64_t> dense_;
  std::unordered_map<int64_t, int64_t> sparse_;
};

}  // namespace thdpack::detail
