"""thdpack: the packed-sequence (THD) data layer for distributed LLM training.

The C++ core, communicators and pipeline (module ``thdpack._thdpack``), re-exported here:

* planning: ``schedule``, ``evaluate_plan``, ``Plan``, ``scheduler_names``, ``Topology``,
  ``CostModel``, ``model_preset``, ``training_flops``
* packing: ``pack``, ``PackedBatch``, ``padding_divisor``, ``cp_slice``, ``cp_unslice``,
  ``cp_global_rows``, offline bin packing (``best_fit_decreasing`` ...)
* data: ``mock_dataset``, ``load_jsonl_dataset``, ``workload``, ``make_global_batch``
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
