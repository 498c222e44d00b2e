// Offline packing from Megatron indexed datasets (the pack issue's benchmark): end to end
// (open the index, read lengths from it, pack, write the pack file) at 10k, 1M and, with --huge,
// 100M samples; against first-fit and best-fit decreasing implemented plainly in this file; fill
// against the L1/L2 bounds. Lengths follow the longtail-32k workload, capacity 32768.
//
//   thdpack_pack_bench [--huge] [--out pack.json] [--dir /tmp]

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "thdpack/data/indexed_dataset.hpp"
#include "thdpack/data/mock_dataset.hpp"
#include "thdpack/data/pack_file.hpp"
#include "thdpack/data/workloads.hpp"
#include "thdpack/packing/offline_packing.hpp"

namespace {

using Clock = std::chrono::steady_clock;
constexpr int64_t kCapacity = 32768;

double since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// Plain first-fit decreasing: sort, then scan the open bins in order (O(n * bins)).
int64_t plain_ffd(std::vector<int64_t> lengths) {
  std::sort(lengths.begin(), lengths.end(), std::greater<>());
  std::vector<int64_t> room;
  for (int64_t len : lengths) {
    auto it = std::find_if(room.begin(), room.end(), [len](int64_t r) { return r >= len; });
    if (it == room.end()) {
      room.push_back(kCapacity - len);
    } else {
      *it -= len;
    }
  }
  return static_cast<int64_t>(room.size());
}

// Plain best-fit decreasing: sort, then the bin with the least room that fits, from a multimap.
int64_t plain_bfd(std::vector<int64_t> lengths) {
  std::sort(lengths.begin(), lengths.end(), std::greater<>());
  std::multimap<int64_t, int64_t> room;  // room -> bin
  int64_t bins = 0;
  for (int64_t len : lengths) {
    auto it = room.lower_bound(len);
    if (it == room.end()) {
      room.emplace(kCapacity - len, bins++);
    } else {
      const int64_t left = it->first - len;
      const int64_t bin = it->second;
      room.erase(it);
      room.emplace(left, bin);
    }
  }
  return bins;
}

nlohmann::json run_size(int64_t n, const std::filesystem::path& dir, bool plain) {
  thdpack::MockConfig config = thdpack::workload("longtail-32k").dataset;
  config.size = n;
  const std::string prefix = (dir / ("pack_bench_" + std::to_string(n))).string();
  {
    const auto dataset = thdpack::make_mock_dataset(config);
    thdpack::IndexedDatasetWriter writer(prefix, thdpack::TokenDType::kInt32);
    for (int64_t i = 0; i < n; ++i) writer.add_length_only(dataset->length(i));
    writer.finish();
  }
  // End to end, as `thdpack pack` runs it.
  const auto start = Clock::now();
  const auto indexed = thdpack::IndexedDataset::open(prefix);
  const auto all = indexed->lengths();
  const std::vector<int64_t> lengths(all.begin(), all.end());
  const double read_seconds = since(start);
  const auto pack_start = Clock::now();
  const thdpack::OfflinePacking packed = thdpack::pack_offline(lengths, {.capacity = kCapacity});
  const double pack_seconds = since(pack_start);
  const auto write_start = Clock::now();
  thdpack::write_pack_file(prefix + ".thdpacks", packed.packs, kCapacity, 1,
                           {"indexed", prefix, n});
  const double write_seconds = since(write_start);
  const double total = since(start);

  nlohmann::json row = {
      {"samples", n},
      {"packs", packed.packs.count()},
      {"l1", packed.lower_bound_l1},
      {"l2", packed.lower_bound_l2},
      {"fill", packed.fill},
      {"over_l2",
       static_cast<double>(packed.packs.count()) / static_cast<double>(packed.lower_bound_l2) - 1},
      {"seconds_total", total},
      {"seconds_open_and_read", read_seconds},
      {"seconds_pack", pack_seconds},
      {"seconds_write", write_seconds}};
  const auto ffd_start = Clock::now();
  const int64_t ffd =
      thdpack::pack_offline(
          lengths, {.capacity = kCapacity, .strategy = thdpack::PackStrategy::kFirstFitDecreasing})
          .packs.count();
  row["ffd_packs"] = ffd;
  row["ffd_seconds"] = since(ffd_start);
  if (plain) {
    const auto t1 = Clock::now();
    row["plain_bfd_packs"] = plain_bfd(lengths);
    row["plain_bfd_seconds"] = since(t1);
    if (n <= 100'000) {
      const auto t2 = Clock::now();
      row["plain_ffd_packs"] = plain_ffd(lengths);
      row["plain_ffd_seconds"] = since(t2);
    }
  }
  for (const char* ext : {".bin", ".idx", ".thdpacks"}) std::filesystem::remove(prefix + ext);
  std::printf(
      "%11lld samples: %9lld packs (L2 %9lld, +%.4f%%), fill %.3f%%, end to end %.3f s "
      "(pack %.3f s)\n",
      static_cast<long long>(n), static_cast<long long>(packed.packs.count()),
      static_cast<long long>(packed.lower_bound_l2), 100 * row["over_l2"].get<double>(),
      100 * packed.fill, total, pack_seconds);
  std::fflush(stdout);
  return row;
}

}  // namespace

int main(int argc, char** argv) {
  bool huge = false;
  std::string out, dir = std::filesystem::temp_directory_path().string();
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--huge") {
      huge = true;
    } else if (a == "--out" && i + 1 < argc) {
      out = argv[++i];
    } else if (a == "--dir" && i + 1 < argc) {
      dir = argv[++i];
    } else {
      std::fprintf(stderr, "usage: thdpack_pack_bench [--huge] [--out FILE] [--dir DIR]\n");
      return 2;
    }
  }
  nlohmann::json rows = nlohmann::json::array();
  rows.push_back(run_size(10'000, dir, true));
  rows.push_back(run_size(1'000'000, dir, true));
  if (huge) rows.push_back(run_size(100'000'000, dir, false));
  if (!out.empty())
    std::ofstream(out) << nlohmann::json{{"capacity", kCapacity}, {"rows", rows}}.dump(2) << '\n';
  return 0;
}
