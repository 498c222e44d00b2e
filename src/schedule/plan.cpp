#include <algorithm>
#include <string>

#include "thdpack/core/errors.hpp"
#include "thdpack/schedule/scheduler.hpp"

namespace thdpack {

Plan::Plan(int dp, const std::vector<std::vector<int64_t>>& packs) : dp_(dp) {
  if (dp < 1) throw InvalidArgument("plan: dp must be >= 1");
  if (packs.size() % static_cast<size_t>(dp) != 0) {
    throw InternalError("plan: " + std::to_string(packs.size()) +
                        " packs are not a multiple of dp=" + std::to_string(dp));
  }
  size_t total = 0;
  for (const auto& p : packs) total += p.size();
  ids_.reserve(total);
  offsets_.reserve(packs.size() + 1);
  for (const auto& p : packs) {
    ids_.insert(ids_.end(), p.begin(), p.end());
    offsets_.push_back(static_cast<int64_t>(ids_.size()));
  }
}

Plan::Plan(int dp, std::vector<int64_t> offsets, std::vector<int64_t> ids)
    : dp_(dp), offsets_(std::move(offsets)), ids_(std::move(ids)) {
  if (dp < 1) throw InvalidArgument("plan: dp must be >= 1");
  if (offsets_.empty() || offsets_.front() != 0 ||
      offsets_.back() != static_cast<int64_t>(ids_.size()) ||
      !std::is_sorted(offsets_.begin(), offsets_.end())) {
    throw InternalError("plan: pack offsets must run from 0 to the number of ids, non-decreasing");
  }
  if ((offsets_.size() - 1) % static_cast<size_t>(dp) != 0) {
    throw InternalError("plan: " + std::to_string(offsets_.size() - 1) +
                        " packs are not a multiple of dp=" + std::to_string(dp));
  }
}

std::span<const int64_t> Plan::pack_at(int64_t index) const {
  if (index < 0 || index >= num_packs()) {
    throw InvalidArgument("pack index " + std::to_string(index) + " outside [0, " +
                          std::to_string(num_packs()) + ")");
  }
  const auto i = static_cast<size_t>(index);
  return std::span<const int64_t>(ids_).subspan(static_cast<size_t>(offsets_[i]),
                                                static_cast<size_t>(offsets_[i + 1] - offsets_[i]));
}

}  // namespace thdpack
