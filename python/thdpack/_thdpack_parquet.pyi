# Type stubs of the _thdpack_parquet extension module (the Parquet and Arrow readers; needs pyarrow
# imported first: use thdpack.load_parquet_dataset and thdpack.load_hf_dataset).
from typing import Any, Optional, Sequence, Union

import os

from ._thdpack import Dataset

StrPath = Union[str, bytes, "os.PathLike[str]", "os.PathLike[bytes]"]
Paths = Union[StrPath, Sequence[StrPath]]

def load_parquet_dataset(paths: Paths, *, tokens_column: str = "input_ids",
                         loss_mask_column: Optional[str] = None,
                         labels_column: Optional[str] = None, labels_shifted: bool = False,
                         bridge_packed: bool = False) -> Dataset: ...
def load_arrow_dataset(paths: Paths, *, tokens_column: str = "input_ids",
                       loss_mask_column: Optional[str] = None,
                       labels_column: Optional[str] = None, labels_shifted: bool = False,
                       bridge_packed: bool = False) -> Dataset: ...
def load_arrow_stream_dataset(stream: Any, *, name: str, rows: Any = None,
                              tokens_column: str = "input_ids",
                              loss_mask_column: Optional[str] = None,
                              labels_column: Optional[str] = None, labels_shifted: bool = False,
                              bridge_packed: bool = False) -> Dataset: ...

_pack_source_opener: Any
