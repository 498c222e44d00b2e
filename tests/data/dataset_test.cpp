// Datasets (SPEC §2, §10; include/thdpack/core/dataset.hpp, thdpack/data/mock_dataset.hpp): the
// default mock config, mock length distributions and their statistics, mock token content, config
// JSON parsing, lengths files and pre-tokenized JSONL.

#include "thdpack/core/dataset.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <numeric>
#include <ostream>
#include <string>
#include <vector>

#include "expect_throw.hpp"
#include "temp_dir.hpp"
#include "thdpack/core/errors.hpp"
#include "thdpack/data/jsonl_dataset.hpp"
#include "thdpack/data/lengths_file.hpp"
#include "thdpack/data/mock_dataset.hpp"

namespace thdpack {
namespace {

namespace fs = std::filesystem;
using test_util::expect_throw_with;
using test_util::TempDir;

std::vector<int64_t> lengths_of(const Dataset& d, int64_t n) {
  std::vector<int64_t> out(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) out[static_cast<size_t>(i)] = d.length(i);
  return out;
}

double normal_cdf(double x) {
  return 0.5 * std::erfc(-x / std::sqrt(2.0));
}

MockConfig lognormal_config(int64_t lo, int64_t hi, double mean, double sigma, uint64_t seed = 0) {
  MockConfig c;
  c.type = LengthDistributionType::kLognormal;
  c.min_seq_len = lo;
  c.max_seq_len = hi;
  c.mean_seq_len = mean;
  c.lognormal_sigma = sigma;
  c.seed = seed;
  return c;
}

MockConfig uniform_config(int64_t lo, int64_t hi, uint64_t seed = 0) {
  MockConfig c;
  c.type = LengthDistributionType::kUniform;
  c.min_seq_len = lo;
  c.max_seq_len = hi;
  c.seed = seed;
  return c;
}

MockConfig bimodal_config(int64_t smin, int64_t smax, int64_t lmin, int64_t lmax, double frac) {
  MockConfig c;
  c.type = LengthDistributionType::kBimodal;
  c.short_min = smin;
  c.short_max = smax;
  c.long_min = lmin;
  c.long_max = lmax;
  c.long_fraction = frac;
  c.min_seq_len = smin;
  c.max_seq_len = lmax;
  return c;
}

void expect_same_config(const MockConfig& a, const MockConfig& b) {
  EXPECT_EQ(a.mode, b.mode);
  EXPECT_EQ(a.type, b.type);
  EXPECT_EQ(a.min_seq_len, b.min_seq_len);
  EXPECT_EQ(a.max_seq_len, b.max_seq_len);
  EXPECT_DOUBLE_EQ(a.mean_seq_len, b.mean_seq_len);
  EXPECT_DOUBLE_EQ(a.lognormal_sigma, b.lognormal_sigma);
  EXPECT_EQ(a.short_min, b.short_min);
  EXPECT_EQ(a.short_max, b.short_max);
  EXPECT_EQ(a.long_min, b.long_min);
  EXPECT_EQ(a.long_max, b.long_max);
  EXPECT_DOUBLE_EQ(a.long_fraction, b.long_fraction);
  EXPECT_EQ(a.size, b.size);
  EXPECT_EQ(a.seed, b.seed);
  EXPECT_EQ(a.path, b.path);
}

// ---------------------------------------------------------------------------------------------
// Default mock config (Megatron's default for --seq-length S)

TEST(DatasetDefaultMock, MatchesMegatronFor8192) {
  const MockConfig c = default_mock_config(8192);
  EXPECT_EQ(c.mode, MockConfig::Mode::kDistribution);
  EXPECT_EQ(c.type, LengthDistributionType::kLognormal);
  EXPECT_EQ(c.min_seq_len, 4096);
  EXPECT_EQ(c.max_seq_len, 8192);
  EXPECT_DOUBLE_EQ(c.mean_seq_len, 6144.0);
  EXPECT_DOUBLE_EQ(c.lognormal_sigma, 1.1);
  EXPECT_EQ(c.size, 1'000'000);
  EXPECT_EQ(c.seed, 0u);
  EXPECT_NO_THROW(validate(c));
}

TEST(DatasetDefaultMock, UsesIntegerDivisionForTheMean) {
  // mean = S//4*3, min = S//2.
  const MockConfig c = default_mock_config(1001);
  EXPECT_EQ(c.min_seq_len, 500);
  EXPECT_EQ(c.max_seq_len, 1001);
  EXPECT_DOUBLE_EQ(c.mean_seq_len, 750.0);
  const MockConfig d = default_mock_config(10);
  EXPECT_EQ(d.min_seq_len, 5);
  EXPECT_DOUBLE_EQ(d.mean_seq_len, 6.0);  // 10//4*3, not 7.5
}

TEST(DatasetDefaultMock, EveryAcceptedLengthGivesAValidConfig) {
  for (int64_t s : {4, 5, 7, 8, 100, 4096, 131072}) {
    const MockConfig c = default_mock_config(s);
    EXPECT_NO_THROW(validate(c)) << "S=" << s;
    EXPECT_NO_THROW(make_mock_dataset(c)) << "S=" << s;
  }
}

TEST(DatasetDefaultMock, RejectsTinySequenceLengths) {
  // Below 4 the default mean S//4*3 is 0, which no lognormal can have.
  for (int64_t s : {-5, 0, 1, 2, 3}) {
    expect_throw_with<InvalidArgument>([s] { default_mock_config(s); }, std::to_string(s));
  }
}

// ---------------------------------------------------------------------------------------------
// Mock length distributions

TEST(DatasetMockLengths, DefaultMock8192ClipsAsSpecSays) {
  // SPEC §2: for S=8192 about 57% of the draws clip to 4096 and 21% to 8192.
  const auto d = make_mock_dataset(default_mock_config(8192));
  ASSERT_EQ(d->size(), 1'000'000);
  constexpr int64_t kN = 200'000;
  int64_t at_min = 0, at_max = 0;
  double sum = 0;
  for (int64_t i = 0; i < kN; ++i) {
    const int64_t len = d->length(i);
    ASSERT_GE(len, 4096) << "index " << i;
    ASSERT_LE(len, 8192) << "index " << i;
    at_min += len == 4096;
    at_max += len == 8192;
    sum += static_cast<double>(len);
  }
  const double frac_min = static_cast<double>(at_min) / kN;
  const double frac_max = static_cast<double>(at_max) / kN;
  EXPECT_NEAR(frac_min, 0.57, 0.01);
  EXPECT_NEAR(frac_max, 0.21, 0.01);
  // The same figures from the lognormal with mu = ln(m) - s²/2 (lengths are truncated, so
  // everything below 4097 lands on 4096).
  const double mu = std::log(6144.0) - 1.1 * 1.1 / 2;
  EXPECT_NEAR(frac_min, normal_cdf((std::log(4097.0) - mu) / 1.1), 0.005);
  EXPECT_NEAR(frac_max, 1 - normal_cdf((std::log(8192.0) - mu) / 1.1), 0.005);
  // Clipping pulls the mean far below 6144.
  EXPECT_LT(sum / kN, 5600.0);
  EXPECT_GT(sum / kN, 5000.0);
}

TEST(DatasetMockLengths, LognormalUnclippedMeanIsTheConfiguredMean) {
  // With a clip range that never binds, the sample mean is m and the median exp(mu).
  const double m = 1000, sigma = 0.5;
  const auto d = make_mock_dataset(lognormal_config(1, 1'000'000'000, m, sigma, 7));
  constexpr int64_t kN = 200'000;
  std::vector<int64_t> lens = lengths_of(*d, kN);
  const double mean = std::accumulate(lens.begin(), lens.end(), 0.0) / kN;
  EXPECT_NEAR(mean, m - 0.5, 0.01 * m);  // truncation to integers loses 0.5 on average
  std::nth_element(lens.begin(), lens.begin() + kN / 2, lens.end());
  const double median = static_cast<double>(lens[kN / 2]);
  EXPECT_NEAR(median, std::exp(std::log(m) - sigma * sigma / 2), 0.01 * m);
}

TEST(DatasetMockLengths, ZeroSigmaGivesTheMeanEverywhere) {
  const auto d = make_mock_dataset(lognormal_config(1, 100'000, 6144.5, 0.0));
  for (int64_t i = 0; i < 1000; ++i) ASSERT_EQ(d->length(i), 6144) << "index " << i;
}

TEST(DatasetMockLengths, SameSeedSameLengthsDifferentSeedDifferent) {
  const MockConfig a = lognormal_config(16, 32768, 2000, 1.0, 1);
  MockConfig b = a;
  b.seed = 2;
  const auto d1 = make_mock_dataset(a);
  const auto d2 = make_mock_dataset(a);
  const auto d3 = make_mock_dataset(b);
  constexpr int64_t kN = 5000;
  const auto l1 = lengths_of(*d1, kN);
  EXPECT_EQ(l1, lengths_of(*d2, kN));
  const auto l3 = lengths_of(*d3, kN);
  int64_t differ = 0;
  for (int64_t i = 0; i < kN; ++i)
    differ += l1[static_cast<size_t>(i)] != l3[static_cast<size_t>(i)];
  EXPECT_GT(differ, kN * 9 / 10);
  // Neighbouring indices are not trivially related either.
  int64_t equal_neighbours = 0;
  for (size_t i = 1; i < l1.size(); ++i) equal_neighbours += l1[i] == l1[i - 1];
  EXPECT_LT(equal_neighbours, kN / 20);
}

TEST(DatasetMockLengths, LengthDoesNotDependOnDatasetSizeOrAccessOrder) {
  MockConfig big = default_mock_config(8192);
  big.seed = 11;
  MockConfig small = big;
  small.size = 100;
  const auto b = make_mock_dataset(big);
  const auto s = make_mock_dataset(small);
  EXPECT_EQ(s->size(), 100);
  std::vector<int64_t> forward = lengths_of(*s, 100);
  for (int64_t i = 99; i >= 0; --i) {
    EXPECT_EQ(s->length(i), forward[static_cast<size_t>(i)]);
    EXPECT_EQ(b->length(i), forward[static_cast<size_t>(i)]);
  }
  // A sample far out in the big dataset is computed directly, in O(1).
  EXPECT_EQ(b->length(999'999), make_mock_dataset(big)->length(999'999));
}

TEST(DatasetMockLengths, IndexOutOfRangeThrows) {
  MockConfig c = uniform_config(1, 10);
  c.size = 10;
  const auto d = make_mock_dataset(c);
  expect_throw_with<InvalidArgument>([&] { d->length(10); }, {"10"});
  expect_throw_with<InvalidArgument>([&] { d->length(-1); }, {"-1"});
  expect_throw_with<InvalidArgument>([&] { d->sample(10); }, {"10"});
}

TEST(DatasetMockLengths, UniformCoversItsInclusiveRangeEvenly) {
  const auto d = make_mock_dataset(uniform_config(5, 9, 3));
  constexpr int64_t kN = 50'000;
  std::map<int64_t, int64_t> counts;
  for (int64_t i = 0; i < kN; ++i) ++counts[d->length(i)];
  ASSERT_EQ(counts.size(), 5u);
  EXPECT_EQ(counts.begin()->first, 5);
  EXPECT_EQ(counts.rbegin()->first, 9);
  for (const auto& [len, n] : counts) EXPECT_NEAR(n, kN / 5, kN / 50) << "length " << len;
}

TEST(DatasetMockLengths, UniformWideRange) {
  const auto d = make_mock_dataset(uniform_config(64, 16384));
  constexpr int64_t kN = 100'000;
  double sum = 0;
  for (int64_t i = 0; i < kN; ++i) {
    const int64_t len = d->length(i);
    ASSERT_GE(len, 64);
    ASSERT_LE(len, 16384);
    sum += static_cast<double>(len);
  }
  EXPECT_NEAR(sum / kN, (64 + 16384) / 2.0, 0.01 * 8224);
}

TEST(DatasetMockLengths, UniformSingleValue) {
  const auto d = make_mock_dataset(uniform_config(7, 7));
  for (int64_t i = 0; i < 100; ++i) EXPECT_EQ(d->length(i), 7);
}

TEST(DatasetMockLengths, BimodalRespectsRangesAndLongFraction) {
  const auto d = make_mock_dataset(bimodal_config(64, 512, 8192, 16384, 0.2));
  constexpr int64_t kN = 100'000;
  int64_t long_count = 0, short_sum = 0, short_count = 0;
  for (int64_t i = 0; i < kN; ++i) {
    const int64_t len = d->length(i);
    const bool is_short = len >= 64 && len <= 512;
    const bool is_long = len >= 8192 && len <= 16384;
    ASSERT_TRUE(is_short || is_long) << "index " << i << " length " << len;
    long_count += is_long;
    if (is_short) {
      short_sum += len;
      ++short_count;
    }
  }
  EXPECT_NEAR(static_cast<double>(long_count) / kN, 0.2, 0.01);
  EXPECT_NEAR(static_cast<double>(short_sum) / static_cast<double>(short_count), 288.0, 3.0);
}

TEST(DatasetMockLengths, BimodalExtremeFractions) {
  const auto none = make_mock_dataset(bimodal_config(10, 20, 100, 200, 0.0));
  const auto all = make_mock_dataset(bimodal_config(10, 20, 100, 200, 1.0));
  for (int64_t i = 0; i < 2000; ++i) {
    EXPECT_LE(none->length(i), 20);
    EXPECT_GE(all->length(i), 100);
  }
}

TEST(DatasetMockLengths, DescribeSaysMockAndSize) {
  MockConfig c = uniform_config(1, 10);
  c.size = 1234;
  const std::string text = make_mock_dataset(c)->describe();
  EXPECT_NE(text.find("mock"), std::string::npos) << text;
  EXPECT_NE(text.find("1234"), std::string::npos) << text;
}

TEST(DatasetMockLengths, InvalidConfigIsRejectedByTheFactory) {
  MockConfig c = uniform_config(10, 5);
  expect_throw_with<InvalidArgument>([&] { make_mock_dataset(c); }, {"max_seq_len"});
  c = uniform_config(1, 5);
  c.size = 0;
  expect_throw_with<InvalidArgument>([&] { make_mock_dataset(c); }, {"size"});
}

TEST(DatasetMockLengths, FileModeReadsTheLengthsFile) {
  TempDir dir;
  MockConfig c;
  c.mode = MockConfig::Mode::kFile;
  c.path = dir.write("lengths.csv", "seq_len\n3\n1\n4\n");
  const auto d = make_mock_dataset(c);
  ASSERT_EQ(d->size(), 3);
  EXPECT_EQ(lengths_of(*d, 3), (std::vector<int64_t>{3, 1, 4}));
  EXPECT_EQ(d->sample(2).input_ids.size(), 4u);
  expect_throw_with<InvalidArgument>([&] { d->length(3); }, {"3"});
}

// ---------------------------------------------------------------------------------------------
// Mock token content

TEST(MockContent, TokenFormula) {
  const MockContent content{10, 1};  // tokens in [2, 10), 8 distinct
  EXPECT_EQ(mock_token(7, 0, 5, content), 2 + 7);
  EXPECT_EQ(mock_token(7, 1, 5, content), 2 + 0);  // (7+1) mod 8
  EXPECT_EQ(mock_token(7, 3, 5, content), 2 + 2);
  EXPECT_EQ(mock_token(7, 4, 5, content), 1);  // last token: eod
  EXPECT_EQ(mock_token(0, 0, 1, content), 1);  // a one-token sample is just eod
}

TEST(MockContent, SamplesAreDeterministicAndWellFormed) {
  MockConfig c = lognormal_config(1, 300, 100, 1.0, 5);
  c.size = 200;
  const MockContent content{50, 0};
  const auto d = make_mock_dataset(c, content);
  const auto again = make_mock_dataset(c, content);
  for (int64_t i = 0; i < d->size(); ++i) {
    const Sample s = d->sample(i);
    EXPECT_EQ(s.id, i);
    ASSERT_EQ(static_cast<int64_t>(s.input_ids.size()), d->length(i)) << "index " << i;
    ASSERT_FALSE(s.input_ids.empty());
    EXPECT_EQ(s.input_ids.back(), 0) << "index " << i;
    for (size_t j = 0; j + 1 < s.input_ids.size(); ++j) {
      ASSERT_GE(s.input_ids[j], 2);
      ASSERT_LT(s.input_ids[j], 50);
      ASSERT_EQ(s.input_ids[j], mock_token(i, static_cast<int64_t>(j), d->length(i), content));
    }
    EXPECT_TRUE(s.loss_mask.empty());
    EXPECT_TRUE(s.labels.empty());
    EXPECT_EQ(s.input_ids, again->sample(i).input_ids);
  }
}

TEST(MockContent, DefaultContentUsesEodOne) {
  MockConfig c = uniform_config(2, 40);
  c.size = 20;
  const auto d = make_mock_dataset(c);
  for (int64_t i = 0; i < 20; ++i) {
    const Sample s = d->sample(i);
    EXPECT_EQ(s.input_ids.back(), 1);
    EXPECT_EQ(s.input_ids.front(), 2 + i % 31998);
  }
}

TEST(MockContent, InvalidContentIsRejected) {
  const MockConfig c = uniform_config(1, 4);
  expect_throw_with<InvalidArgument>(
      [&] {
        make_mock_dataset(c, MockContent{2, 1});
      },
      {"vocab_size"});
  expect_throw_with<InvalidArgument>(
      [&] {
        make_mock_dataset(c, MockContent{100, 100});
      },
      {"eod_id"});
  expect_throw_with<InvalidArgument>(
      [&] {
        make_mock_dataset(c, MockContent{100, -1});
      },
      {"eod_id"});
}

// ---------------------------------------------------------------------------------------------
// parse_mock_config / to_json

TEST(MockConfigParse, MegatronLognormalKeys) {
  const MockConfig c = parse_mock_config(
      R"({"mode":"distribution","type":"lognormal","min_seq_len":4096,"max_seq_len":8192,)"
      R"("mean_seq_len":6144,"lognormal_sigma":1.1})");
  EXPECT_EQ(c.mode, MockConfig::Mode::kDistribution);
  EXPECT_EQ(c.type, LengthDistributionType::kLognormal);
  EXPECT_EQ(c.min_seq_len, 4096);
  EXPECT_EQ(c.max_seq_len, 8192);
  EXPECT_DOUBLE_EQ(c.mean_seq_len, 6144.0);
  EXPECT_DOUBLE_EQ(c.lognormal_sigma, 1.1);
  EXPECT_EQ(c.size, 1'000'000);  // default
  EXPECT_EQ(c.seed, 0u);         // default
  expect_same_config(c, default_mock_config(8192));
}

TEST(MockConfigParse, OptionalSizeAndSeed) {
  const MockConfig c = parse_mock_config(
      R"({"mode":"distribution","type":"lognormal","min_seq_len":16,"max_seq_len":32768,)"
      R"("mean_seq_len":2000.5,"lognormal_sigma":1,"size":12345,"seed":42})");
  EXPECT_EQ(c.size, 12345);
  EXPECT_EQ(c.seed, 42u);
  EXPECT_DOUBLE_EQ(c.mean_seq_len, 2000.5);
  EXPECT_DOUBLE_EQ(c.lognormal_sigma, 1.0);
  EXPECT_EQ(make_mock_dataset(c)->size(), 12345);
}

TEST(MockConfigParse, UniformAndBimodal) {
  const MockConfig u = parse_mock_config(
      R"({"mode":"distribution","type":"uniform","min_seq_len":64,"max_seq_len":16384})");
  EXPECT_EQ(u.type, LengthDistributionType::kUniform);
  EXPECT_EQ(u.min_seq_len, 64);
  EXPECT_EQ(u.max_seq_len, 16384);
  const MockConfig b =
      parse_mock_config(R"({"mode":"distribution","type":"bimodal","short_min":64,"short_max":512,)"
                        R"("long_min":8192,"long_max":16384,"long_fraction":0.2,"seed":3})");
  EXPECT_EQ(b.type, LengthDistributionType::kBimodal);
  EXPECT_EQ(b.short_min, 64);
  EXPECT_EQ(b.short_max, 512);
  EXPECT_EQ(b.long_min, 8192);
  EXPECT_EQ(b.long_max, 16384);
  EXPECT_DOUBLE_EQ(b.long_fraction, 0.2);
  EXPECT_EQ(b.seed, 3u);
  EXPECT_EQ(b.min_seq_len, 64);
  EXPECT_EQ(b.max_seq_len, 16384);
}

TEST(MockConfigParse, FileModeResolvesRelativePathsAgainstBaseDir) {
  const MockConfig rel = parse_mock_config(R"({"mode":"file","path":"lengths.csv"})", "/data/run1");
  EXPECT_EQ(rel.mode, MockConfig::Mode::kFile);
  EXPECT_EQ(fs::path(rel.path), fs::path("/data/run1") / "lengths.csv");
  const MockConfig nested = parse_mock_config(R"({"mode":"file","path":"sub/l.csv"})", "/base");
  EXPECT_EQ(fs::path(nested.path), fs::path("/base/sub/l.csv"));
  const MockConfig abs = parse_mock_config(R"({"mode":"file","path":"/abs/l.csv"})", "/data/run1");
  EXPECT_EQ(abs.path, "/abs/l.csv");
  const MockConfig no_base = parse_mock_config(R"({"mode":"file","path":"lengths.csv"})");
  EXPECT_EQ(no_base.path, "lengths.csv");
}

TEST(MockConfigParse, FileModeEndToEnd) {
  TempDir dir;
  dir.write("l.txt", "5\n6\n7\n");
  const MockConfig c = parse_mock_config(R"({"mode":"file","path":"l.txt"})", dir.path().string());
  const auto d = make_mock_dataset(c);
  EXPECT_EQ(d->size(), 3);
  EXPECT_EQ(d->length(0), 5);
  EXPECT_EQ(d->length(2), 7);
}

TEST(MockConfigParse, ToJsonRoundTrips) {
  MockConfig ln = lognormal_config(16, 32768, 2000.25, 1.3, 99);
  ln.size = 777;
  MockConfig un = uniform_config(3, 300, 5);
  MockConfig bi = bimodal_config(64, 512, 8192, 16384, 0.35);
  bi.seed = 8;
  bi.size = 4242;
  MockConfig file;
  file.mode = MockConfig::Mode::kFile;
  file.path = "/some/where/lengths.csv";
  for (const MockConfig& c : {default_mock_config(8192), ln, un, bi, file}) {
    const std::string text = to_json(c);
    SCOPED_TRACE(text);
    expect_same_config(parse_mock_config(text), c);
    // Still the same after a second trip.
    EXPECT_EQ(to_json(parse_mock_config(text)), text);
  }
}

TEST(MockConfigParse, ToJsonUsesMegatronKeys) {
  const std::string text = to_json(default_mock_config(8192));
  for (const char* key :
       {"\"mode\"", "\"distribution\"", "\"type\"", "\"lognormal\"", "\"min_seq_len\"",
        "\"max_seq_len\"", "\"mean_seq_len\"", "\"lognormal_sigma\""}) {
    EXPECT_NE(text.find(key), std::string::npos) << key << " missing from " << text;
  }
}

TEST(MockConfigParse, ValidateAcceptsGoodConfigs) {
  EXPECT_NO_THROW(validate(default_mock_config(4096)));
  EXPECT_NO_THROW(validate(uniform_config(1, 1)));
  EXPECT_NO_THROW(validate(bimodal_config(1, 2, 3, 4, 0.5)));
  MockConfig f;
  f.mode = MockConfig::Mode::kFile;
  f.path = "x";
  EXPECT_NO_THROW(validate(f));
  f.path.clear();
  expect_throw_with<InvalidArgument>([&] { validate(f); }, {"path"});
}

struct BadConfig {
  const char* name;
  const char* json;
  std::vector<std::string> needles;
};

void PrintTo(const BadConfig& c, std::ostream* os) {
  *os << c.name << ": " << c.json;
}

class MockConfigErrors : public ::testing::TestWithParam<BadConfig> {};

TEST_P(MockConfigErrors, ThrowsInvalidArgumentNamingTheProblem) {
  const BadConfig& p = GetParam();
  std::string message;
  try {
    parse_mock_config(p.json);
    ADD_FAILURE() << p.name << ": expected InvalidArgument for " << p.json;
  } catch (const InvalidArgument& e) {
    message = e.what();
  }
  for (const std::string& needle : p.needles) {
    EXPECT_NE(message.find(needle), std::string::npos)
        << p.name << ": message \"" << message << "\" does not mention \"" << needle << "\"";
  }
}

#define LOGNORMAL_BASE R"("mode":"distribution","type":"lognormal",)"

INSTANTIATE_TEST_SUITE_P(
    MockConfigBad, MockConfigErrors,
    ::testing::Values(
        BadConfig{
            "unknown_key",
            "{" LOGNORMAL_BASE
            R"("min_seq_len":1,"max_seq_len":2,"mean_seq_len":1,"lognormal_sigma":1,"foo":1})",
            {"'foo'", "unknown key"}},
        BadConfig{
            "string_min",
            "{" LOGNORMAL_BASE
            R"("min_seq_len":"4096","max_seq_len":8192,"mean_seq_len":6144,"lognormal_sigma":1})",
            {"min_seq_len", "integer"}},
        BadConfig{
            "float_min",
            "{" LOGNORMAL_BASE
            R"("min_seq_len":4096.5,"max_seq_len":8192,"mean_seq_len":6144,"lognormal_sigma":1})",
            {"min_seq_len"}},
        BadConfig{"string_mean",
                  "{" LOGNORMAL_BASE
                  R"("min_seq_len":1,"max_seq_len":8192,"mean_seq_len":"big","lognormal_sigma":1})",
                  {"mean_seq_len", "number"}},
        BadConfig{
            "bool_sigma",
            "{" LOGNORMAL_BASE
            R"("min_seq_len":1,"max_seq_len":8192,"mean_seq_len":100,"lognormal_sigma":true})",
            {"lognormal_sigma"}},
        BadConfig{
            "max_below_min",
            "{" LOGNORMAL_BASE
            R"("min_seq_len":8192,"max_seq_len":4096,"mean_seq_len":6144,"lognormal_sigma":1})",
            {"max_seq_len", "min_seq_len"}},
        BadConfig{
            "negative_sigma",
            "{" LOGNORMAL_BASE
            R"("min_seq_len":1,"max_seq_len":8192,"mean_seq_len":6144,"lognormal_sigma":-0.5})",
            {"lognormal_sigma"}},
        BadConfig{"zero_mean",
                  "{" LOGNORMAL_BASE
                  R"("min_seq_len":1,"max_seq_len":8192,"mean_seq_len":0,"lognormal_sigma":1})",
                  {"mean_seq_len"}},
        BadConfig{"zero_min",
                  "{" LOGNORMAL_BASE
                  R"("min_seq_len":0,"max_seq_len":8192,"mean_seq_len":10,"lognormal_sigma":1})",
                  {"min_seq_len"}},
        BadConfig{"missing_key",
                  "{" LOGNORMAL_BASE R"("min_seq_len":1,"max_seq_len":8192,"mean_seq_len":10})",
                  {"lognormal_sigma", "missing"}},
        BadConfig{
            "zero_size",
            "{" LOGNORMAL_BASE
            R"("min_seq_len":1,"max_seq_len":2,"mean_seq_len":1,"lognormal_sigma":1,"size":0})",
            {"size"}},
        BadConfig{
            "string_size",
            "{" LOGNORMAL_BASE
            R"("min_seq_len":1,"max_seq_len":2,"mean_seq_len":1,"lognormal_sigma":1,"size":"9"})",
            {"size"}},
        BadConfig{
            "negative_seed",
            "{" LOGNORMAL_BASE
            R"("min_seq_len":1,"max_seq_len":2,"mean_seq_len":1,"lognormal_sigma":1,"seed":-1})",
            {"seed"}},
        BadConfig{"not_json", R"({"mode": "distribution",)", {"JSON"}},
        BadConfig{"garbage", "min_seq_len=4", {"JSON"}},
        BadConfig{"not_object", "[1, 2, 3]", {"object"}},
        BadConfig{"string_root", R"("lognormal")", {"object"}},
        BadConfig{"unknown_mode", R"({"mode":"stream","path":"x"})", {"mode", "stream"}},
        BadConfig{"mode_not_string", R"({"mode":1})", {"mode"}},
        BadConfig{"unknown_type",
                  R"({"mode":"distribution","type":"gamma","min_seq_len":1,"max_seq_len":2})",
                  {"gamma"}},
        BadConfig{"uniform_extra_key",
                  R"({"type":"uniform","min_seq_len":1,"max_seq_len":2,"mean_seq_len":1})",
                  {"'mean_seq_len'"}},
        BadConfig{"file_without_path", R"({"mode":"file"})", {"path"}},
        BadConfig{"file_path_not_string", R"({"mode":"file","path":7})", {"path"}},
        BadConfig{"file_extra_key", R"({"mode":"file","path":"l.csv","size":3})", {"'size'"}},
        BadConfig{"bimodal_fraction",
                  R"({"type":"bimodal","short_min":1,"short_max":2,"long_min":3,"long_max":4,)"
                  R"("long_fraction":1.5})",
                  {"long_fraction"}},
        BadConfig{"bimodal_short_range",
                  R"({"type":"bimodal","short_min":5,"short_max":2,"long_min":3,"long_max":4,)"
                  R"("long_fraction":0.5})",
                  {"short_min"}},
        BadConfig{"bimodal_long_range",
                  R"({"type":"bimodal","short_min":1,"short_max":2,"long_min":0,"long_max":4,)"
                  R"("long_fraction":0.5})",
                  {"long_min"}}),
    [](const ::testing::TestParamInfo<BadConfig>& info) { return std::string(info.param.name); });

#undef LOGNORMAL_BASE

// ---------------------------------------------------------------------------------------------
// Lengths files

TEST(LengthsFile, ReadsEveryLineIncludingTheFirst) {
  // Megatron drops the first line as a header even when it is a length; we must not.
  TempDir dir;
  EXPECT_EQ(read_lengths_file(dir.write("l.csv", "100\n200\n300\n")),
            (std::vector<int64_t>{100, 200, 300}));
  EXPECT_EQ(read_lengths_file(dir.write("one.csv", "42")), (std::vector<int64_t>{42}));
}

TEST(LengthsFile, AcceptsANonNumericHeader) {
  TempDir dir;
  EXPECT_EQ(read_lengths_file(dir.write("h.csv", "seq_len\n100\n200\n")),
            (std::vector<int64_t>{100, 200}));
  // The header may follow blank lines.
  EXPECT_EQ(read_lengths_file(dir.write("h2.csv", "\n\nlength\n7\n")), (std::vector<int64_t>{7}));
}

TEST(LengthsFile, SkipsBlankLinesAndSurroundingWhitespace) {
  TempDir dir;
  EXPECT_EQ(read_lengths_file(dir.write("b.csv", "\n100\n\n   \n 200 \n\t300\n\n")),
            (std::vector<int64_t>{100, 200, 300}));
  EXPECT_EQ(read_lengths_file(dir.write("crlf.csv", "len\r\n10\r\n20\r\n")),
            (std::vector<int64_t>{10, 20}));
}

TEST(LengthsFile, LargeValues) {
  TempDir dir;
  EXPECT_EQ(read_lengths_file(dir.write("big.csv", "1\n4294967296\n")),
            (std::vector<int64_t>{1, 4294967296}));
}

TEST(LengthsFile, ErrorsNameFileAndLine) {
  TempDir dir;
  struct Case {
    const char* content;
    const char* line;  // expected "file:line" suffix
    const char* extra;
  };
  const std::vector<Case> cases = {
      {"100\nabc\n", ":2", "abc"},       // a non-integer after the data started
      {"100\n0\n", ":2", "0"},           // zero
      {"100\n-5\n", ":2", "-5"},         // negative
      {"100\n12abc\n", ":2", "12abc"},   // trailing garbage
      {"12abc\n100\n", ":1", "12abc"},   // numeric-looking first line is not a header
      {"-3\n", ":1", "-3"},              // negative first line is not a header
      {"100\n1.5\n", ":2", "1.5"},       // not an integer
      {"100\n\n\nx\n", ":4", "x"},       // line numbers count blank lines
      {"len\nlen2\n5\n", ":2", "len2"},  // only one header line
      {"7\n8 9\n", ":2", "8 9"},         // two values on a line
      {"1\n99999999999999999999\n", ":2", "99999999999999999999"},  // out of range
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    const std::string path = dir.write("bad" + std::to_string(i) + ".csv", cases[i].content);
    SCOPED_TRACE(cases[i].content);
    expect_throw_with<InvalidArgument>([&] { read_lengths_file(path); },
                                       {path + cases[i].line, cases[i].extra});
  }
}

TEST(LengthsFile, EmptyOrHeaderOnlyFileIsAnError) {
  TempDir dir;
  for (const char* content : {"", "\n\n  \n", "seq_len\n"}) {
    const std::string path = dir.write("empty.csv", content);
    expect_throw_with<InvalidArgument>([&] { read_lengths_file(path); }, {path});
  }
}

TEST(LengthsFile, MissingFileIsAnError) {
  TempDir dir;
  const std::string path = (dir.path() / "nope.csv").string();
  expect_throw_with<InvalidArgument>([&] { read_lengths_file(path); }, {path});
}

// ---------------------------------------------------------------------------------------------
// JSONL

TEST(JsonlDataset, InputIdsOnly) {
  TempDir dir;
  const std::string path =
      dir.write("d.jsonl", "{\"input_ids\":[5,6,7]}\n{\"input_ids\":[9]}\n{\"input_ids\":[0,1]}\n");
  const auto d = load_jsonl_dataset(path);
  ASSERT_EQ(d->size(), 3);
  EXPECT_EQ(d->length(0), 3);
  EXPECT_EQ(d->length(1), 1);
  EXPECT_EQ(d->length(2), 2);
  const Sample s = d->sample(0);
  EXPECT_EQ(s.id, 0);
  EXPECT_EQ(s.input_ids, (std::vector<int64_t>{5, 6, 7}));
  EXPECT_TRUE(s.loss_mask.empty());
  EXPECT_TRUE(s.labels.empty());
  EXPECT_FALSE(s.labels_shifted);
  EXPECT_EQ(d->sample(2).id, 2);
  EXPECT_EQ(d->sample(2).input_ids, (std::vector<int64_t>{0, 1}));
  const std::string text = d->describe();
  EXPECT_NE(text.find(path), std::string::npos) << text;
  EXPECT_NE(text.find('3'), std::string::npos) << text;
}

TEST(JsonlDataset, WithLossMask) {
  TempDir dir;
  const auto d = load_jsonl_dataset(dir.write("m.jsonl",
                                              "{\"input_ids\":[1,2,3,4],\"loss_mask\":[0,0,1,1]}\n"
                                              "{\"loss_mask\":[true,false],\"input_ids\":[8,9]}\n"
                                              "{\"input_ids\":[3,3],\"loss_mask\":[1.0,0.0]}\n"));
  ASSERT_EQ(d->size(), 3);
  EXPECT_EQ(d->sample(0).loss_mask, (std::vector<float>{0, 0, 1, 1}));
  EXPECT_EQ(d->sample(1).loss_mask, (std::vector<float>{1, 0}));
  EXPECT_EQ(d->sample(2).loss_mask, (std::vector<float>{1, 0}));
  EXPECT_TRUE(d->sample(0).labels.empty());
}

TEST(JsonlDataset, WithLabels) {
  TempDir dir;
  const std::string path =
      dir.write("l.jsonl", "{\"input_ids\":[10,11,12,13],\"labels\":[-100,-100,12,13]}\n");
  const auto d = load_jsonl_dataset(path);
  const Sample s = d->sample(0);
  EXPECT_EQ(s.labels, (std::vector<int64_t>{-100, -100, 12, 13}));
  EXPECT_TRUE(s.loss_mask.empty());
  EXPECT_FALSE(s.labels_shifted);
  JsonlOptions shifted;
  shifted.labels_shifted = true;
  EXPECT_TRUE(load_jsonl_dataset(path, shifted)->sample(0).labels_shifted);
}

TEST(JsonlDataset, SkipsBlankLinesAndNumbersSamplesDensely) {
  TempDir dir;
  const auto d = load_jsonl_dataset(
      dir.write("b.jsonl", "\n{\"input_ids\":[1]}\n   \n\n{\"input_ids\":[2,2]}\n\n"));
  ASSERT_EQ(d->size(), 2);
  EXPECT_EQ(d->sample(1).id, 1);
  EXPECT_EQ(d->sample(1).input_ids, (std::vector<int64_t>{2, 2}));
}

TEST(JsonlDataset, IgnoreUnknownKeys) {
  TempDir dir;
  const std::string path = dir.write("u.jsonl",
                                     "{\"input_ids\":[1,2],\"text\":\"hello\"}\n"
                                     "{\"input_ids\":[3],\"meta\":{\"a\":1},\"text\":\"x\"}\n");
  expect_throw_with<InvalidArgument>([&] { load_jsonl_dataset(path); },
                                     {path + ":1", "unknown key \"text\""});
  JsonlOptions o;
  o.ignore_unknown_keys = true;
  const auto d = load_jsonl_dataset(path, o);
  ASSERT_EQ(d->size(), 2);
  EXPECT_EQ(d->sample(0).input_ids, (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(d->sample(1).input_ids, (std::vector<int64_t>{3}));
}

TEST(JsonlDataset, IndexOutOfRange) {
  TempDir dir;
  const auto d = load_jsonl_dataset(dir.write("o.jsonl", "{\"input_ids\":[1]}\n"));
  expect_throw_with<InvalidArgument>([&] { d->length(1); }, {"1"});
  expect_throw_with<InvalidArgument>([&] { d->sample(-1); }, {"-1"});
}

struct BadJsonl {
  const char* name;
  const char* second_line;  // line 1 is always valid
  std::vector<std::string> needles;
};

void PrintTo(const BadJsonl& c, std::ostream* os) {
  *os << c.name << ": " << c.second_line;
}

class JsonlErrors : public ::testing::TestWithParam<BadJsonl> {};

TEST_P(JsonlErrors, ThrowsNamingFileAndLine) {
  const BadJsonl& p = GetParam();
  TempDir dir;
  const std::string path =
      dir.write("bad.jsonl", std::string("{\"input_ids\":[1,2,3]}\n") + p.second_line + "\n");
  std::vector<std::string> needles = p.needles;
  needles.push_back(path + ":2");
  std::string message;
  try {
    load_jsonl_dataset(path);
    ADD_FAILURE() << p.name << ": expected InvalidArgument";
  } catch (const InvalidArgument& e) {
    message = e.what();
  }
  for (const std::string& needle : needles) {
    EXPECT_NE(message.find(needle), std::string::npos)
        << p.name << ": message \"" << message << "\" does not mention \"" << needle << "\"";
  }
}

INSTANTIATE_TEST_SUITE_P(
    JsonlBad, JsonlErrors,
    ::testing::Values(
        BadJsonl{"broken_json", R"({"input_ids":[1,2)", {"JSON"}},
        BadJsonl{"trailing_garbage", R"({"input_ids":[1,2]} x)", {"JSON"}},
        BadJsonl{"not_object", "[1,2,3]", {"object"}}, BadJsonl{"number_line", "17", {"object"}},
        BadJsonl{"missing_input_ids", R"({"loss_mask":[1,1]})", {"input_ids"}},
        BadJsonl{"empty_input_ids", R"({"input_ids":[]})", {"input_ids", "empty"}},
        BadJsonl{"input_ids_not_list", R"({"input_ids":5})", {"input_ids"}},
        BadJsonl{"string_token", R"({"input_ids":[1,"2",3]})", {"input_ids", "[1]"}},
        BadJsonl{"float_token", R"({"input_ids":[1,2.5]})", {"input_ids", "[1]"}},
        BadJsonl{"integral_float_token", R"({"input_ids":[1,2.0]})", {"input_ids"}},
        BadJsonl{"null_token", R"({"input_ids":[null]})", {"input_ids"}},
        BadJsonl{"negative_token", R"({"input_ids":[1,-4]})", {"input_ids", "-4"}},
        BadJsonl{"short_loss_mask",
                 R"({"input_ids":[1,2,3],"loss_mask":[1,1]})",
                 {"loss_mask", "2", "3"}},
        BadJsonl{"long_loss_mask", R"({"input_ids":[1,2],"loss_mask":[1,1,0]})", {"loss_mask"}},
        BadJsonl{"empty_loss_mask", R"({"input_ids":[1,2],"loss_mask":[]})", {"loss_mask"}},
        BadJsonl{"loss_mask_value", R"({"input_ids":[1,2],"loss_mask":[1,2]})", {"loss_mask"}},
        BadJsonl{"loss_mask_string", R"({"input_ids":[1,2],"loss_mask":["1",0]})", {"loss_mask"}},
        BadJsonl{"short_labels", R"({"input_ids":[1,2,3],"labels":[1]})", {"labels"}},
        BadJsonl{"empty_labels", R"({"input_ids":[1,2,3],"labels":[]})", {"labels"}},
        BadJsonl{"float_label", R"({"input_ids":[1,2],"labels":[1,0.5]})", {"labels"}},
        BadJsonl{
            "bad_negative_label", R"({"input_ids":[1,2],"labels":[-100,-5]})", {"labels", "-5"}},
        BadJsonl{"both_mask_and_labels",
                 R"({"input_ids":[1,2],"loss_mask":[0,1],"labels":[-100,2]})",
                 {"loss_mask", "labels"}},
        BadJsonl{"both_with_empty_mask",
                 R"({"input_ids":[1,2],"loss_mask":[],"labels":[1,2]})",
                 {"loss_mask"}},
        BadJsonl{"unknown_key",
                 R"({"input_ids":[1,2],"attention_mask":[1,1]})",
                 {"attention_mask", "ignore_unknown_keys"}}),
    [](const ::testing::TestParamInfo<BadJsonl>& info) { return std::string(info.param.name); });

TEST(JsonlDataset, EmptyFileIsAnError) {
  TempDir dir;
  for (const char* content : {"", "\n  \n\n"}) {
    const std::string path = dir.write("e.jsonl", content);
    expect_throw_with<InvalidArgument>([&] { load_jsonl_dataset(path); }, {path});
  }
}

TEST(JsonlDataset, MissingFileIsAnError) {
  TempDir dir;
  const std::string path = (dir.path() / "missing.jsonl").string();
  expect_throw_with<InvalidArgument>([&] { load_jsonl_dataset(path); }, {path});
}

TEST(JsonlDataset, ErrorOnFirstLineAfterBlankLines) {
  TempDir dir;
  const std::string path = dir.write("f.jsonl", "\n\n{\"input_ids\":[-1]}\n");
  expect_throw_with<InvalidArgument>([&] { load_jsonl_dataset(path); }, {path + ":3"});
}

}  // namespace
}  // namespace thdpack
