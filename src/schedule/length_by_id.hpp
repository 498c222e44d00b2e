#pragma once
// A sample's padded length by its id: a vector over the id range when the ids are dense (dataset
// indices of one batch usually are), else a hash map. Planners and their statistics look lengths
// up once per placed sample, a million times on large batches.

#include <cstdint>
#include <span>
#include <unordered_map>
#include <vector>

#include "schedule/dense_id_range.hpp"

namespace thdpack::detail {

class LengthById {
 public:
  /// `ids` unique, the same size as `padded_lengths`.
  LengthById(std::span<const int64_t> ids, std::span<const int64_t> padded_lengths) {
    if (const auto range = dense_id_range(ids)) {
      range_ = *range;
      dense_.assign(range_.slots, -1);
      for (size_t i = 0; i < ids.size(); ++i) dense_[range_.offset(ids[i])] = padded_lengths[i];
      return;
    }
    sparse_.reserve(ids.size());
    for (size_t i = 0; i < ids.size(); ++i) sparse_.emplace(ids[i], padded_lengths[i]);
  }
  /// The length of `id`; -1 when it is not one of the ids.
  int64_t operator()(int64_t id) const {
    if (!dense_.empty()) {
      const uint64_t at = range_.offset(id);
      return at < dense_.size() ? dense_[at] : -1;
    }
    const auto it = sparse_.find(id);
    return it == sparse_.end() ? -1 : it->second;
  }

 private:
  DenseIdRange range_;
  std::vector<int64_t> dense_;
  std::unordered_map<int64_t, int64_t> sparse_;
};

}  // namespace thdpack::detail
