// THD packing and the CP partition, with numpy views into the packs (no copies).

#include "bindings.hpp"
#include "thdpack/core/errors.hpp"
#include "thdpack/packing/cp_partition.hpp"
#include "thdpack/packing/packed_batch.hpp"

namespace thdpack::python {
namespace {

CpMode cp_mode_of(const std::string& name) {
  if (name == "zigzag") return CpMode::kZigzag;
  if (name == "contiguous") return CpMode::kContiguous;
  fail("cp mode must be 'zigzag' or 'contiguous', got '", name, "'");
}

PackOptions pack_options(int64_t divisor, int64_t capacity, int64_t pad_id, int64_t ignore_id,
                         const std::string& pad_positions, const std::string& tail_align,
                         int64_t tail_multiple, const std::string& tail_policy,
                         int64_t fixed_entries) {
  PackOptions o;
  o.divisor = divisor;
  o.capacity = capacity;
  o.pad_id = pad_id;
  o.ignore_id = ignore_id;
  if (pad_positions == "zero") {
    o.pad_positions = PadPositions::kZero;
  } else if (pad_positions != "continue") {
    throw InvalidArgument("pad_positions must be 'continue' or 'zero'");
  }
  o.tail_align = parse_tail_align(tail_align);
  o.tail_multiple = tail_multiple;
  o.tail_policy = parse_tail_policy(tail_policy);
  o.fixed_cu_seqlens_entries = fixed_entries;
  return o;
}

template <typename T>
std::span<const T> span_of(const std::vector<T>& v) {
  return std::span<const T>(v);
}

// PackedBatch: a THD pack whose fields are numpy views into it.
void bind_packed_batch(py::module_& m) {
  py::class_<PackedBatch, std::shared_ptr<PackedBatch>>(
      m, "PackedBatch",
      "A THD pack. Per-row fields are numpy views into the pack (keep the pack or the arrays); "
      "cu_seqlens, cu_seqlens_padded, max_seqlen and sample_ids are those of the whole pack.")
      .def_property_readonly(
          "tokens", [](py::object s) { return view_of(s.cast<const PackedBatch&>().tokens, s); })
      .def_property_readonly(
          "labels", [](py::object s) { return view_of(s.cast<const PackedBatch&>().labels, s); })
      .def_property_readonly(
          "loss_mask",
          [](py::object s) { return view_of(s.cast<const PackedBatch&>().loss_mask, s); })
      .def_property_readonly(
          "position_ids",
          [](py::object s) { return view_of(s.cast<const PackedBatch&>().position_ids, s); })
      .def_property_readonly("padding_mask",
                             [](py::object s) {
                               const auto& v = s.cast<const PackedBatch&>().padding_mask;
                               return py::array(py::dtype("bool"),
                                                {static_cast<py::ssize_t>(v.size())},
                                                {py::ssize_t{1}}, v.data(), s);
                             })
      .def_property_readonly(
          "cu_seqlens",
          [](py::object s) { return view_of(s.cast<const PackedBatch&>().cu_seqlens, s); })
      .def_property_readonly(
          "cu_seqlens_padded",
          [](py::object s) { return view_of(s.cast<const PackedBatch&>().cu_seqlens_padded, s); })
      .def_property_readonly(
          "sample_ids",
          [](py::object s) { return view_of(s.cast<const PackedBatch&>().sample_ids, s); })
      .def_readonly("max_seqlen", &PackedBatch::max_seqlen)
      .def_readonly("cp_size", &PackedBatch::cp_size)
      .def_readonly("cp_rank", &PackedBatch::cp_rank)
      .def_property_readonly("cp_mode",
                             [](const PackedBatch& b) {
                               return b.cp_mode == CpMode::kZigzag ? "zigzag" : "contiguous";
                             })
      .def_property_readonly("num_rows", &PackedBatch::num_rows)
      .def("__len__", &PackedBatch::num_rows)
      .def("__repr__", [](const PackedBatch& b) {
        return "PackedBatch(rows=" + std::to_string(b.num_rows()) +
               ", sequences=" + std::to_string(b.cu_seqlens.size() - 1) +
               ", max_seqlen=" + std::to_string(b.max_seqlen) + ", cp " +
               std::to_string(b.cp_rank) + "/" + std::to_string(b.cp_size) + ")";
      });
}

// Packing samples into one row and checking a row: padding_divisor, pack, check_pack_invariants.
void bind_pack(py::module_& m) {
  m.def(
      "padding_divisor",
      [](int cp, int tp, bool sp, bool dynamic_cp, int dp, int min_cp) {
        return padding_divisor({cp, tp, sp, dynamic_cp, dp, min_cp});
      },
      py::kw_only(), py::arg("cp") = 1, py::arg("tp") = 1, py::arg("sequence_parallel") = false,
      py::arg("dynamic_cp") = false, py::arg("dp") = 1, py::arg("min_cp") = 1,
      "2*cp if cp > 1 else 1, times tp with sequence parallelism; with dynamic CP 2*lcm of every "
      "CP group size of dp*cp ranks replaces 2*cp (2*dp*cp when dp*cp and min_cp are powers of "
      "two).");

  m.def(
      "pack",
      [](const py::sequence& samples, int64_t divisor, int64_t capacity, int64_t pad_id,
         int64_t ignore_id, bool ignore_masked_labels, const std::string& pad_positions,
         const std::string& tail_align, int64_t tail_multiple, const std::string& tail_policy,
         int64_t fixed_entries) {
        std::vector<Sample> owned;
        owned.reserve(samples.size());
        for (size_t i = 0; i < samples.size(); ++i) {
          owned.push_back(sample_from_python(samples[i], static_cast<int64_t>(i), ignore_id));
        }
        PackOptions o = pack_options(divisor, capacity, pad_id, ignore_id, pad_positions,
                                     tail_align, tail_multiple, tail_policy, fixed_entries);
        o.ignore_masked_labels = ignore_masked_labels;
        std::vector<SampleView> views;
        for (const Sample& s : owned) views.push_back(view_of(s));
        py::gil_scoped_release release;
        return std::make_shared<PackedBatch>(pack_samples(views, o));
      },
      py::arg("samples"), py::kw_only(), py::arg("divisor") = 1, py::arg("capacity") = 0,
      py::arg("pad_id") = 0, py::arg("ignore_id") = -100, py::arg("ignore_masked_labels") = false,
      py::arg("pad_positions") = "continue", py::arg("tail_align") = "none",
      py::arg("tail_multiple") = 0, py::arg("tail_policy") = "append_dummy_seq",
      py::arg("fixed_cu_seqlens_entries") = 0,
      "Packs samples (dicts with input_ids and optional loss_mask / labels / id, or arrays of "
      "token ids) into one THD row. ignore_masked_labels: labels are ignore_id wherever the loss "
      "mask is 0 (masked prompts), so a loss with ignore_index alone skips them.");
  m.def(
      "check_pack_invariants",
      [](const PackedBatch& b, int64_t divisor, int64_t capacity, int64_t pad_id, int64_t ignore_id,
         const std::string& pad_positions) {
        check_pack_invariants(
            b.view(), pack_options(divisor, capacity, pad_id, ignore_id, pad_positions, "none", 0,
                                   "append_dummy_seq", 0));
      },
      py::arg("batch"), py::kw_only(), py::arg("divisor") = 1, py::arg("capacity") = 0,
      py::arg("pad_id") = 0, py::arg("ignore_id") = -100, py::arg("pad_positions") = "continue");
}

// Context-parallel slices of a row: cp_slice, cp_unslice, cp_global_rows.
void bind_cp_slices(py::module_& m) {
  m.def(
      "cp_slice",
      [](const PackedBatch& whole, int cp, int rank, const std::string& mode) {
        return std::make_shared<PackedBatch>(cp_slice(whole.view(), cp, rank, cp_mode_of(mode)));
      },
      py::arg("batch"), py::arg("cp"), py::arg("rank"), py::arg("mode") = "zigzag",
      "The rows CP rank `rank` of `cp` holds (zigzag per sample, or contiguous).");
  m.def(
      "cp_unslice",
      [](const std::vector<std::shared_ptr<PackedBatch>>& slices) {
        std::vector<PackedBatchView> views;
        for (const auto& s : slices) views.push_back(s->view());
        return std::make_shared<PackedBatch>(cp_unslice(views));
      },
      py::arg("slices"), "The exact inverse of cp_slice, from the slices of ranks 0..cp-1.");
  m.def(
      "cp_global_rows",
      [](const Array<int32_t>& cu, const Array<int32_t>& cu_padded, int cp, int rank,
         const std::string& mode) {
        const auto a = vector_of(cu, "cu_seqlens");
        const auto b = vector_of(cu_padded, "cu_seqlens_padded");
        const auto rows = cp_global_rows(ThdLayout(a, b), cp, rank, cp_mode_of(mode));
        return copy_of(span_of(rows));
      },
      py::arg("cu_seqlens"), py::arg("cu_seqlens_padded"), py::arg("cp"), py::arg("rank"),
      py::arg("mode") = "zigzag",
      "Global row of every local row of CP rank `rank` (e.g. to gather keys/values back).");
}

}  // namespace

void bind_packing(py::module_& m) {
  bind_packed_batch(m);
  bind_pack(m);
  bind_cp_slices(m);
}

}  // namespace thdpack::python
