#pragma once
// A CP cost model's per-sample times, remembered: plans of many samples evaluate the model once
// per sample, over only a few hundred distinct padded lengths.

#include <cstddef>
#include <cstdint>
#include <map>
#include <vector>

#include "thdpack/schedule/cost_model.hpp"

namespace thdpack::detail {

/// cost.time(length, size) remembered in a direct-mapped table per group size: padded lengths
/// take a few hundred values, and a plan of a million samples would otherwise evaluate the cost
/// model a million times (most of the time a scheduler spends comparing two plans).
class TimeCache {
 public:
  explicit TimeCache(const CostModel& cost) : cost_(cost) {}
  double operator()(int64_t length, int size) {
    if (size != size_) {
      size_ = size;
      entries_ = &tables_[size];
      if (entries_->empty()) entries_->assign(kEntries, Entry{-1, 0.0});
    }
    Entry& e = (*entries_)[static_cast<size_t>(static_cast<uint64_t>(length) * kGolden >> kShift)];
    if (e.length != length) e = Entry{length, cost_.time(length, size)};
    return e.time;
  }

 private:
  struct Entry {
    int64_t length;
    double time;
  };
  static constexpr int kBits = 12;
  static constexpr size_t kEntries = size_t{1} << kBits;
  static constexpr uint64_t kGolden = 0x9E3779B97F4A7C15ULL;
  static constexpr int kShift = 64 - kBits;
  const CostModel& cost_;
  std::map<int, std::vector<Entry>> tables_;
  int size_ = 0;
  std::vector<Entry>* entries_ = nullptr;
};

}  // namespace thdpack::detail
