// Fuzz target: the mock dataset config JSON parser (parse_mock_config), and the lengths and tokens
// of the mock dataset it configures. InvalidArgument is an expected outcome; anything else is a
// finding.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>

#include "fuzz_check.hpp"
#include "thdpack/core/dataset.hpp"
#include "thdpack/core/errors.hpp"
#include "thdpack/data/mock_dataset.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using thdpack::MockConfig;
  const std::string text(reinterpret_cast<const char*>(data), size);
  MockConfig c;
  try {
    c = thdpack::parse_mock_config(text, "/base", "fuzz.json");
  } catch (const thdpack::InvalidArgument& e) {
    const std::string message = e.what();
    FUZZ_CHECK(message.size() <= thdpack::fuzz::kLongestMessage);
    FUZZ_CHECK(message.find("mock dataset config 'fuzz.json'") != std::string::npos);
    return 0;
  }
  thdpack::fuzz::expect_accepted([&] { thdpack::validate(c); }, "validate(parsed config)");
  // to_json round-trips.
  const std::string json = thdpack::to_json(c);
  MockConfig again;
  thdpack::fuzz::expect_accepted([&] { again = thdpack::parse_mock_config(json); },
                                 "parse_mock_config(to_json(config))");
  FUZZ_CHECK(thdpack::to_json(again) == json);
  if (c.mode == MockConfig::Mode::kFile) {
    FUZZ_CHECK(!c.path.empty());
    return 0;  // reading files named by fuzz input is not this target's business
  }
  const auto dataset = thdpack::make_mock_dataset(c);
  FUZZ_CHECK(dataset->size() == c.size);
  for (int64_t i : {int64_t{0}, int64_t{1}, int64_t{2}, c.size / 2, c.size - 1}) {
    if (i < 0 || i >= c.size) continue;
    const int64_t len = dataset->length(i);
    FUZZ_CHECK(len >= c.min_seq_len && len <= c.max_seq_len);
    if (c.type == thdpack::LengthDistributionType::kBimodal) {
      FUZZ_CHECK((len >= c.short_min && len <= c.short_max) ||
                 (len >= c.long_min && len <= c.long_max));
    }
    FUZZ_CHECK(dataset->length(i) == len);  // deterministic
    if (len <= 4096) {
      const thdpack::Sample s = dataset->sample(i);
      FUZZ_CHECK(static_cast<int64_t>(s.input_ids.size()) == len);
      FUZZ_CHECK(s.input_ids.back() == thdpack::MockContent{}.eod_id);
    }
  }
  return 0;
}
