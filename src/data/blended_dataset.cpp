#include <algorithm>
#include <cmath>
#include <iostream>
#include <mutex>
#include <set>
#include <sstream>

#include "data/readers.hpp"
#include "thdpack/core/errors.hpp"
#include "thdpack/data/indexed_dataset.hpp"

namespace thdpack {

BlendedDataset::BlendedDataset(std::vector<std::shared_ptr<const Dataset>> datasets,
                               std::vector<double> weights, int64_t size)
    : datasets_(std::move(datasets)), weights_(std::move(weights)) {
  if (datasets_.empty() || datasets_.size() != weights_.size()) {
    throw InvalidArgument("a blend needs one weight per dataset and at least one dataset");
  }
  if (datasets_.size() > 32767) throw InvalidArgument("a blend takes at most 32767 datasets");
  double total = 0;
  for (size_t i = 0; i < weights_.size(); ++i) {
    // An infinite weight would make every normalised weight NaN (or 0) and the blend arbitrary.
    if (!(weights_[i] > 0) || !std::isfinite(weights_[i])) {
      // Written as an ostream writes a double ("0.5"), not as std::to_string would ("0.500000").
      fail("blend weight ", i, " is ", weights_[i], "; weights must be finite and > 0");
    }
    if (datasets_[i]->size() == 0) {
      fail("blend dataset ", i, " (", datasets_[i]->describe(), ") is empty");
    }
    total += weights_[i];
  }
  if (!std::isfinite(total))
    throw InvalidArgument("blend weights add up to more than a double holds");
  for (double& w : weights_) w /= total;
  if (size < 1) throw InvalidArgument("a blend needs a size >= 1");
  // Megatron's build_blending_indices: each sample goes to the dataset furthest behind its share.
  dataset_index_.resize(static_cast<size_t>(size));
  sample_index_.resize(static_cast<size_t>(size));
  std::vector<int64_t> taken(datasets_.size(), 0);
  for (int64_t i = 0; i < size; ++i) {
    const double at = std::max(static_cast<double>(i), 1.0);
    size_t best = 0;
    double best_error = weights_[0] * at - static_cast<double>(taken[0]);
    for (size_t d = 1; d < datasets_.size(); ++d) {
      const double error = weights_[d] * at - static_cast<double>(taken[d]);
      if (error > best_error) {
        best = d;
        best_error = error;
      }
    }
    dataset_index_[static_cast<size_t>(i)] = static_cast<int16_t>(best);
    sample_index_[static_cast<size_t>(i)] = taken[best]++;
  }
  warn_of_repeats(taken);
}

void BlendedDataset::warn_of_repeats(const std::vector<int64_t>& taken) const {
  // Megatron wraps a dataset that its weight outruns without a word; the repeats are stated once.
  size_t worst = 0;
  double worst_factor = 0;
  int repeating = 0;
  for (size_t d = 0; d < datasets_.size(); ++d) {
    const double factor = static_cast<double>(taken[d]) / static_cast<double>(datasets_[d]->size());
    if (factor > 1) ++repeating;
    if (factor > worst_factor) {
      worst = d;
      worst_factor = factor;
    }
  }
  if (repeating == 0) return;
  std::ostringstream out;
  out.precision(3);
  out << "thdpack: warning: the blend of " << size() << " samples repeats the samples of "
      << repeating << " of its " << datasets_.size() << " datasets; dataset " << worst << " ("
      << datasets_[worst]->describe() << ") is read " << worst_factor
      << " times over: its weight asks for " << taken[worst] << " samples\n";
  // Once per process for each blend: reopening the same blend (a pack file's source) says nothing
  // new.
  static std::mutex mutex;
  static std::set<std::string> stated;
  const std::lock_guard<std::mutex> lock(mutex);
  if (stated.insert(out.str()).second) std::cerr << out.str() << std::flush;
}

std::pair<int, int64_t> BlendedDataset::source(int64_t index) const {
  check(index >= 0 && index < size(), "blend sample ", index, " outside [0, ", size(), ")");
  const int d = dataset_index_[static_cast<size_t>(index)];
  return {d, sample_index_[static_cast<size_t>(index)] % datasets_[static_cast<size_t>(d)]->size()};
}

int64_t BlendedDataset::length(int64_t index) const {
  const auto [d, i] = source(index);
  return datasets_[static_cast<size_t>(d)]->length(i);
}

Sample BlendedDataset::sample(int64_t index) const {
  const auto [d, i] = source(index);
  Sample s = datasets_[static_cast<size_t>(d)]->sample(i);
  s.id = index;
  return s;
}

std::string BlendedDataset::locate(int64_t index) const {
  const auto [dataset, sample] = source(index);
  return datasets_[static_cast<size_t>(dataset)]->locate(sample);
}

std::string BlendedDataset::describe() const {
  std::ostringstream out;
  out << "blend of " << datasets_.size() << " datasets (" << size() << " samples):";
  for (size_t i = 0; i < datasets_.size(); ++i) {
    out << " " << weights_[i] << " x " << datasets_[i]->describe()
        << (i + 1 < datasets_.size() ? ";" : "");
  }
  return out.str();
}

std::unique_ptr<Dataset> open_indexed_datasets(const std::string& data_path, int64_t size) {
  return detail::open_indexed_datasets(data_path, size, [](const IndexedDataset&) {});
}

std::unique_ptr<Dataset> detail::open_indexed_datasets(
    const std::string& data_path, int64_t size,
    const std::function<void(const IndexedDataset&)>& opened) {
  check(size >= 0, "dataset size must be >= 0 (0: all samples), got ", size);
  std::istringstream in(data_path);
  std::vector<std::string> words;
  for (std::string w; in >> w;) words.push_back(w);
  if (words.empty()) throw InvalidArgument("empty data path");
  if (words.size() == 1) {
    auto single = IndexedDataset::open(words[0]);
    opened(*single);
    return single;
  }
  if (words.size() % 2 != 0) {
    fail("data path '", data_path,
         "': give a prefix, or weight-prefix pairs 'w1 prefix1 w2 prefix2 ...'");
  }
  std::vector<std::shared_ptr<const Dataset>> datasets;
  std::vector<double> weights;
  int64_t total = 0;
  for (size_t i = 0; i < words.size(); i += 2) {
    size_t used = 0;
    double w = 0;
    try {
      w = std::stod(words[i], &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != words[i].size()) {
      fail("data path '", data_path, "': '", words[i], "' is not a weight");
    }
    if (!(w > 0) || !std::isfinite(w)) {
      fail("data path '", data_path, "': weight '", words[i], "' must be finite and > 0");
    }
    weights.push_back(w);
    auto part = IndexedDataset::open(words[i + 1]);
    opened(*part);
    datasets.push_back(std::move(part));
    total += datasets.back()->size();
  }
  return std::make_unique<BlendedDataset>(std::move(datasets), std::move(weights),
                                          size > 0 ? size : total);
}

}  // namespace thdpack
