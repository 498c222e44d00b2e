"""thdpack: the packed-sequence (THD) data layer for distributed LLM training.

The C++ core, communicators and pipeline (module ``thdpack._thdpack``), re-exported here:

* planning: ``schedule``, ``evaluate_plan``, ``Plan``, ``scheduler_names``, ``Topology``,
  ``CostModel``, ``model_preset``, ``training_flops``
* packing: ``pack``, ``PackedBatch``, ``padding_divisor``, ``cp_slice``, ``cp_unslice``,
  ``cp_global_rows``, offline bin packing (``best_fit_decreasing`` ...)
* data: ``mock_dataset``, ``load_jsonl_dataset``, ``workload``, ``make_global_batch``; with
  pyarrow, ``load_parquet_dataset`` and ``load_hf_dataset`` (Parquet, Hugging Face datasets)
* multimodal reordering: ``ReorderExchange``, ``ReorderCost``, ``sample_cost``,
  ``assign_groups``, ``canonical_groups``, ``owned_groups``, ``shard_positions``,
  ``pack_language_shard``, the synthetic ``VisionLanguageWorkload`` / ``vl_sample``
* MoE expert parallelism: ``thdpack.moe`` (numpy), ``thdpack.torch.moe_dispatch``/``moe_combine``
* distribution: ``Pipeline``, ``PipelineOptions``, ``StepResult``, ``verify_step``,
  ``reference_microbatches``, communicators (``MpiCommunicator.from_mpi4py``,
  ``thdpack.comm.TorchCommunicator``)

PyTorch users start from ``thdpack.torch``. Errors: ``InvalidArgument`` (a ValueError) for bad
input, ``CommError`` and ``InternalError`` (RuntimeErrors); all are ``thdpack.Error``.
"""

from ._thdpack import *  # noqa: F401,F403  (the names are listed in __all__)
from ._thdpack import __doc__ as _module_doc  # noqa: F401
from ._thdpack import __version__  # noqa: F401  (from CMake's project version)

__all__ = [
    # errors
    "Error", "InvalidArgument", "CommError", "InternalError",
    # planning
    "Topology", "ModelSpec", "model_preset", "model_preset_names", "training_flops", "CostModel",
    "Plan", "schedule", "scheduler_names", "evaluate_plan", "schedule_dynamic_cp",
    "dynamic_cp_scheduler_names", "PlannedBatch", "read_plan_file", "planned_batch",
    # packing
    "PackedBatch", "pack", "padding_divisor", "check_pack_invariants", "cp_slice", "cp_unslice",
    "cp_global_rows", "best_fit_decreasing", "first_fit_decreasing", "next_fit",
    "bins_lower_bound_l1", "bins_lower_bound_l2",
    # data
    "Dataset", "mock_dataset", "default_mock_config", "load_jsonl_dataset", "read_lengths_file",
    "workload", "workload_names", "default_global_batch", "GlobalBatch", "global_batch_indices",
    "make_global_batch", "open_indexed_dataset", "IndexedDatasetWriter", "pack_offline",
    "PackedDataset",
    # multimodal reordering
    "ReorderCost", "image_patches", "sample_cost", "canonical_groups", "owned_groups",
    "shard_positions", "GroupAssignment", "assign_groups", "VisionLanguageWorkload", "vl_sample",
    "vl_cost", "pack_language_shard", "ReorderExchange",
    # distribution
    "Communicator", "CallbackCommunicator", "Pipeline", "PipelineOptions", "StepResult",
    "reads_data", "stage_fields", "gather_global_batch", "plan_global_batch",
    "reference_microbatches", "verify_step", "HAVE_MPI",
]
if HAVE_MPI:  # noqa: F405
    __all__.append("MpiCommunicator")


def load_parquet_dataset(paths, *, tokens_column: str = "input_ids",
                         loss_mask_column: "str | None" = None, labels_column: "str | None" = None,
                         labels_shifted: bool = False, bridge_packed: bool = False) -> "Dataset":
    """Pre-tokenized Parquet as a ``Dataset``: the reader of ``thdpack ... --parquet``.

    ``paths``: a file, a folder (every ``*.parquet`` in it, sorted) or a glob, or a list of them,
    read as one dataset in order; sample i is row i counting across the files. ``tokens_column``
    holds the token ids; ``loss_mask_column`` (0/1 per token) or ``labels_column`` (-100 where
    ignored) the supervision. ``bridge_packed=True`` reads Megatron-Bridge packed Parquet (what
    ``thdpack pack --parquet-out`` writes): each row gives back its samples, split at
    ``seq_start_id``, with the loss mask of each token. Needs pyarrow; bad data raises
    ``InvalidArgument`` naming the file and row.
    """
    from . import _parquet
    return _parquet.load_parquet_dataset(
        paths, tokens_column=tokens_column, loss_mask_column=loss_mask_column,
        labels_column=labels_column, labels_shifted=labels_shifted, bridge_packed=bridge_packed)


def load_hf_dataset(dataset, *, tokens_column: str = "input_ids",
                    loss_mask_column: "str | None" = None, labels_column: "str | None" = None,
                    labels_shifted: bool = False, bridge_packed: bool = False) -> "Dataset":
    """A Hugging Face ``datasets.Dataset`` (or its rows) as a ``Dataset``, no row copied.

    ``dataset`` is one of:

    * a ``datasets.Dataset``: its Arrow table (memory-mapped from its cache files, or in memory)
      is handed over through the Arrow C stream interface, so column renames, casts and removed
      columns are seen as ``datasets`` sees them. An indices mapping (``select``, ``shuffle``,
      ``filter``, ``train_test_split``) is followed: sample i is ``dataset[i]`` (8 bytes a sample
      for the mapping; ``flatten_indices()`` first makes the table itself that order).
    * a ``pyarrow.Table`` (or anything with ``__arrow_c_stream__``);
    * a path, or a list of them: a folder written by ``Dataset.save_to_disk`` (its Arrow files in
      the order of its ``state.json``), Arrow IPC files or globs, read as ``--hf-dataset`` reads
      them (memory-mapped).

    The columns and ``bridge_packed`` are those of ``load_parquet_dataset``.
    """
    import os
    from . import _parquet
    options = dict(tokens_column=tokens_column, loss_mask_column=loss_mask_column,
                   labels_column=labels_column, labels_shifted=labels_shifted,
                   bridge_packed=bridge_packed)
    if isinstance(dataset, (str, bytes, os.PathLike, list, tuple)):
        return _parquet.load_arrow_dataset(dataset, **options)
    name = "Arrow table"
    table = dataset
    rows = None
    if hasattr(dataset, "_indices") and hasattr(dataset, "data") and hasattr(dataset, "cache_files"):
        if getattr(dataset, "_indices", None) is not None:
            # select / shuffle / filter / a split: sample i is row indices[i] of the table.
            import numpy as np
            rows = np.asarray(dataset._indices.column("indices").to_numpy(), dtype=np.int64)
        files = [f["filename"] for f in dataset.cache_files]
        name = (f"datasets.Dataset ({files[0]}" + (f" and {len(files) - 1} more" if len(files) > 1
                                                     else "") + ")") if files else \
            "datasets.Dataset (in memory)"
        table = dataset.data.table
    if hasattr(table, "to_table") and not hasattr(table, "__arrow_c_stream__"):
        table = table.to_table()
    if not hasattr(table, "__arrow_c_stream__"):
        raise InvalidArgument(  # noqa: F405
            "load_hf_dataset takes a datasets.Dataset, a pyarrow.Table (or another object with "
            f"__arrow_c_stream__), or paths; not {type(dataset).__name__}")
    return _parquet.load_arrow_stream_dataset(table.__arrow_c_stream__(), name=name, rows=rows,
                                              **options)


# Defined here, not in _thdpack: their reader is the _thdpack_parquet module, imported on first use.
PYTHON_DEFINED = ("load_parquet_dataset", "load_hf_dataset")
__all__ += list(PYTHON_DEFINED)
