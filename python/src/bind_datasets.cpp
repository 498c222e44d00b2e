// Megatron indexed datasets, offline packing and pack files for Python.

#include "bindings.hpp"
#include "strict_values.hpp"
#include "thdpack/core/errors.hpp"
#include "thdpack/data/indexed_dataset.hpp"
#include "thdpack/data/pack_file.hpp"
#include "thdpack/packing/offline_packing.hpp"

namespace thdpack::python {

namespace {

// Megatron indexed datasets: open_indexed_dataset, IndexedDatasetWriter.
void bind_indexed(py::module_& m) {
  m.def(
      "open_indexed_dataset",
      [](const py::object& data_path, int64_t size) {
        return std::shared_ptr<Dataset>(
            open_indexed_datasets(path_from_python(data_path, "data_path"), size));
      },
      py::arg("data_path"), py::arg("size") = 0,
      "A Megatron indexed dataset (prefix.bin + prefix.idx), or a blend 'w1 prefix1 w2 prefix2 "
      "...' of `size` samples (default: all).");

  py::class_<IndexedDatasetWriter>(
      m, "IndexedDatasetWriter",
      "Writes a Megatron indexed dataset (call finish() at the end: the files appear "
      "only then; a prefix whose .bin or .idx an open dataset reads "
      "is refused).")
      .def(py::init([](const py::object& prefix, const std::string& dtype) {
             return std::make_unique<IndexedDatasetWriter>(path_from_python(prefix, "prefix"),
                                                           token_dtype_from_name(dtype));
           }),
           py::arg("prefix"), py::arg("dtype") = "int32")
      .def(
          "add_sequence",
          [](IndexedDatasetWriter& w, const py::handle& tokens) {
            w.add_sequence(int64_values(tokens, "tokens"));
          },
          py::arg("tokens"))
      .def("end_document", &IndexedDatasetWriter::end_document)
      .def("finish", &IndexedDatasetWriter::finish);
}

// Offline packing and its pack files: pack_offline, PackedDataset.
void bind_pack_files(py::module_& m) {
  m.def(
      "pack_offline",
      [](const py::handle& lengths, int64_t capacity, const std::string& strategy, int64_t divisor,
         const py::object& seed, const py::object& group_ids, bool flat) {
        const auto l = int64_values(lengths, "lengths");
        std::vector<int64_t> groups;
        if (!group_ids.is_none()) groups = int64_values(group_ids, "group_ids");
        OfflinePackOptions o;
        o.capacity = capacity;
        o.strategy = pack_strategy_from_name(strategy);
        o.divisor = divisor;
        if (!seed.is_none()) o.shuffle_seed = seed.cast<uint64_t>();
        o.group_ids = groups;
        OfflinePacking result;
        {
          py::gil_scoped_release release;
          result = pack_offline(l, o);
        }
        py::dict d;
        d["packs"] = packs_to_python(std::move(result.packs), flat);
        d["padded_tokens"] = result.padded_tokens;
        d["lower_bound_l1"] = result.lower_bound_l1;
        d["lower_bound_l2"] = result.lower_bound_l2;
        d["fill"] = result.fill;
        return d;
      },
      py::arg("lengths"), py::kw_only(), py::arg("capacity"), py::arg("strategy") = "bfd",
      py::arg("divisor") = 1, py::arg("seed") = py::none(), py::arg("group_ids") = py::none(),
      py::arg("flat") = false,
      "Packs a whole dataset's lengths into packs of `capacity` tokens: {'packs': [sample "
      "indices per pack] (with flat=True: (items, offsets), pack p being "
      "items[offsets[p]:offsets[p+1]]), 'lower_bound_l1', 'lower_bound_l2', 'fill', "
      "'padded_tokens'}.");

  py::class_<PackedDataset, std::shared_ptr<PackedDataset>>(
      m, "PackedDataset", "A pack file of `thdpack pack` with its source: pack p is a THD row.")
      .def_static(
          "open",
          [](const py::object& path) {
            return std::shared_ptr<PackedDataset>(PackedDataset::open(path_from_python(path)));
          },
          py::arg("path"))
      .def("__len__", &PackedDataset::num_packs)
      .def_property_readonly("num_packs", &PackedDataset::num_packs)
      .def_property_readonly("capacity", &PackedDataset::capacity)
      .def_property_readonly("divisor", &PackedDataset::divisor)
      .def(
          "pack", [](const PackedDataset& d, int64_t p) { return copy_of(d.pack(p)); },
          py::arg("index"), "Sample indices (in the source) of pack `index`.")
      .def(
          "batch",
          [](const PackedDataset& d, int64_t p, const std::string& tail_align,
             int64_t tail_multiple, const std::string& tail_policy,
             int64_t fixed_cu_seqlens_entries) {
            PackOptions o;
            o.tail_align = parse_tail_align(tail_align);
            o.tail_multiple = tail_multiple;
            o.tail_policy = parse_tail_policy(tail_policy);
            o.fixed_cu_seqlens_entries = fixed_cu_seqlens_entries;
            return std::make_shared<PackedBatch>(d.batch(p, o));
          },
          py::arg("index"), py::kw_only(), py::arg("tail_align") = "none",
          py::arg("tail_multiple") = 0, py::arg("tail_policy") = "append_dummy_seq",
          py::arg("fixed_cu_seqlens_entries") = 0,
          "Pack `index` as a PackedBatch (tokens, labels, cu_seqlens, ...), with the static "
          "shapes `thdpack pack` was given (tail alignment, fixed cu_seqlens entries).");
}

// Pack files of Parquet and Arrow sources: their reader lives in thdpack._parquet (which needs
// pyarrow), imported the first time such a pack file is opened.
OpenedPackSource open_table_source(const PackSource& source) {
  using Opener = OpenedPackSource (*)(const PackSource&);
  Opener open = nullptr;
  {
    const py::gil_scoped_acquire gil;
    try {
      const py::object module = py::module_::import("thdpack._parquet");
      open = reinterpret_cast<Opener>(
          py::capsule(module.attr("_pack_source_opener")).get_pointer<void>());
    } catch (py::error_already_set& e) {
      fail("this pack file's source is ", source.kind == "parquet" ? "Parquet" : "Arrow files",
           ", which thdpack reads with pyarrow's C++ libraries: ", e.what());
    }
  }
  return open(source);
}

}  // namespace

void bind_datasets(py::module_& m) {
  bind_indexed(m);
  bind_pack_files(m);
  register_pack_source_kind("parquet", open_table_source);
  register_pack_source_kind("arrow", open_table_source);
}

}  // namespace thdpack::python
