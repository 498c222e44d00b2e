// The _thdpack extension module: the C++ core, communicators and pipeline for Python. The
// thdpack package (python/thdpack) re-exports it and adds the torch adapters.

#include <cstring>

#include "bindings.hpp"
#include "thdpack/core/errors.hpp"
#include "thdpack/core/version.hpp"

namespace thdpack::python {
namespace {

// Sets `type` with the message of `error`. Messages name paths as the OS gave them, which need not
// be UTF-8 (a folder of Latin-1 names): bytes that are not UTF-8 are escaped (as \xe9) instead of
// leaving the Python exception without its message.
void raise(py::handle type, const std::exception& error) {
  const char* text = error.what();
  PyObject* message =
      PyUnicode_DecodeUTF8(text, static_cast<Py_ssize_t>(std::strlen(text)), "backslashreplace");
  if (message == nullptr) {
    PyErr_Clear();
    PyErr_SetString(type.ptr(), "(a message that could not be decoded)");
    return;
  }
  PyErr_SetObject(type.ptr(), message);
  Py_DECREF(message);
}

// Python exception classes: InvalidArgument is a ValueError, CommError and InternalError are
// RuntimeErrors, all of them thdpack.Error.
void register_errors(py::module_& m) {
  static py::handle base = PyErr_NewExceptionWithDoc(
      "thdpack.Error", "Base of every error thdpack raises.", PyExc_Exception, nullptr);
  auto make = [&](const char* name, const char* doc, PyObject* builtin) {
    PyObject* bases = PyTuple_Pack(2, base.ptr(), builtin);
    PyObject* cls = PyErr_NewExceptionWithDoc(name, doc, bases, nullptr);
    Py_DECREF(bases);
    return py::handle(cls);
  };
  static py::handle invalid = make("thdpack.InvalidArgument",
                                   "Bad input or configuration (a ValueError).", PyExc_ValueError);
  static py::handle comm =
      make("thdpack.CommError", "A collective failed or a peer went away (a RuntimeError).",
           PyExc_RuntimeError);
  static py::handle internal =
      make("thdpack.InternalError",
           "A broken internal invariant: a bug in thdpack (a RuntimeError).", PyExc_RuntimeError);
  m.attr("Error") = base;
  m.attr("InvalidArgument") = invalid;
  m.attr("CommError") = comm;
  m.attr("InternalError") = internal;
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const InvalidArgument& e) {
      raise(invalid, e);
    } catch (const CommError& e) {
      raise(comm, e);
    } catch (const InternalError& e) {
      raise(internal, e);
    } catch (const Error& e) {
      raise(base, e);
    }
  });
}

}  // namespace
}  // namespace thdpack::python

PYBIND11_MODULE(_thdpack, m) {
  using namespace thdpack::python;
  m.doc() = "thdpack: the packed-sequence (THD) data layer for distributed LLM training.";
  m.attr("__version__") = thdpack::kVersion;
  register_errors(m);
  bind_core(m);
  bind_packing(m);
  bind_comm(m);
  bind_pipeline(m);
  bind_datasets(m);
  bind_moe(m);
  bind_reorder(m);
  bind_dynamic_cp(m);
}
