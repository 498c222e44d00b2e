// Which files a Parquet source is, and how a pack file records it: no Arrow here, so a build
// without Parquet support still names files and specs the same way.

#include <glob.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <set>

#include <nlohmann/json.hpp>

#include "data/parquet_source.hpp"
#include "thdpack/core/errors.hpp"
#include "thdpack/data/arrow_dataset.hpp"
#include "thdpack/data/parquet_dataset.hpp"

namespace thdpack {
namespace {

namespace fs = std::filesystem;

bool has_glob_characters(const std::string& path) {
  return path.find_first_of("*?[") != std::string::npos;
}

// glob(3): sorted matches; a pattern that matches nothing is an error naming it.
std::vector<std::string> glob_matches(const std::string& pattern, const char* what) {
  glob_t found{};
  const int rc = ::glob(pattern.c_str(), GLOB_ERR, nullptr, &found);
  std::vector<std::string> out;
  for (size_t i = 0; rc == 0 && i < found.gl_pathc; ++i) out.emplace_back(found.gl_pathv[i]);
  ::globfree(&found);
  check(rc == 0 || rc == GLOB_NOMATCH, what, " path '", pattern, "': cannot read its folders");
  check(!out.empty(), what, " path '", pattern, "' matches no file");
  return out;  // glob sorts its matches
}

std::vector<std::string> files_in(const std::string& folder, const char* what, const char* ext) {
  std::vector<std::string> out;
  std::error_code error;
  for (const auto& entry : fs::directory_iterator(folder, error)) {
    if (entry.path().extension() == ext) out.push_back(entry.path().string());
  }
  check(!error, what, " folder '", folder, "' cannot be read: ", error.message());
  check(!out.empty(), what, " folder '", folder, "' holds no *", ext, " file");
  std::sort(out.begin(), out.end());
  return out;
}

// The files of `paths` in order (expand_parquet_paths); `folder_files` lists a folder's.
std::vector<std::string> expand_paths(
    const std::vector<std::string>& paths, const char* what,
    const std::function<std::vector<std::string>(const std::string&)>& folder_files) {
  check(!paths.empty(), "no ", what, " path given");
  std::vector<std::string> files;
  for (const std::string& path : paths) {
    std::vector<std::string> some;
    if (has_glob_characters(path) && !fs::exists(path)) {
      some = glob_matches(path, what);
    } else if (fs::is_directory(path)) {
      some = folder_files(path);
    } else {
      check(fs::exists(path), what, " path '", path, "' does not exist");
      some = {path};
    }
    files.insert(files.end(), some.begin(), some.end());
  }
  // Named twice (a folder and one of its files): its rows would be two samples each.
  std::set<std::string> seen;
  for (const std::string& f : files) {
    check(seen.insert(fs::weakly_canonical(f).string()).second, what, " file '", f,
          "' is named twice among the paths given");
  }
  return files;
}

// A folder of Arrow files: save_to_disk's (its state.json lists them in order), or any other
// (every *.arrow, sorted). A DatasetDict's folder holds one folder per split.
std::vector<std::string> arrow_files_in(const std::string& folder) {
  const fs::path dir(folder);
  if (fs::exists(dir / "dataset_dict.json")) {
    std::string splits;
    for (const auto& entry : fs::directory_iterator(dir)) {
      if (entry.is_directory())
        splits += (splits.empty() ? "" : ", ") + entry.path().filename().string();
    }
    fail("Arrow folder '", folder, "' holds a DatasetDict (splits: ", splits,
         "); give one split's folder, such as '", (dir / "train").string(), "'");
  }
  const fs::path state = dir / "state.json";
  if (!fs::exists(state)) return files_in(folder, "Arrow", ".arrow");
  std::vector<std::string> out;
  try {
    std::ifstream in(state);
    const nlohmann::json j = nlohmann::json::parse(in);
    for (const auto& f : j.at("_data_files")) {
      const std::string name = f.at("filename").get<std::string>();
      check(!name.empty() && name.find('/') == std::string::npos && name != "..", state.string(),
            ": data file '", name, "' is not a file name in the folder");
      out.push_back((dir / name).string());
    }
  } catch (const nlohmann::json::exception& e) {
    fail(state.string(), ": not the state.json of Dataset.save_to_disk (", e.what(), ")");
  }
  check(!out.empty(), state.string(), ": lists no data file");
  return out;
}

}  // namespace

std::vector<std::string> expand_parquet_paths(const std::vector<std::string>& paths) {
  return expand_paths(paths, "Parquet", [](const std::string& folder) {
    return files_in(folder, "Parquet", ".parquet");
  });
}

std::vector<std::string> expand_arrow_paths(const std::vector<std::string>& paths) {
  return expand_paths(paths, "Arrow", arrow_files_in);
}

std::string arrow_source_spec(const std::vector<std::string>& files,
                              const ParquetOptions& options) {
  return parquet_source_spec(files, options);  // the same JSON: files and columns
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
  if (options.layout == TableLayout::kBridgePacked) {  // absent: one sample per row
    spec["layout"] = "bridge_packed";
    spec["seq_start_column"] = options.seq_start_column;
  }
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
    if (j.contains("layout")) {
      const auto layout = j.at("layout").get<std::string>();
      check(layout == "bridge_packed", "unknown table layout '", layout, "'");
      out.options.layout = TableLayout::kBridgePacked;
      out.options.seq_start_column = j.at("seq_start_column").get<std::string>();
    }
    return out;
  } catch (const nlohmann::json::exception& e) {
    fail("not a Parquet source spec (", e.what(), ")");
  }
}

OpenedPackSource reopen_table_source(const PackSource& source, OpenTableFiles open_files) {
  const ParquetSourceSpec spec = parse_parquet_source_spec(source.spec);
  Hash64 hash;
  hash.update(source.kind.data(), source.kind.size());
  OpenedPackSource out;
  out.dataset = open_files(spec.files, spec.options, &hash);
  out.fingerprint = hash.digest();
  return out;
}

}  // namespace thdpack::detail
