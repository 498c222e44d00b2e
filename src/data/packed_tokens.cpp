#include "data/packed_tokens.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <limits>

#include "core/ordered_parallel.hpp"
#include "thdpack/core/errors.hpp"
#include "thdpack/packing/packed_batch.hpp"

namespace thdpack::detail {
namespace {

// Tokens whose samples are read with one Dataset::samples call (about 12 bytes each in memory).
constexpr int64_t kTokensReadAtOnce = int64_t{1} << 20;

// An unnamed file in `folder` (O_TMPFILE), or where the file system lacks that, a named one
// removed at once: either way nothing is left behind, whatever ends the process.
int unnamed_file(const std::string& folder) {
  const int fd = ::open(folder.c_str(), O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
  if (fd >= 0) return fd;
  std::string name = (std::filesystem::path(folder) / ".thdpack-packed-tokens.XXXXXX").string();
  const int named = ::mkostemp(name.data(), O_CLOEXEC);
  if (named >= 0) ::unlink(name.c_str());
  return named;
}

}  // namespace

PackedTokens::PackedTokens(const Dataset& dataset, const Bins& packs, const std::string& folder) {
  // Where each sample goes: its pack's start plus the samples before it in the pack.
  std::vector<int64_t> place_of(static_cast<size_t>(dataset.size()), -1);
  pack_starts_.push_back(0);
  for (int64_t p = 0; p < packs.count(); ++p) {
    int64_t at = pack_starts_.back();
    for (const int64_t id : packs.bin(p)) {
      place_of[static_cast<size_t>(id)] = at;
      at += dataset.length(id);
    }
    pack_starts_.push_back(at);
  }
  map(folder, pack_starts_.back());
  // The source in consecutive parts read side by side, each in batches in index order: the
  // error a caller sees is the one of the lowest sample index, as one pass would meet it.
  const int64_t size = dataset.size();
  const int64_t parts = std::min<int64_t>(reading_threads(), std::max<int64_t>(size, 1));
  ordered_parallel_map<bool>(static_cast<size_t>(parts), static_cast<unsigned>(parts),
                             [&](size_t part) {
                               const auto k = static_cast<int64_t>(part);
                               fill(dataset, place_of, size * k / parts, size * (k + 1) / parts);
                               return true;
                             });
}

void PackedTokens::fill(const Dataset& dataset, const std::vector<int64_t>& place_of, int64_t first,
                        int64_t last) {
  std::vector<int64_t> batch;
  int64_t batch_tokens = 0;
  const auto read_batch = [&] {
    const std::vector<Sample> samples = dataset.samples(batch);
    std::vector<SampleView> views;
    views.reserve(samples.size());
    for (const Sample& sample : samples) views.push_back(view_of(sample));
    // pack_samples owns the label conventions: position j's target and weight. One row of the
    // whole batch, without padding, gives each sample's positions as a pack of it alone would.
    const PackedBatch row = pack_samples(views, PackOptions{});
    int64_t at = 0;
    for (size_t k = 0; k < batch.size(); ++k) {
      place(samples[k], row, at, place_of[static_cast<size_t>(batch[k])], dataset);
      at += static_cast<int64_t>(samples[k].input_ids.size());
    }
    batch.clear();
    batch_tokens = 0;
  };
  for (int64_t i = first; i < last; ++i) {
    if (place_of[static_cast<size_t>(i)] < 0) continue;  // in no pack
    batch.push_back(i);
    batch_tokens += dataset.length(i);
    if (batch_tokens >= kTokensReadAtOnce) read_batch();
  }
  if (!batch.empty()) read_batch();
}

PackedTokens::Mapping::~Mapping() {
  if (data != nullptr) ::munmap(data, bytes);
  if (fd >= 0) ::close(fd);
}

void PackedTokens::map(const std::string& folder, int64_t tokens) {
  if (tokens == 0) return;
  const auto bytes = static_cast<size_t>(tokens) * (sizeof(int32_t) + sizeof(int8_t));
  file_.fd = unnamed_file(folder);
  check(file_.fd >= 0, "cannot make a temporary file in '", folder, "' for the packs' ", tokens,
        " tokens: ", std::strerror(errno));
  // Reserved now, so that a full file system is this message, not a fault while writing the map.
  const int reserved = ::posix_fallocate(file_.fd, 0, static_cast<off_t>(bytes));
  check(reserved == 0, "cannot reserve ", bytes, " bytes in '", folder,
        "' for a temporary copy of the packs' tokens (5 bytes a token): ", std::strerror(reserved));
  void* data = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, file_.fd, 0);
  check(data != MAP_FAILED, "cannot map the temporary copy of the packs' tokens in '", folder,
        "': ", std::strerror(errno));
  file_.data = data;
  file_.bytes = bytes;
  tokens_ = static_cast<int32_t*>(data);
  weights_ = reinterpret_cast<int8_t*>(tokens_ + tokens);
}

void PackedTokens::place(const Sample& s, const PackedBatch& row, int64_t from, int64_t at,
                         const Dataset& dataset) {
  const auto n = static_cast<int64_t>(s.input_ids.size());
  for (int64_t j = 0; j < n; ++j) {
    const auto k = static_cast<size_t>(j);
    const auto position = static_cast<size_t>(from + j);
    // `if`, not check(): the message names the sample's place, too slow to build per token.
    if (s.input_ids[k] > std::numeric_limits<int32_t>::max()) {
      fail("sample ", s.id, " (", dataset.locate(s.id), ") has token id ", s.input_ids[k],
           ", past the int32 of Megatron-Bridge's input_ids");
    }
    // The format has no labels: a trained position's target is the next input token.
    const bool trained = row.loss_mask[position] != 0.0f;
    if (trained && !(j + 1 < n && row.labels[position] == s.input_ids[k + 1])) {
      fail("sample ", s.id, " (", dataset.locate(s.id), ") trains position ", j, " on label ",
           row.labels[position],
           ", not its next token; Megatron-Bridge's packed Parquet has no labels column");
    }
    tokens_[at + j] = static_cast<int32_t>(s.input_ids[k]);
    weights_[at + j] = trained ? 1 : 0;
  }
}

}  // namespace thdpack::detail
