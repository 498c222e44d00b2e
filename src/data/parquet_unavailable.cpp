// The Parquet reader of a build without Arrow (THDPACK_WITH_PARQUET off or pyarrow not found):
// the same interface, and every use says how to get a build that reads Parquet.

#include "thdpack/core/errors.hpp"
#include "thdpack/data/arrow_dataset.hpp"
#include "thdpack/data/bridge_parquet.hpp"
#include "thdpack/data/parquet_dataset.hpp"

namespace thdpack {

bool parquet_supported() {
  return false;
}

std::unique_ptr<Dataset> load_parquet_dataset(const std::vector<std::string>& /*paths*/,
                                              const ParquetOptions& /*options*/) {
  fail(
      "this thdpack was built without Parquet support; configure it with "
      "-DTHDPACK_WITH_PARQUET=ON -DTHDPACK_ARROW_PYTHON=PYTHON (a Python with pyarrow)");
}

std::unique_ptr<Dataset> load_arrow_dataset(const std::vector<std::string>& /*paths*/,
                                            const ParquetOptions& /*options*/) {
  fail(
      "this thdpack was built without Parquet and Arrow support, which reading Arrow files "
      "needs; configure it with -DTHDPACK_WITH_PARQUET=ON -DTHDPACK_ARROW_PYTHON=PYTHON (a Python "
      "with pyarrow)");
}

std::unique_ptr<Dataset> load_arrow_stream_dataset(ArrowArrayStream* /*stream*/,
                                                   const ParquetOptions& options,
                                                   const std::string& /*name*/) {
  return load_arrow_dataset({}, options);
}

std::unique_ptr<Dataset> select_rows(std::unique_ptr<Dataset> /*table*/,
                                     std::vector<int64_t> /*rows*/, const std::string& /*name*/) {
  return load_arrow_dataset({}, {});
}

// Nothing to register: a pack file of a Parquet source then says how to get Parquet support.
void register_parquet_pack_source() {}
void register_arrow_pack_source() {}

}  // namespace thdpack

namespace thdpack {

std::vector<std::string> write_bridge_parquet(const Dataset& /*dataset*/, const Bins& /*packs*/,
                                              const std::string& /*folder*/,
                                              const BridgeParquetOptions& /*options*/) {
  fail(
      "this thdpack was built without Parquet support, which writing Megatron-Bridge's packed "
      "Parquet needs; configure it with -DTHDPACK_WITH_PARQUET=ON "
      "-DTHDPACK_ARROW_PYTHON=PYTHON (a Python with pyarrow)");
}

}  // namespace thdpack
