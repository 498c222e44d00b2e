// The _thdpack_parquet extension module: the Parquet and Arrow readers (thdpack_parquet, linked
// with the Arrow and Parquet C++ libraries of pyarrow's wheel) for Python. It is its own module so
// that `import thdpack` needs no pyarrow: thdpack/_parquet.py imports pyarrow first (which loads
// those very libraries) and then this module. Datasets come back as the Dataset type _thdpack
// registers, usable wherever its datasets are.

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <arrow/c/abi.h>

#include "thdpack/core/errors.hpp"
#include "thdpack/data/arrow_dataset.hpp"
#include "thdpack/data/pack_file.hpp"
#include "thdpack/data/parquet_dataset.hpp"

namespace py = pybind11;

namespace thdpack::python {
namespace {

std::vector<std::string> paths_from_python(const py::handle& paths, const char* what) {
  const py::module_ os = py::module_::import("os");
  const auto one = [&](const py::handle& p) {
    if (!py::isinstance<py::str>(p) && !py::isinstance<py::bytes>(p) &&
        !py::isinstance(p, os.attr("PathLike"))) {
      throw InvalidArgument(
          message(what, " must be a path (str, bytes, os.PathLike) or a list of them, not ",
                  py::str(py::type::handle_of(p).attr("__name__")).cast<std::string>()));
    }
    return os.attr("fsencode")(p).cast<std::string>();
  };
  std::vector<std::string> out;
  if (py::isinstance<py::str>(paths) || py::isinstance<py::bytes>(paths) ||
      py::isinstance(paths, os.attr("PathLike"))) {
    out.push_back(one(paths));
  } else {
    for (const py::handle p : py::iter(paths)) out.push_back(one(p));
  }
  check(!out.empty(), what, " names no file");
  return out;
}

ParquetOptions options_from(const std::string& tokens_column, const py::object& loss_mask_column,
                            const py::object& labels_column, bool labels_shifted,
                            bool bridge_packed) {
  ParquetOptions o;
  o.tokens_column = tokens_column;
  if (!loss_mask_column.is_none()) o.loss_mask_column = loss_mask_column.cast<std::string>();
  if (!labels_column.is_none()) o.labels_column = labels_column.cast<std::string>();
  o.labels_shifted = labels_shifted;
  if (bridge_packed) {
    o.layout = TableLayout::kBridgePacked;
    if (loss_mask_column.is_none()) o.loss_mask_column = "loss_mask";
  }
  return o;
}

// Binds `load` (a reader of files: load_parquet_dataset, load_arrow_dataset) as `name`, with the
// column keywords every reader takes.
template <class Load>
void def_path_loader(py::module_& m, const char* name, Load load) {
  m.def(
      name,
      [load](const py::object& paths, const std::string& tokens_column,
             const py::object& loss_mask_column, const py::object& labels_column,
             bool labels_shifted, bool bridge_packed) {
        const auto p = paths_from_python(paths, "paths");
        const ParquetOptions o = options_from(tokens_column, loss_mask_column, labels_column,
                                              labels_shifted, bridge_packed);
        py::gil_scoped_release release;
        return std::shared_ptr<Dataset>(load(p, o));
      },
      py::arg("paths"), py::kw_only(), py::arg("tokens_column") = "input_ids",
      py::arg("loss_mask_column") = py::none(), py::arg("labels_column") = py::none(),
      py::arg("labels_shifted") = false, py::arg("bridge_packed") = false);
}

// The opener _thdpack calls for pack files of these kinds: this module's own registry knows them.
OpenedPackSource open_source(const PackSource& source) {
  return open_pack_source_once(source);
}

}  // namespace
}  // namespace thdpack::python

PYBIND11_MODULE(_thdpack_parquet, m) {
  using namespace thdpack;
  using namespace thdpack::python;
  m.doc() = "thdpack's Parquet and Arrow readers (needs pyarrow imported first).";
  register_parquet_pack_source();
  register_arrow_pack_source();
  py::module_::import("thdpack._thdpack");  // the Dataset type the readers return

  def_path_loader(m, "load_parquet_dataset", &load_parquet_dataset);
  def_path_loader(m, "load_arrow_dataset", &load_arrow_dataset);
  m.def(
      "load_arrow_stream_dataset",
      [](const py::capsule& stream, const std::string& name, const py::object& rows,
         const std::string& tokens_column, const py::object& loss_mask_column,
         const py::object& labels_column, bool labels_shifted, bool bridge_packed) {
        check(std::string(stream.name() ? stream.name() : "") == "arrow_array_stream", name,
              ": not an Arrow C stream capsule (__arrow_c_stream__)");
        auto* s = stream.get_pointer<ArrowArrayStream>();
        const ParquetOptions o = options_from(tokens_column, loss_mask_column, labels_column,
                                              labels_shifted, bridge_packed);
        std::unique_ptr<Dataset> table = load_arrow_stream_dataset(s, o, name);
        if (rows.is_none()) return std::shared_ptr<Dataset>(std::move(table));
        const auto a = rows.cast<py::array_t<int64_t, py::array::c_style | py::array::forcecast>>();
        std::vector<int64_t> r(a.data(), a.data() + a.size());
        return std::shared_ptr<Dataset>(select_rows(std::move(table), std::move(r), name));
      },
      py::arg("stream"), py::kw_only(), py::arg("name"), py::arg("rows") = py::none(),
      py::arg("tokens_column") = "input_ids", py::arg("loss_mask_column") = py::none(),
      py::arg("labels_column") = py::none(), py::arg("labels_shifted") = false,
      py::arg("bridge_packed") = false);
  using Opener = OpenedPackSource (*)(const PackSource&);
  const Opener opener = &open_source;
  m.attr("_pack_source_opener") =
      py::capsule(reinterpret_cast<void*>(opener), "thdpack.pack_source_opener");
}
