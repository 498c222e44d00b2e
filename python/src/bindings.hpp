#pragma once
// Shared by the binding files of the _thdpack module: numpy conversions and the per-area
// registration functions.

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <span>
#include <string>
#include <vector>

#include "thdpack/core/dataset.hpp"
#include "thdpack/packing/bin_packing.hpp"
#include "thdpack/packing/packed_batch.hpp"
#include "thdpack/schedule/dynamic_cp.hpp"

namespace thdpack::python {

namespace py = pybind11;

/// A 1-D numpy array over `values`, owned by `owner` (no copy): the array keeps `owner` alive.
template <typename T>
py::array_t<T> view_of(const std::vector<T>& values, py::handle owner) {
  return py::array_t<T>({static_cast<py::ssize_t>(values.size())}, {sizeof(T)}, values.data(),
                        owner);
}

/// A new 1-D numpy array holding a copy of `values`.
template <typename T>
py::array_t<T> copy_of(std::span<const T> values) {
  py::array_t<T> out(static_cast<py::ssize_t>(values.size()));
  std::copy(values.begin(), values.end(), out.mutable_data());
  return out;
}

/// A 1-D numpy array that takes `values` over (no copy): the array owns the vector.
template <typename T>
py::array_t<T> array_from(std::vector<T>&& values) {
  auto* owned = new std::vector<T>(std::move(values));
  py::capsule release(owned, [](void* p) { delete static_cast<std::vector<T>*>(p); });
  return py::array_t<T>({static_cast<py::ssize_t>(owned->size())}, {sizeof(T)}, owned->data(),
                        release);
}

template <typename T>
using Array = py::array_t<T, py::array::c_style | py::array::forcecast>;

/// The values of a 1-D array-like (list, numpy array, anything numpy converts).
template <typename T>
std::vector<T> vector_of(const Array<T>& array, const char* name) {
  if (array.ndim() != 1) {
    throw py::value_error(std::string(name) + " must be one-dimensional");
  }
  return std::vector<T>(array.data(), array.data() + array.size());
}

/// A Sample from a dict {"input_ids": ..., "loss_mask": ..., "labels": ..., "labels_shifted": ...,
/// "id": ...}, or from a bare sequence of token ids (then id = `default_id`). Validated, never
/// converted (see strict_values.hpp): token ids are integers >= 0, at least one; loss_mask holds
/// 0/1 values; labels are integers >= 0 or `ignore_id`; loss_mask and labels are exclusive and,
/// when present (even empty), exactly as long as input_ids; id is an integer; labels_shifted a
/// bool. Anything else throws InvalidArgument.
Sample sample_from_python(py::handle object, int64_t default_id, int64_t ignore_id = -100);

/// An exception's text on one line, for a message other ranks receive: a Python exception as
/// "TypeName: text" (what() would add its traceback), newlines made spaces. Needs the GIL.
std::string one_line_error(const std::exception& e);

/// A file system path given from Python as str, bytes or os.PathLike (pathlib.Path), as the bytes
/// the OS takes (os.fsencode: a str that is not UTF-8 on disk round-trips). Anything else throws
/// InvalidArgument naming `what` and the type given.
std::string path_from_python(py::handle path, const char* what = "path");
/// The same, reading a dict's input_ids in place when they are a 1-D C-contiguous int64 numpy
/// array (what thdpack.torch passes on for numpy arrays and CPU tensors): the returned Sample has
/// empty input_ids, `borrowed` is set to the array (keep it alive while the view is used) and the
/// view is `view_of(sample)` with input_ids pointing into it. Other inputs are copied as above
/// and `borrowed` is left empty. The same checks either way.
SampleView sample_view_from_python(py::handle object, int64_t ignore_id, Sample& storage,
                                   py::object& borrowed);
/// A dict of numpy arrays (input_ids, and loss_mask / labels when present) plus "id", and
/// "labels_shifted" with labels, so sample_from_python reads it back the same.
py::dict sample_to_python(const Sample& sample);

/// Packs for Python: a list with one array of item indices per pack; with `flat`, the tuple
/// (items, offsets) of two arrays taken over without a copy, pack p being
/// items[offsets[p]:offsets[p+1]] (one array per pack costs more than packing at a million items).
py::object packs_to_python(Bins&& bins, bool flat);

/// plan[k] = [(first_rank, size, [ids...]), ...] for micro-batch k, groups in rank order.
py::list plan_groups_to_python(const Plan& plan);

void bind_core(py::module_& m);
void bind_packing(py::module_& m);
void bind_comm(py::module_& m);
void bind_pipeline(py::module_& m);
void bind_datasets(py::module_& m);
void bind_moe(py::module_& m);
void bind_reorder(py::module_& m);
void bind_dynamic_cp(py::module_& m);

}  // namespace thdpack::python
