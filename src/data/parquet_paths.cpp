// Which files a Parquet source is, and how a pack file records it: no Arrow here, so a build
// without Parquet support still names files and specs the same way.

#include <glob.h>

#include <algorithm>
#include <filesystem>
#include <set>

#include <nlohmann/json.hpp>

#include "data/parquet_source.hpp"
#include "thdpack/core/errors.hpp"
#include "thdpack/data/parquet_dataset.hpp"

namespace thdpack {
namespace {

namespace fs = std::filesystem;

bool has_glob_characters(const std::string& path) {
  return path.find_first_of("*?[") != std::string::npos;
}

// glob(3): sorted matches; a pattern that matches nothing is an error naming it.
std::vector<std::string> glob_matches(const std::string& pattern) {
  glob_t found{};
  const int rc = ::glob(pattern.c_str(), GLOB_ERR, nullptr, &found);
  std::vector<std::string> out;
  for (size_t i = 0; rc == 0 && i < found.gl_pathc; ++i) out.emplace_back(found.gl_pathv[i]);
  ::globfree(&found);
  check(rc == 0 || rc == GLOB_NOMATCH, "Parquet path '", pattern, "': cannot read its folders");
  check(!out.empty(), "Parquet path '", pattern, "' matches no file");
  return out;  // glob sorts its matches
}

std::vector<std::string> parquet_files_in(const std::string& folder) {
  std::vector<std::string> out;
  std::error_code error;
  for (const auto& entry : fs::directory_iterator(folder, error)) {
    if (entry.path().extension() == ".parquet") out.push_back(entry.path().string());
  }
  check(!error, "Parquet folder '", folder, "' cannot be read: ", error.message());
  check(!out.empty(), "Parquet folder '", folder, "' holds no *.parquet file");
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

std::vector<std::string> expand_parquet_paths(const std::vector<std::string>& paths) {
  check(!paths.empty(), "no Parquet path given");
  std::vector<std::string> files;
  for (const std::string& path : paths) {
    std::vector<std::string> some;
    if (has_glob_characters(path) && !fs::exists(path)) {
      some = glob_matches(path);
    } else if (fs::is_directory(path)) {
      some = parquet_files_in(path);
    } else {
      check(fs::exists(path), "Parquet path '", path, "' does not exist");
      some = {path};
    }
    files.insert(files.end(), some.begin(), some.end());
  }
  // Named twice (a folder and one of its files): its rows would be two samples each.
  std::set<std::string> seen;
  for (const std::string& f : files) {
    check(seen.insert(fs::weakly_canonical(f).string()).second, "Parquet file '", f,
          "' is named twice among the paths given");
  }
  return files;
}

std::string parquet_source_spec(const std::vector<std::string>& files,
                                const ParquetOptions& options) {
  nlohmann::json spec;
  spec["files"] = nlohmann::json::array();
  for (const std::string& f : files)
    spec["files"].push_back(fs::absolute(f).lexically_normal().string());
  spec["tokens_column"] = options.tokens_column;
  spec["loss_mask_column"] = options.loss_mask_column;
  spec["labels_column"] = options.labels_column;
  spec["labels_shifted"] = options.labels_shifted;
  return spec.dump();
}

}  // namespace thdpack

namespace thdpack::detail {

ParquetSourceSpec parse_parquet_source_spec(const std::string& spec) {
  try {
    const nlohmann::json j = nlohmann::json::parse(spec);
    ParquetSourceSpec out;
    out.files = j.at("files").get<std::vector<std::string>>();
    out.options.tokens_column = j.at("tokens_column").get<std::string>();
    out.options.loss_mask_column = j.at("loss_mask_column").get<std::string>();
    out.options.labels_column = j.at("labels_column").get<std::string>();
    out.options.labels_shifted = j.at("labels_shifted").get<bool>();
    return out;
  } catch (const nlohmann::json::exception& e) {
    fail("not a Parquet source spec (", e.what(), ")");
  }
}

}  // namespace thdpack::detail
