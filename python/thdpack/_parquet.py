"""The Parquet and Arrow readers of thdpack (the ``_thdpack_parquet`` extension module).

They are linked with the Arrow and Parquet C++ libraries of pyarrow's wheel, so pyarrow is
imported first: that loads those very libraries, which the extension module then uses. Without
pyarrow, or in a build without Parquet support, importing this module raises ImportError saying
how to get it.
"""

try:
    import pyarrow  # noqa: F401  (loads libarrow and libparquet for the module below)
except ImportError as e:  # pragma: no cover - pyarrow is in the test environment
    raise ImportError(
        "thdpack reads Parquet and Arrow data with pyarrow's C++ libraries: pip install pyarrow "
        f"({e})") from e

try:
    from thdpack._thdpack_parquet import (  # noqa: F401
        _pack_source_opener, load_arrow_dataset, load_arrow_stream_dataset, load_parquet_dataset)
except ImportError as e:
    raise ImportError(
        "this thdpack was built without Parquet support (no _thdpack_parquet module, or it cannot "
        "load pyarrow's libraries); build it with -DTHDPACK_WITH_PARQUET=ON "
        f"-DTHDPACK_ARROW_PYTHON=PYTHON (a Python with pyarrow) ({e})") from e
