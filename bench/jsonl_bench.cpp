// Reading JSONL (what `thdpack plan --jsonl` and `thdpack pack --jsonl` do first): the reader,
// simdjson per line behind the strict checks, against the reader it replaced (jsonl_baseline.cpp:
// byte-by-byte lines, nlohmann's SAX parser), both in this process on the same files. The files
// are generated here from fixed seeds, SFT-like: a few hundred to several thousand token ids per
// line, with and without a loss mask or labels, written compactly or as Python's json.dumps does.
// Each file is read `--reps` times by each reader, alternating; per file the median MB/s of each
// and their ratio, then the worst file. Both readers must give the same samples. MB/s are per core:
// bytes over the reading thread's CPU time (user and system, the reads from the page cache
// included), which a busy machine disturbs far less than wall time; wall-time figures come too.
//
//   thdpack_jsonl_bench [--quick] [--reps N] [--out jsonl.json] [--dir /tmp]

#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "jsonl_baseline.hpp"
#include "thdpack/data/jsonl_dataset.hpp"

namespace {

using Clock = std::chrono::steady_clock;

// This thread's CPU time in seconds.
double cpu_seconds() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_nsec) * 1e-9;
}

// MB/s per core and by the wall clock of one read.
struct Rate {
  double cpu = 0, wall = 0;
};

template <class Read>
Rate timed(double mb, Read read) {
  const auto wall0 = Clock::now();
  const double cpu0 = cpu_seconds();
  read();
  const double cpu = cpu_seconds() - cpu0;
  return {mb / cpu, mb / std::chrono::duration<double>(Clock::now() - wall0).count()};
}

struct FileSpec {
  std::string name;
  uint64_t seed;
  int64_t min_ids, max_ids;
  const char* extra;  // "", "loss_mask" or "labels"
  bool spaced;        // ", " and ": " as Python's json.dumps writes them
};

// About `bytes` of JSONL lines of `spec`.
std::string generate(const FileSpec& spec, size_t bytes) {
  std::mt19937_64 rng(spec.seed);
  std::uniform_int_distribution<int64_t> length(spec.min_ids, spec.max_ids);
  std::uniform_int_distribution<int64_t> token(0, 151935);  // a Qwen-sized vocabulary
  const std::string comma = spec.spaced ? ", " : ",";
  const std::string colon = spec.spaced ? ": " : ":";
  std::string text;
  text.reserve(bytes + (size_t{1} << 20));
  while (text.size() < bytes) {
    const int64_t n = length(rng);
    const int64_t prompt = n / 4;  // the prompt part: masked out
    text += "{\"input_ids\"" + colon + "[";
    std::vector<int64_t> ids(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) {
      ids[static_cast<size_t>(i)] = token(rng);
      if (i > 0) text += comma;
      text += std::to_string(ids[static_cast<size_t>(i)]);
    }
    text += "]";
    if (std::string(spec.extra) == "loss_mask") {
      text += comma + "\"loss_mask\"" + colon + "[";
      for (int64_t i = 0; i < n; ++i) text += (i > 0 ? comma : "") + (i < prompt ? "0" : "1");
      text += "]";
    } else if (std::string(spec.extra) == "labels") {
      text += comma + "\"labels\"" + colon + "[";
      for (int64_t i = 0; i < n; ++i) {
        text += (i > 0 ? comma : "") +
                (i < prompt ? std::string("-100") : std::to_string(ids[static_cast<size_t>(i)]));
      }
      text += "]";
    }
    text += "}\n";
  }
  return text;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

bool same(const thdpack::Dataset& d, const std::vector<thdpack::Sample>& old) {
  if (d.size() != static_cast<int64_t>(old.size())) return false;
  for (int64_t i = 0; i < d.size(); ++i) {
    const thdpack::Sample s = d.sample(i);
    const thdpack::Sample& o = old[static_cast<size_t>(i)];
    if (s.input_ids != o.input_ids || s.labels != o.labels || s.loss_mask != o.loss_mask) {
      return false;
    }
  }
  return true;
}

// One seeded file written to `dir`, read `reps` times by each reader (alternating), and removed:
// its figures as the result JSON holds them, or nothing when the readers return different samples.
std::optional<nlohmann::json> measure_file(const FileSpec& spec, size_t bytes, int reps,
                                           const std::string& dir) {
  const std::string text = generate(spec, bytes);
  const std::string path =
      (std::filesystem::path(dir) / ("thdpack_jsonl_bench_" + std::to_string(spec.seed) + ".jsonl"))
          .string();
  std::ofstream(path, std::ios::binary)
      .write(text.data(), static_cast<std::streamsize>(text.size()));
  const double mb = static_cast<double>(text.size()) / 1e6;
  std::vector<double> old_rate, new_rate, old_wall, new_wall;
  const thdpack::JsonlOptions options;
  for (int r = 0; r < reps; ++r) {
    // Alternate which reader goes first, so neither always finds the warmer cache. What a read
    // returns is freed after its timing.
    for (int turn = 0; turn < 2; ++turn) {
      if ((turn == 0) == (r % 2 == 0)) {
        std::unique_ptr<thdpack::Dataset> dataset;
        const Rate rate = timed(mb, [&] { dataset = thdpack::load_jsonl_dataset(path, options); });
        new_rate.push_back(rate.cpu);
        new_wall.push_back(rate.wall);
        if (r == 0 && !same(*dataset, thdpack::bench::baseline_load_jsonl(path, options))) {
          std::fprintf(stderr, "the readers disagree on %s\n", path.c_str());
          return std::nullopt;
        }
      } else {
        std::vector<thdpack::Sample> samples;
        const Rate rate =
            timed(mb, [&] { samples = thdpack::bench::baseline_load_jsonl(path, options); });
        old_rate.push_back(rate.cpu);
        old_wall.push_back(rate.wall);
      }
    }
  }
  std::filesystem::remove(path);
  const double old_mbs = median(old_rate), new_mbs = median(new_rate);
  const double ratio = new_mbs / old_mbs;
  std::printf("%-50s %9.1f %12.1f %12.1f %6.2fx\n", spec.name.c_str(), mb, old_mbs, new_mbs, ratio);
  return nlohmann::json{{"file", spec.name},
                        {"bytes", text.size()},
                        {"reps", reps},
                        {"old_mb_per_s", old_rate},
                        {"new_mb_per_s", new_rate},
                        {"old_wall_mb_per_s", old_wall},
                        {"new_wall_mb_per_s", new_wall},
                        {"old_median_wall_mb_per_s", median(old_wall)},
                        {"new_median_wall_mb_per_s", median(new_wall)},
                        {"old_median_mb_per_s", old_mbs},
                        {"new_median_mb_per_s", new_mbs},
                        {"ratio", ratio}};
}

}  // namespace

int main(int argc, char** argv) {
  bool quick = false;
  int reps = 7;
  std::string out, dir = std::filesystem::temp_directory_path().string();
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--quick") {
      quick = true;
    } else if (a == "--reps" && i + 1 < argc) {
      reps = std::max(1, std::atoi(argv[++i]));
    } else if (a == "--out" && i + 1 < argc) {
      out = argv[++i];
    } else if (a == "--dir" && i + 1 < argc) {
      dir = argv[++i];
    } else {
      std::fprintf(stderr,
                   "usage: thdpack_jsonl_bench [--quick] [--reps N] [--out FILE] [--dir DIR]\n");
      return 2;
    }
  }
  if (quick) reps = 1;
  const size_t bytes = quick ? size_t{1} << 18 : size_t{30} << 20;
  const std::vector<FileSpec> specs = {
      {"sft ids only, 200-4000 ids", 1, 200, 4000, "", false},
      {"sft + loss_mask, 200-4000 ids", 2, 200, 4000, "loss_mask", false},
      {"sft + labels, 500-8000 ids, json.dumps spacing", 3, 500, 8000, "labels", true},
      {"sft + loss_mask, 300-2000 ids, json.dumps spacing", 4, 300, 2000, "loss_mask", true},
  };

  nlohmann::json files = nlohmann::json::array();
  double worst_new = 1e300, worst_ratio = 1e300, total_bytes = 0;
  std::printf("%-50s %9s %12s %12s %7s   (MB/s per core: bytes over CPU time)\n", "file", "MB",
              "old MB/s", "new MB/s", "ratio");
  for (const FileSpec& spec : specs) {
    const std::optional<nlohmann::json> file = measure_file(spec, bytes, reps, dir);
    if (!file) return 1;
    total_bytes += (*file)["bytes"].get<double>();
    worst_new = std::min(worst_new, (*file)["new_median_mb_per_s"].get<double>());
    worst_ratio = std::min(worst_ratio, (*file)["ratio"].get<double>());
    files.push_back(*file);
  }
  std::printf("worst file: new %.1f MB/s, ratio %.2fx (%.0f MB in all)\n", worst_new, worst_ratio,
              total_bytes / 1e6);
  if (!out.empty()) {
    const nlohmann::json result = {{"files", files},
                                   {"worst_new_mb_per_s", worst_new},
                                   {"worst_ratio", worst_ratio},
                                   {"quick", quick}};
    std::ofstream(out) << result.dump(2) << "\n";
  }
  return 0;
}
