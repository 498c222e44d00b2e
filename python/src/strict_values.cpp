#include "strict_values.hpp"

#include <pybind11/numpy.h>

#include <cmath>
#include <limits>

#include "thdpack/core/errors.hpp"

namespace thdpack::python {
namespace py = pybind11;
namespace {

// repr() of a value, cut to a short excerpt.
std::string shown(py::handle value) {
  std::string text = py::repr(value);
  constexpr size_t kMax = 80;
  if (text.size() > kMax) text = text.substr(0, kMax) + "...";
  return text + " (" + std::string(py::str(py::type::handle_of(value).attr("__name__"))) + ")";
}

[[noreturn]] void fail(const std::string& what) {
  throw InvalidArgument(what);
}

std::string at(const std::string& name, size_t i) {
  return name + "[" + std::to_string(i) + "]";
}

bool is_numpy_kind(py::handle value, const char* kind) {
  // Released, never destroyed: a static py::object would be freed after the interpreter.
  static const py::handle numpy = py::module_::import("numpy").release();
  return py::isinstance(value, numpy.attr(kind));
}

bool is_bool(py::handle value) {
  return PyBool_Check(value.ptr()) || is_numpy_kind(value, "bool_");
}

bool is_integer(py::handle value) {
  return !is_bool(value) && (PyLong_Check(value.ptr()) || is_numpy_kind(value, "integer"));
}

// An integer element, checked for range without wrapping.
int64_t integer_of(py::handle value, const std::string& where) {
  if (!is_integer(value)) fail(where + " must be an integer, got " + shown(value));
  const py::int_ exact(py::reinterpret_borrow<py::object>(value));  // numpy scalars via __index__
  int overflow = 0;
  const long long v = PyLong_AsLongLongAndOverflow(exact.ptr(), &overflow);
  if (overflow != 0)
    fail(where + " = " + py::repr(exact).cast<std::string>() + " is outside int64");
  return static_cast<int64_t>(v);
}

// A list or tuple (element by element), else a numpy array of it (nullptr when numpy cannot).
bool is_list_like(py::handle values) {
  return PyList_Check(values.ptr()) || PyTuple_Check(values.ptr());
}

py::array array_of(py::handle values, const std::string& name) {
  if (PyUnicode_Check(values.ptr()) || PyBytes_Check(values.ptr()) || values.is_none()) {
    fail(name + " must be a sequence of integers, got " + shown(values));
  }
  py::array a = py::array::ensure(values);
  if (!a) fail(name + " must be a list or 1-D array, got " + shown(values));
  check(a.ndim() == 1, name, " must be one-dimensional, got ", a.ndim(), " dimensions");
  return a;
}

std::string dtype_name(const py::array& a) {
  return py::str(a.dtype());
}

// `values` as floats, each checked to be 0 or 1. The check is one pass without an early exit, which
// vectorises; the first bad value is looked for only when there is one.
template <typename T>
std::vector<float> zero_one_values(const T* values, size_t n, const std::string& name) {
  bool all = true;
  for (size_t i = 0; i < n; ++i) all &= (values[i] == T{0}) | (values[i] == T{1});
  if (!all) {
    for (size_t i = 0; i < n; ++i) {
      const auto v = static_cast<double>(values[i]);
      if (v != 0.0 && v != 1.0) {
        fail(at(name, i) + " must be 0 or 1, got " +
             (std::isnan(v) ? std::string("nan") : std::string(py::str(py::float_(v)))));
      }
    }
  }
  return std::vector<float>(values, values + n);
}

}  // namespace

std::vector<int64_t> int64_values(py::handle values, const std::string& name) {
  std::vector<int64_t> out;
  if (is_list_like(values)) {
    const auto items = py::reinterpret_borrow<py::sequence>(values);
    out.reserve(items.size());
    for (size_t i = 0; i < items.size(); ++i) out.push_back(integer_of(items[i], at(name, i)));
    return out;
  }
  const py::array a = array_of(values, name);
  const char kind = a.dtype().kind();
  if (kind == 'i') {
    const auto wide = py::array_t<int64_t, py::array::c_style | py::array::forcecast>::ensure(a);
    return std::vector<int64_t>(wide.data(), wide.data() + wide.size());
  }
  if (kind == 'u') {
    const auto wide = py::array_t<uint64_t, py::array::c_style | py::array::forcecast>::ensure(a);
    out.reserve(static_cast<size_t>(wide.size()));
    for (py::ssize_t i = 0; i < wide.size(); ++i) {
      const uint64_t v = wide.data()[i];
      if (v > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
        thdpack::fail(at(name, static_cast<size_t>(i)), " = ", v, " is outside int64");
      }
      out.push_back(static_cast<int64_t>(v));
    }
    return out;
  }
  fail(name + " must hold integers, got an array of dtype " + dtype_name(a));
}

std::vector<float> mask_values(py::handle values, const std::string& name) {
  std::vector<float> out;
  const auto checked = [&](double v, const std::string& where, py::handle shown_value) {
    if (v != 0.0 && v != 1.0) fail(where + " must be 0 or 1, got " + shown(shown_value));
    return static_cast<float>(v);
  };
  if (is_list_like(values)) {
    const auto items = py::reinterpret_borrow<py::sequence>(values);
    out.reserve(items.size());
    for (size_t i = 0; i < items.size(); ++i) {
      const py::handle v = items[i];
      const std::string where = at(name, i);
      if (is_bool(v)) {
        out.push_back(py::cast<bool>(v) ? 1.0f : 0.0f);
      } else if (is_integer(v)) {
        const int64_t x = integer_of(v, where);
        out.push_back(checked(x == 0 ? 0.0 : (x == 1 ? 1.0 : 2.0), where, v));
      } else if (PyFloat_Check(v.ptr()) || is_numpy_kind(v, "floating")) {
        out.push_back(checked(py::cast<double>(v), where, v));
      } else {
        fail(where + " must be 0 or 1, got " + shown(v));
      }
    }
    return out;
  }
  const py::array a = array_of(values, name);
  const char kind = a.dtype().kind();
  if (kind != 'b' && kind != 'i' && kind != 'u' && kind != 'f') {
    fail(name + " must hold 0/1 values, got an array of dtype " + dtype_name(a));
  }
  // float32 (what the mask becomes) is read in place; any other dtype through float64, where
  // integers past 2^53 round to large doubles, never to 0 or 1, so the check stays exact.
  if (kind == 'f' && a.itemsize() == sizeof(float)) {
    const auto f = py::array_t<float, py::array::c_style | py::array::forcecast>::ensure(a);
    return zero_one_values(f.data(), static_cast<size_t>(f.size()), name);
  }
  const auto d = py::array_t<double, py::array::c_style | py::array::forcecast>::ensure(a);
  return zero_one_values(d.data(), static_cast<size_t>(d.size()), name);
}

int64_t int64_value(py::handle value, const std::string& name) {
  // A 0-d integer array (a torch scalar tensor through numpy) holds one integer.
  if (py::isinstance<py::array>(value) && py::reinterpret_borrow<py::array>(value).ndim() == 0) {
    const auto a = py::reinterpret_borrow<py::array>(value);
    const char kind = a.dtype().kind();
    if (kind == 'i' || kind == 'u') return integer_of(a.attr("item")(), name);
  }
  return integer_of(value, name);
}

bool bool_value(py::handle value, const std::string& name) {
  if (!is_bool(value)) fail(name + " must be True or False, got " + shown(value));
  return py::cast<bool>(value);
}

}  // namespace thdpack::python
