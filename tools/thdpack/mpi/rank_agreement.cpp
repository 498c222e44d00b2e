#include "mpi/rank_agreement.hpp"

#include <algorithm>
#include <cstdio>
#include <span>

#include "thdpack/comm/agreement.hpp"
#include "thdpack/core/errors.hpp"
#include "thdpack/core/hash64.hpp"

namespace thdpack::cli {
namespace {

// Lines "code error" then "name\tvalue" per option; names and values never hold '\n'.
std::string encode(const RankSetup& setup) {
  std::string error = setup.error;
  for (char& c : error) c = c == '\n' ? ' ' : c;
  std::string out = std::to_string(setup.code) + " " + error + "\n";
  for (const auto& [name, value] : setup.options) out += name + "\t" + value + "\n";
  return out;
}

RankSetup decode(const std::string& text) {
  RankSetup setup;
  size_t line_end = text.find('\n');
  const std::string head = text.substr(0, line_end);
  const size_t space = head.find(' ');
  setup.code = std::stoi(head.substr(0, space));
  setup.error = space == std::string::npos ? "" : head.substr(space + 1);
  while (line_end != std::string::npos && line_end + 1 < text.size()) {
    const size_t next = text.find('\n', line_end + 1);
    const std::string line = text.substr(line_end + 1, next - line_end - 1);
    const size_t tab = line.find('\t');
    setup.options.emplace_back(line.substr(0, tab), line.substr(tab + 1));
    line_end = next;
  }
  return setup;
}

}  // namespace

void agree_across_ranks(Communicator& world, const RankSetup& mine) {
  const std::vector<std::string> texts = allgather_strings(world, encode(mine));
  std::vector<RankSetup> setups;
  for (const std::string& text : texts) setups.push_back(decode(text));
  for (size_t r = 0; r < setups.size(); ++r) {
    if (setups[r].code == 0) continue;
    const std::string error = message("rank ", r, ": ", setups[r].error);
    if (setups[r].code == 2) throw InvalidArgument(error);
    throw Error(error);
  }
  std::vector<std::vector<AgreedValue>> options;
  for (const RankSetup& setup : setups) {
    options.emplace_back();
    for (const auto& [name, value] : setup.options) options.back().push_back({name, value});
  }
  require_agreement(options, "",
                    "; every rank must be given the same options and data, as they decide which "
                    "samples each step reads");
}

std::string dataset_fingerprint(const Dataset& dataset, int64_t probes) {
  const int64_t n = dataset.size();
  Hash64 h;
  h.add(n);
  const int64_t count = std::min(n, probes);
  for (int64_t k = 0; k < count; ++k) {
    const int64_t i = count > 1 ? (n - 1) / (count - 1) * k : 0;
    const Sample s = dataset.sample(i);
    h.add_all(std::span<const int64_t>(s.input_ids))
        .add_all(std::span<const float>(s.loss_mask))
        .add_all(std::span<const int64_t>(s.labels));
  }
  char text[17];
  std::snprintf(text, sizeof text, "%016llx", static_cast<unsigned long long>(h.digest()));
  return std::to_string(n) + " samples, digest " + text;
}

}  // namespace thdpack::cli
