#include <cmath>
#include <numbers>
#include <sstream>

#include "core/counter_rng.hpp"
#include "data/readers.hpp"
#include "thdpack/core/dataset.hpp"
#include "thdpack/core/errors.hpp"
#include "thdpack/data/input_file.hpp"
#include "thdpack/data/lengths_file.hpp"
#include "thdpack/data/mock_dataset.hpp"

namespace thdpack {
namespace {

// Length of sample `index` under a distribution config, from counter-based uniforms.
class LengthSampler {
 public:
  explicit LengthSampler(const MockConfig& c)
      : c_(c), mu_(std::log(c.mean_seq_len) - c.lognormal_sigma * c.lognormal_sigma / 2) {}

  int64_t operator()(int64_t index) const {
    const auto i = static_cast<uint64_t>(index);
    switch (c_.type) {
      case LengthDistributionType::kLognormal: {
        // Box-Muller on two independent uniforms; clip, then truncate to an integer.
        const double u1 = detail::counter_uniform(c_.seed, i, 0);
        const double u2 = detail::counter_uniform(c_.seed, i, 1);
        const double z = std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2);
        const double x = std::exp(mu_ + c_.lognormal_sigma * z);
        // Clip before converting: a max_seq_len near 2^63 is 2^63 as a double, which does not
        // convert back to int64.
        if (!(x > static_cast<double>(c_.min_seq_len))) return c_.min_seq_len;
        if (x >= static_cast<double>(c_.max_seq_len)) return c_.max_seq_len;
        return static_cast<int64_t>(x);
      }
      case LengthDistributionType::kUniform:
        return uniform(i, 0, c_.min_seq_len, c_.max_seq_len);
      case LengthDistributionType::kBimodal: {
        const bool is_long = detail::counter_uniform(c_.seed, i, 2) < c_.long_fraction;
        return is_long ? uniform(i, 0, c_.long_min, c_.long_max)
                       : uniform(i, 0, c_.short_min, c_.short_max);
      }
    }
    return c_.min_seq_len;
  }

 private:
  int64_t uniform(uint64_t i, uint64_t stream, int64_t lo, int64_t hi) const {
    const auto span = static_cast<uint64_t>(hi - lo + 1);
    return lo + static_cast<int64_t>(detail::counter_bits(c_.seed, i, stream) % span);
  }

  MockConfig c_;
  double mu_;
};

class MockDataset final : public Dataset {
 public:
  MockDataset(const MockConfig& config, const MockContent& content,
              std::shared_ptr<const InputFile> lengths)
      : config_((validate(config), config)), content_(content), sampler_(config) {
    if (content.vocab_size < 3 || content.eod_id < 0 || content.eod_id >= content.vocab_size) {
      throw InvalidArgument("mock content needs vocab_size >= 3 and 0 <= eod_id < vocab_size");
    }
    if (config.mode == MockConfig::Mode::kFile) {
      lease_ = lengths ? std::make_unique<InputLease>(std::move(lengths))
                       : std::make_unique<InputLease>(config.path, "lengths file");
      file_lengths_ = detail::read_lengths(lease_->file());
    }
  }

  int64_t size() const override {
    return config_.mode == MockConfig::Mode::kFile ? static_cast<int64_t>(file_lengths_.size())
                                                   : config_.size;
  }

  int64_t length(int64_t index) const override {
    check_index(index);
    if (config_.mode == MockConfig::Mode::kFile) {
      return file_lengths_[static_cast<size_t>(index)];
    }
    return sampler_(index);
  }

  Sample sample(int64_t index) const override {
    const int64_t len = length(index);
    Sample s;
    s.id = index;
    s.input_ids.resize(static_cast<size_t>(len));
    for (int64_t j = 0; j < len; ++j) {
      s.input_ids[static_cast<size_t>(j)] = mock_token(index, j, len, content_);
    }
    return s;
  }

  std::string describe() const override {
    std::ostringstream out;
    out << "mock " << to_json(config_) << " (" << size() << " samples)";
    return out.str();
  }

 private:
  void check_index(int64_t index) const {
    check(index >= 0 && index < size(), "sample index ", index, " outside [0, ", size(), ")");
  }

  MockConfig config_;
  MockContent content_;
  LengthSampler sampler_;
  std::vector<int64_t> file_lengths_;
  std::unique_ptr<InputLease> lease_;  // file mode: the lengths file stays an input in use
};

}  // namespace

int64_t mock_token(int64_t index, int64_t j, int64_t length, const MockContent& content) {
  if (j == length - 1) return content.eod_id;
  return 2 + (index + j) % (content.vocab_size - 2);
}

std::unique_ptr<Dataset> make_mock_dataset(const MockConfig& config, const MockContent& content) {
  return std::make_unique<MockDataset>(config, content, nullptr);
}

std::unique_ptr<Dataset> detail::make_mock_dataset(const MockConfig& config,
                                                   const MockContent& content,
                                                   std::shared_ptr<const InputFile> lengths) {
  return std::make_unique<MockDataset>(config, content, std::move(lengths));
}

}  // namespace thdpack
