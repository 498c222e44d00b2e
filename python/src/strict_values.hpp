#pragma once
// Values from Python, validated and never converted: a float, bool or string where an integer
// belongs, an integer past int64, or a loss-mask value other than 0 or 1 throws InvalidArgument
// (thdpack.InvalidArgument, a ValueError) naming the argument and the position. numpy's and
// pybind's own conversions would truncate 1.9 to 1, read True as 1 and wrap 2^64-100 to -100.

#include <pybind11/pybind11.h>

#include <cstdint>
#include <string>
#include <vector>

namespace thdpack::python {

/// The values of a 1-D integer sequence: a list or tuple of Python or numpy integers, a numpy
/// integer array, or anything numpy turns into one (a CPU torch tensor). Everything else throws.
std::vector<int64_t> int64_values(pybind11::handle values, const std::string& name);

/// 0/1 values of a loss mask: bools, or integers or floats equal to 0 or 1 (a list, tuple or
/// numpy array of them). 0.5, -1, NaN and anything that is not a number throw.
std::vector<float> mask_values(pybind11::handle values, const std::string& name);

/// One integer (a Python or numpy integer; not a bool, float or None) that fits int64.
int64_t int64_value(pybind11::handle value, const std::string& name);

/// One bool (Python or numpy), nothing else.
bool bool_value(pybind11::handle value, const std::string& name);

}  // namespace thdpack::python
