// Fuzz target: the JSONL line parser (detail::parse_jsonl_line, what load_jsonl_dataset runs on
// every line), its agreement with the document reader it falls back to, and pack_samples on what
// it accepts. InvalidArgument is an expected outcome; a
// crash, a sanitizer report, another exception or a failed check is a finding.

#include <cstddef>
#include <cstdint>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "data/readers.hpp"
#include "fuzz_check.hpp"
#include "thdpack/core/errors.hpp"
#include "thdpack/data/jsonl_dataset.hpp"
#include "thdpack/packing/packed_batch.hpp"

namespace {

using nlohmann::json;
using thdpack::InvalidArgument;
using thdpack::JsonlOptions;
using thdpack::Sample;

// An accepted sample holds exactly the values of its line: nothing wrapped or rounded.
void check_sample(const Sample& s, const std::string& line, const JsonlOptions& options,
                  int64_t id) {
  FUZZ_CHECK(s.id == id);
  FUZZ_CHECK(!s.input_ids.empty());
  FUZZ_CHECK(s.labels_shifted == options.labels_shifted);
  FUZZ_CHECK(s.loss_mask.empty() || s.loss_mask.size() == s.input_ids.size());
  FUZZ_CHECK(s.labels.empty() || s.labels.size() == s.input_ids.size());
  const json object = json::parse(line);  // accepted, so valid JSON
  const json& ids = object.at("input_ids");
  FUZZ_CHECK(ids.size() == s.input_ids.size());
  for (size_t i = 0; i < ids.size(); ++i) {
    FUZZ_CHECK(s.input_ids[i] >= 0);
    FUZZ_CHECK(ids[i].dump() == std::to_string(s.input_ids[i]));
  }
  if (object.contains("labels")) {
    const json& labels = object.at("labels");
    FUZZ_CHECK(labels.size() == s.labels.size());
    for (size_t i = 0; i < labels.size(); ++i) {
      FUZZ_CHECK(s.labels[i] >= 0 || s.labels[i] == -100);
      FUZZ_CHECK(labels[i].dump() == std::to_string(s.labels[i]));
    }
  }
  if (object.contains("loss_mask")) {
    FUZZ_CHECK(object.at("loss_mask").size() == s.loss_mask.size());
    FUZZ_CHECK(!object.contains("labels"));
    for (float m : s.loss_mask) FUZZ_CHECK(m == 0.0f || m == 1.0f);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::istringstream in(std::string(reinterpret_cast<const char*>(data), size));
  std::string line;
  for (int64_t line_no = 1; std::getline(in, line); ++line_no) {
    JsonlOptions options;
    options.ignore_unknown_keys = line_no % 2 == 0;
    options.labels_shifted = line_no % 3 == 0;
    Sample s;
    try {
      s = thdpack::detail::parse_jsonl_line(line, line_no - 1, options,
                                            "fuzz.jsonl:" + std::to_string(line_no));
    } catch (const InvalidArgument& e) {
      FUZZ_CHECK(std::string(e.what()).size() <= thdpack::fuzz::kLongestMessage);
      continue;
    }
    // Accepted text has no NUL (nlohmann would end the text there) and no key twice (strict
    // parsing of the same bytes keeps what was accepted).
    FUZZ_CHECK(line.find('\0') == std::string::npos);
    check_sample(s, line, options, line_no - 1);
    // The event reader that accepted it agrees with the document reader, value for value.
    Sample document;
    try {
      document = thdpack::detail::parse_jsonl_document(line, line_no - 1, options, "fuzz.jsonl");
    } catch (const InvalidArgument&) {
      FUZZ_CHECK(false);
    }
    FUZZ_CHECK(document.input_ids == s.input_ids);
    FUZZ_CHECK(document.labels == s.labels);
    FUZZ_CHECK(document.loss_mask == s.loss_mask);
    // What the reader accepts, the packer packs: one sample alone, padded.
    thdpack::PackOptions pack;
    pack.divisor = 1 + line_no % 4;
    const thdpack::SampleView view = thdpack::view_of(s);
    const thdpack::PackedBatch batch = thdpack::pack_samples({&view, 1}, pack);
    thdpack::check_pack_invariants(batch.view(), pack);
    FUZZ_CHECK(batch.cu_seqlens.back() == static_cast<int32_t>(s.input_ids.size()));
  }
  return 0;
}
