"""Type stubs of the _thdpack extension module (kept by hand next to python/src/*.cpp)."""

from typing import Any, Callable, Literal, NoReturn, Optional, Sequence, Union

import os

import numpy as np
import numpy.typing as npt

IntArray = npt.ArrayLike
SampleLike = Union[dict, Sequence[int], npt.NDArray[np.int64]]
StrPath = Union[str, bytes, "os.PathLike[str]", "os.PathLike[bytes]"]
GroupKind = Literal["tp", "cp", "dp", "pp", "dp_cp", "ep"]

__version__: str
HAVE_MPI: bool

class Error(Exception): ...
class InvalidArgument(Error, ValueError): ...
class CommError(Error, RuntimeError): ...
class InternalError(Error, RuntimeError): ...

# ---- layout, cost, FLOPs ----
class Topology:
    def __init__(self, *, tp: int = 1, cp: int = 1, dp: int = 1, pp: int = 1, ep: int = 1,
                 vpp: int = 1, vpp_group: int = 0, order: str = "tp-cp-ep-dp-pp") -> None: ...
    tp: int
    cp: int
    dp: int
    pp: int
    ep: int
    vpp: int
    order: str
    world_size: int
    microbatch_multiple: int
    def coordinates(self, rank: int) -> dict[str, int]: ...
    def rank_of(self, *, tp: int = 0, cp: int = 0, dp: int = 0, pp: int = 0) -> int: ...
    def group_ranks(self, kind: GroupKind, rank: int) -> list[int]: ...
    def all_groups(self, kind: GroupKind) -> list[list[int]]: ...
    def check_world_size(self, world_size: int) -> None: ...

class ModelSpec:
    def __init__(self, *, name: str = "custom", hidden: int, layers: int, heads: int,
                 kv_heads: int, head_dim: int, ffn: int, vocab: int, swiglu: bool = True,
                 moe_topk: int = 1) -> None: ...
    name: str
    hidden: int
    layers: int
    heads: int
    kv_heads: int
    head_dim: int
    ffn: int
    vocab: int
    swiglu: bool
    moe_topk: int

def model_preset_names() -> list[str]: ...
def model_preset(name: str) -> ModelSpec: ...
def training_flops(model: ModelSpec, s1: float, s2: float) -> float: ...

class CostModel:
    def __init__(self, *, linear: float = 1.0, quadratic: float = 0.0) -> None: ...
    @staticmethod
    def from_model(model: ModelSpec) -> CostModel: ...
    linear: float
    quadratic: float
    def cost(self, length: int) -> float: ...

# ---- data ----
class Dataset:
    size: int
    def __len__(self) -> int: ...
    def length(self, index: int) -> int: ...
    def lengths(self, start: int, stop: int) -> npt.NDArray[np.int64]: ...
    def sample(self, index: int) -> dict[str, Any]: ...
    def samples(self, indices: Sequence[int]) -> list[dict[str, Any]]: ...
    def describe(self) -> str: ...

def mock_dataset(config_json: str, base_dir: StrPath = "") -> Dataset: ...
def default_mock_config(seq_length: int) -> str: ...
def load_jsonl_dataset(path: StrPath, *, ignore_unknown_keys: bool = False,
                       labels_shifted: bool = False) -> Dataset: ...
def read_lengths_file(path: StrPath) -> npt.NDArray[np.int64]: ...
def workload_names() -> list[str]: ...
def workload(name: str) -> dict[str, Any]: ...
def default_global_batch(workload: str, dp: int) -> int: ...

class GlobalBatch:
    ids: npt.NDArray[np.int64]
    real_lengths: npt.NDArray[np.int64]
    padded_lengths: npt.NDArray[np.int64]
    samples_per_rank: npt.NDArray[np.int64]
    group_ids: npt.NDArray[np.int64]
    truncated: int
    samples_carry_targets: bool
    def __len__(self) -> int: ...

def global_batch_indices(step: int, global_batch: int, dataset_size: int, *, dp: int = 0,
                         order: str = "contiguous") -> npt.NDArray[np.int64]: ...
def make_global_batch(dataset: Dataset, step: int, *, global_batch: int, dp: int,
                      divisor: int = 1, capacity: int, oversize: str = "error",
                      order: str = "contiguous") -> GlobalBatch: ...

def open_indexed_dataset(data_path: StrPath, size: int = 0) -> Dataset: ...

class IndexedDatasetWriter:
    def __init__(self, prefix: StrPath, dtype: str = "int32") -> None: ...
    def add_sequence(self, tokens: IntArray) -> None: ...
    def end_document(self) -> None: ...
    def finish(self) -> None: ...

def pack_offline(lengths: IntArray, *, capacity: int, strategy: str = "bfd", divisor: int = 1,
                 seed: Optional[int] = None, group_ids: Optional[IntArray] = None,
                 flat: bool = False) -> dict[str, Any]: ...

class PackedDataset:
    @staticmethod
    def open(path: StrPath) -> PackedDataset: ...
    num_packs: int
    capacity: int
    divisor: int
    def __len__(self) -> int: ...
    def pack(self, index: int) -> npt.NDArray[np.int64]: ...
    def batch(self, index: int, *, tail_align: str = ..., tail_multiple: int = ...,
              tail_policy: str = ..., fixed_cu_seqlens_entries: int = ...) -> PackedBatch: ...

# ---- scheduling ----
class Plan:
    dp: int
    cp: int
    ranks: int
    is_fixed_cp: bool
    num_microbatches: int
    num_packs: int
    def groups(self) -> list[list[tuple[int, int, list[int]]]]: ...
    def pack(self, microbatch: int, replica: int) -> npt.NDArray[np.int64]: ...
    def to_list(self) -> list[list[list[int]]]: ...

def scheduler_names(layout: Optional[str] = None) -> list[str]: ...
def schedule(padded_lengths: IntArray, *, dp: int, max_seqlen_per_dp_cp_rank: int,
             scheduler: str = "balanced", cp: int = 1, pp: int = 1, microbatch_multiple: int = 1,
             cost: Optional[CostModel] = None, ids: Optional[IntArray] = None,
             samples_per_rank: Optional[IntArray] = None,
             group_ids: Optional[IntArray] = None,
             max_sequences_per_pack: int = 0, min_cp: int = 1, model: Optional[str] = None,
             gpu_tflops: float = 400.0, cp_link_gbps: float = 50.0,
             cp_step_overhead_us: float = 20.0) -> Plan: ...
def dynamic_cp_scheduler_names() -> list[str]: ...
def schedule_dynamic_cp(padded_lengths: IntArray, *, dp: int, cp: int,
                        max_seqlen_per_dp_cp_rank: int, scheduler: str = "default_dynamic_cp",
                        microbatch_multiple: int = 1, min_cp: int = 1,
                        ids: Optional[IntArray] = None, model: Optional[str] = None,
                        gpu_tflops: float = 400.0, cp_link_gbps: float = 50.0,
                        cp_step_overhead_us: float = 20.0
                        ) -> list[list[tuple[int, int, list[int]]]]: ...
def evaluate_plan(plan: Plan, padded_lengths: IntArray, *, max_seqlen_per_dp_cp_rank: int,
                  cp: int = 1, pp: int = 1, cost: CostModel = ..., ids: Optional[IntArray] = None,
                  real_lengths: Optional[IntArray] = None) -> dict[str, Any]: ...
# Packs: one index array per pack, or with flat=True (items, offsets), pack p being
# items[offsets[p]:offsets[p+1]].
Packs = Union[list[npt.NDArray[np.int64]], tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]]
def best_fit_decreasing(lengths: IntArray, capacity: int, *, flat: bool = False) -> Packs: ...
def first_fit_decreasing(lengths: IntArray, capacity: int, *, flat: bool = False) -> Packs: ...
def next_fit(lengths: IntArray, capacity: int, *, flat: bool = False) -> Packs: ...
def bins_lower_bound_l1(lengths: IntArray, capacity: int) -> int: ...
def bins_lower_bound_l2(lengths: IntArray, capacity: int) -> int: ...

# ---- packing ----
def padding_divisor(*, cp: int = 1, tp: int = 1, sequence_parallel: bool = False,
                    dynamic_cp: bool = False, dp: int = 1, min_cp: int = 1) -> int: ...

class PackedBatch:
    tokens: npt.NDArray[np.int64]
    labels: npt.NDArray[np.int64]
    loss_mask: npt.NDArray[np.float32]
    position_ids: npt.NDArray[np.int64]
    padding_mask: npt.NDArray[np.bool_]
    cu_seqlens: npt.NDArray[np.int32]
    cu_seqlens_padded: npt.NDArray[np.int32]
    sample_ids: npt.NDArray[np.int64]
    max_seqlen: int
    cp_size: int
    cp_rank: int
    cp_mode: str
    num_rows: int
    def __len__(self) -> int: ...

def pack(samples: Sequence[SampleLike], *, divisor: int = 1, capacity: int = 0, pad_id: int = 0,
         ignore_id: int = -100, ignore_masked_labels: bool = False,
         pad_positions: str = "continue", tail_align: str = "none",
         tail_multiple: int = 0, tail_policy: str = "append_dummy_seq",
         fixed_cu_seqlens_entries: int = 0) -> PackedBatch: ...
def check_pack_invariants(batch: PackedBatch, *, divisor: int = 1, capacity: int = 0,
                          pad_id: int = 0, ignore_id: int = -100,
                          pad_positions: str = "continue") -> None: ...
def cp_slice(batch: PackedBatch, cp: int, rank: int, mode: str = "zigzag") -> PackedBatch: ...
def cp_unslice(slices: Sequence[PackedBatch]) -> PackedBatch: ...
def cp_global_rows(cu_seqlens: IntArray, cu_seqlens_padded: IntArray, cp: int, rank: int,
                   mode: str = "zigzag") -> npt.NDArray[np.int64]: ...

# ---- communication and the pipeline ----
class Communicator:
    rank: int
    size: int
    backend: str
    stats: dict[str, int]
    def barrier(self) -> None: ...

class CallbackCommunicator(Communicator):
    def __init__(self, impl: Any) -> None: ...

class MpiCommunicator(Communicator):
    @staticmethod
    def from_mpi4py(comm: Any, timeout_seconds: float = 600.0) -> MpiCommunicator: ...

class PipelineOptions:
    def __init__(self, *, topology: Topology, max_seqlen_per_dp_cp_rank: int,
                 scheduler: str = "balanced", cost: CostModel = ..., reading: str = "megatron",
                 sequence_parallel: bool = False, cp_mode: str = "zigzag",
                 oversize: str = "error", pad_id: int = 0, ignore_id: int = -100,
                 ignore_masked_labels: bool = False,
                 pad_positions: str = "continue", tail_align: str = "none",
                 tail_multiple: int = 0, tail_policy: str = "append_dummy_seq",
                 fixed_cu_seqlens_entries: int = 0,
                 max_sequences_per_pack: int = 0,
                 tokens_on_last_stage: bool = False, model: str = "",
                 gpu_tflops: float = 400.0, cp_link_gbps: float = 50.0,
                 cp_step_overhead_us: float = 20.0, min_cp: int = 1) -> None: ...
    @staticmethod
    def fields() -> list[dict[str, Any]]: ...
    topology: Topology
    max_seqlen_per_dp_cp_rank: int
    scheduler: str
    def describe(self) -> str: ...

class PlannedBatch:
    def __init__(self, *, scheduler: str, ids: IntArray, padded_lengths: IntArray,
                 plan: Plan) -> None: ...
    scheduler: str
    ids: list[int]
    padded_lengths: list[int]
    plan: Plan
    def to_json(self) -> str: ...
    @staticmethod
    def from_json(text: str) -> PlannedBatch: ...

def read_plan_file(path: StrPath) -> list[dict[str, PlannedBatch]]: ...
def planned_batch(result: StepResult, scheduler: str) -> PlannedBatch: ...

class StepResult:
    batch: GlobalBatch
    plan: Plan
    num_microbatches: int
    microbatches: list[PackedBatch]
    sums: dict[str, float]
    traffic: dict[str, float]
    virtual_stages: list[dict[str, bool]]
    dynamic_cp: bool
    dynamic_cp_plan: Optional[list[list[tuple[int, int, list[int]]]]]
    cp_groups: list[dict[str, Any]]

class Pipeline:
    def __init__(self, world: Communicator, options: PipelineOptions, *,
                 dp_group: Optional[Communicator] = None,
                 tp_group: Optional[Communicator] = None) -> None: ...
    def run_step(self, local_samples: Sequence[dict], *,
                 group_ids: Optional[IntArray] = None,
                 plan: Optional[PlannedBatch] = None) -> StepResult: ...
    def fail_step(self, error: str) -> NoReturn: ...
    reads_data: bool
    coordinates: dict[str, int]
    options: PipelineOptions

def reads_data(topology: Topology, reading: str, rank: int) -> bool: ...
def stage_fields(topology: Topology, pp_rank: int) -> dict[str, bool]: ...
def plan_global_batch(batch: GlobalBatch, options: PipelineOptions) -> Plan: ...
def gather_global_batch(world: Communicator, options: PipelineOptions,
                        local_samples: Sequence[dict]) -> GlobalBatch: ...
def reference_microbatches(batch: GlobalBatch, plan: Plan, sample_of: Callable[[int], dict],
                           options: PipelineOptions, rank: int) -> list[PackedBatch]: ...
def verify_step(world: Communicator, options: PipelineOptions, result: StepResult,
                local_samples: Sequence[dict], sample_of: Callable[[int], dict]) -> None: ...

# MoE expert-parallel dispatch and combine (thdpack.moe re-exports these with DeepEP's names).
class DispatchHandle:
    hidden: int
    k: int
    num_tokens: int
    padded_tokens: int
    send_rows: np.ndarray
    recv_rows: np.ndarray
    num_recv_rows: int

def moe_dispatch_layout(topk_idx: np.ndarray, num_experts: int,
                        ranks: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]: ...
def moe_dispatch(comm: Communicator, x: np.ndarray, topk_idx: np.ndarray,
                 topk_weights: np.ndarray, num_experts: int, expert_alignment: int = 1,
                 padded: bool = False, pad_alignment: int = 64,
                 pad_group: Optional[Communicator] = None
                 ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray,
                            DispatchHandle]: ...
def moe_combine(comm: Communicator, x: np.ndarray, handle: DispatchHandle) -> np.ndarray: ...
def moe_dispatch_backward(comm: Communicator, grad: np.ndarray,
                          handle: DispatchHandle) -> np.ndarray: ...
def moe_combine_backward(comm: Communicator, grad: np.ndarray,
                         handle: DispatchHandle) -> np.ndarray: ...
def moe_combine_values(comm: Communicator, values: np.ndarray,
                       handle: DispatchHandle) -> np.ndarray: ...

# Multimodal intra-microbatch reordering. A multimodal sample is a dict of arrays: "id" (int),
# "input_ids" int64[L], and any other fields (int64, int32, uint8 or float32), e.g.
# "pixel_values" float32[patches, dim] and "image_grid_thw" int64[images, 3].
MultimodalSample = dict[str, Any]
ReorderedWindow = tuple[list[list[MultimodalSample]], list[npt.NDArray[np.int64]], dict[str, Any]]

class ReorderCost:
    def __init__(self, *, vision_weight: float = 1.0, text_weight: float = 0.0,
                 image_token_id: int = -1, spatial_merge_size: int = 2, pad_id: int = 0) -> None: ...
    vision_weight: float
    text_weight: float
    image_token_id: int
    spatial_merge_size: int
    pad_id: int

def image_patches(input_ids: IntArray, cost: ReorderCost) -> int: ...
def sample_cost(input_ids: IntArray, cost: ReorderCost) -> float: ...
def canonical_groups(module_dp_sizes: Sequence[int]) -> int: ...
def owned_groups(groups: int, dp: int, rank: int) -> tuple[int, int]: ...
def shard_positions(microbatch_size: int, dp: int, rank: int) -> tuple[int, int]: ...

class GroupAssignment:
    groups: int
    members: list[npt.NDArray[np.int64]]
    group_cost: npt.NDArray[np.float64]
    group_of: npt.NDArray[np.int64]

def assign_groups(costs: npt.ArrayLike, groups: int, *,
                  method: Literal["refined", "longest_first"] = "refined",
                  max_swaps: int = 1000) -> GroupAssignment: ...

class VisionLanguageWorkload:
    def __init__(self) -> None: ...
    seed: int
    text_only_fraction: float
    mean_images: float
    max_images: int
    min_side: int
    max_side: int
    median_text_tokens: int
    pixel_dim: int
    image_token_id: int
    spatial_merge_size: int

def vl_sample(workload: VisionLanguageWorkload, index: int) -> MultimodalSample: ...
def vl_cost(workload: VisionLanguageWorkload, *, vision_weight: float = 1.0,
            text_weight: float = 0.0) -> ReorderCost: ...
def pack_language_shard(samples: Sequence[MultimodalSample], *, pad_id: int = 0,
                        ignore_id: int = -100, divisor: int = 1) -> PackedBatch: ...

class ReorderExchange:
    def __init__(self, group: Communicator, *, microbatch_size: int, window: int = 1,
                 cost: ReorderCost = ..., method: Literal["refined", "longest_first"] = "refined",
                 max_swaps: int = 1000, module_dp_sizes: Optional[Sequence[int]] = None,
                 reorder: bool = True, check_vision: bool = True,
                 max_exchange_bytes: int = 2147483647) -> None: ...
    def exchange(self, shards: Sequence[Sequence[MultimodalSample]]) -> ReorderedWindow: ...
    def start(self, shards: Sequence[Sequence[MultimodalSample]]) -> None: ...
    def finish(self) -> ReorderedWindow: ...
    @property
    def in_flight(self) -> bool: ...
    @property
    def groups(self) -> int: ...
