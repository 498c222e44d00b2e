# Arrow and Parquet C++ from the pyarrow wheel of a Python environment (THDPACK_WITH_PARQUET).
#
# pyarrow's manylinux wheels carry libarrow.so.N, libparquet.so.N and their headers; thdpack links
# those very files (by their versioned names: the wheel ships no unversioned links) and records the
# wheel's folder as RPATH, so the CLI and the tests run without LD_LIBRARY_PATH. The wheels are
# built with the new libstdc++ ABI (_GLIBCXX_USE_CXX11_ABI=1), GCC's default here.
#
#   THDPACK_WITH_PARQUET   AUTO (default): when THDPACK_ARROW_PYTHON imports pyarrow; ON: or fail;
#                          OFF: never (`--parquet` then says how to enable it)
#   THDPACK_ARROW_PYTHON   the Python whose pyarrow to use (default: the repository's .venv)
#
# Defines, when found: the imported targets thdpack::arrow_wheel (Arrow and Parquet C++) and
# THDPACK_HAVE_PARQUET=ON, THDPACK_PYARROW_VERSION, THDPACK_ARROW_PYTHON_FOUND (the interpreter).
set(THDPACK_WITH_PARQUET AUTO CACHE STRING "Parquet sources via pyarrow's C++ libraries: AUTO, ON, OFF")
set_property(CACHE THDPACK_WITH_PARQUET PROPERTY STRINGS AUTO ON OFF)
set(default_arrow_python "")
if(EXISTS ${PROJECT_SOURCE_DIR}/.venv/bin/python)
  set(default_arrow_python ${PROJECT_SOURCE_DIR}/.venv/bin/python)
endif()
set(THDPACK_ARROW_PYTHON "${default_arrow_python}" CACHE FILEPATH
    "Python whose pyarrow wheel provides Arrow/Parquet C++ (default: .venv/bin/python)")

set(THDPACK_HAVE_PARQUET OFF)
string(TOUPPER "${THDPACK_WITH_PARQUET}" parquet_choice)
if(NOT parquet_choice MATCHES "^(AUTO|ON|OFF)$")
  message(FATAL_ERROR "THDPACK_WITH_PARQUET must be AUTO, ON or OFF, not '${THDPACK_WITH_PARQUET}'")
endif()

function(thdpack_parquet_unavailable why)
  if(parquet_choice STREQUAL "ON")
    message(FATAL_ERROR "THDPACK_WITH_PARQUET=ON but ${why}: give -DTHDPACK_ARROW_PYTHON=PYTHON, a "
                        "Python with pyarrow (pip install pyarrow)")
  endif()
  message(STATUS "Parquet sources: off (${why})")
endfunction()

if(NOT parquet_choice STREQUAL "OFF")
  if(NOT THDPACK_ARROW_PYTHON OR NOT EXISTS "${THDPACK_ARROW_PYTHON}")
    thdpack_parquet_unavailable("no Python for pyarrow (THDPACK_ARROW_PYTHON='${THDPACK_ARROW_PYTHON}')")
    return()
  endif()
  execute_process(
    COMMAND "${THDPACK_ARROW_PYTHON}" -c
            "import pyarrow as pa; print(pa.__version__); print(pa.get_include()); print(pa.get_library_dirs()[0])"
    OUTPUT_VARIABLE arrow_lines ERROR_VARIABLE arrow_error RESULT_VARIABLE arrow_rc
    OUTPUT_STRIP_TRAILING_WHITESPACE)
  if(NOT arrow_rc EQUAL 0)
    thdpack_parquet_unavailable("${THDPACK_ARROW_PYTHON} cannot import pyarrow")
    return()
  endif()
  string(REPLACE "\n" ";" arrow_lines "${arrow_lines}")
  list(GET arrow_lines 0 arrow_version)
  list(GET arrow_lines 1 arrow_include)
  list(GET arrow_lines 2 arrow_libdir)
  # libarrow.so.2500, not libarrow_python.so.2500 nor libarrow.so.2500.1.0
  file(GLOB arrow_so LIST_DIRECTORIES false "${arrow_libdir}/libarrow.so.[0-9]*")
  file(GLOB parquet_so LIST_DIRECTORIES false "${arrow_libdir}/libparquet.so.[0-9]*")
  list(FILTER arrow_so EXCLUDE REGEX "\\.so\\.[0-9]+\\.")
  list(FILTER parquet_so EXCLUDE REGEX "\\.so\\.[0-9]+\\.")
  list(LENGTH arrow_so n_arrow)
  list(LENGTH parquet_so n_parquet)
  if(NOT n_arrow EQUAL 1 OR NOT n_parquet EQUAL 1 OR NOT EXISTS "${arrow_include}/parquet/arrow/reader.h")
    thdpack_parquet_unavailable("pyarrow ${arrow_version} in ${arrow_libdir} lacks one libarrow.so.N, libparquet.so.N or the Parquet headers")
    return()
  endif()
  add_library(thdpack_arrow_core SHARED IMPORTED GLOBAL)
  set_target_properties(thdpack_arrow_core PROPERTIES IMPORTED_LOCATION "${arrow_so}"
                        INTERFACE_SYSTEM_INCLUDE_DIRECTORIES "${arrow_include}"
                        INTERFACE_INCLUDE_DIRECTORIES "${arrow_include}")
  add_library(thdpack_parquet_core SHARED IMPORTED GLOBAL)
  set_target_properties(thdpack_parquet_core PROPERTIES IMPORTED_LOCATION "${parquet_so}"
                        INTERFACE_LINK_LIBRARIES thdpack_arrow_core)
  add_library(thdpack_arrow_wheel INTERFACE IMPORTED GLOBAL)
  set_target_properties(thdpack_arrow_wheel PROPERTIES
                        INTERFACE_LINK_LIBRARIES "thdpack_parquet_core;thdpack_arrow_core")
  add_library(thdpack::arrow_wheel ALIAS thdpack_arrow_wheel)
  set(THDPACK_HAVE_PARQUET ON)
  set(THDPACK_PYARROW_VERSION "${arrow_version}")
  set(THDPACK_ARROW_LIBDIR "${arrow_libdir}")
  message(STATUS "Parquet sources: on (pyarrow ${arrow_version}: ${arrow_libdir})")
endif()
