// Pack-source kinds registered from outside the core library: the core library (and every
// program linking only it) stays free of Arrow, while a program linking the Parquet reader makes
// pack files of Parquet sources readable.

#include "data/pack_source_kinds.hpp"

#include <map>
#include <mutex>

#include "thdpack/core/errors.hpp"

namespace thdpack {
namespace {

std::mutex& registry_mutex() {
  static std::mutex m;
  return m;
}

std::map<std::string, PackSourceOpener>& registry() {
  static std::map<std::string, PackSourceOpener> openers;
  return openers;
}

}  // namespace

void register_pack_source_kind(const std::string& kind, PackSourceOpener open) {
  check(kind != "indexed" && kind != "jsonl" && kind != "mock", "register_pack_source_kind: '",
        kind, "' is a built-in kind");
  check(static_cast<bool>(open), "register_pack_source_kind: no opener for '", kind, "'");
  const std::lock_guard lock(registry_mutex());
  registry()[kind] = std::move(open);
}

PackSourceOpener detail::registered_pack_source_opener(const std::string& kind) {
  {
    const std::lock_guard lock(registry_mutex());
    if (const auto it = registry().find(kind); it != registry().end()) return it->second;
  }
  if (kind == "parquet" || kind == "arrow") {
    fail("this pack file's source is ", kind == "parquet" ? "Parquet" : "Arrow files",
         ", which the thdpack command reads when built with "
         "Parquet support (configure with -DTHDPACK_WITH_PARQUET=ON "
         "-DTHDPACK_ARROW_PYTHON=PYTHON, a Python with pyarrow); a program linking only "
         "thdpack::thdpack does not read it (the Python module does where pyarrow imports)");
  }
  fail("unknown pack source kind '", kind, "'");
}

}  // namespace thdpack
