"""Hugging Face / TRL: ``DataCollatorWithFlattening``, name for name, on thdpack's packing.

    from thdpack.hf import DataCollatorWithFlattening   # was: from transformers import ...
    collator = DataCollatorWithFlattening(return_flash_attn_kwargs=True)
    trainer = Trainer(model=model, data_collator=collator, ...)

The constructor and the call take what transformers' collator takes, with its defaults:
``DataCollatorWithFlattening(return_tensors="pt", *, return_position_ids=True, separator_id=-100,
return_flash_attn_kwargs=False, return_seq_idx=False)`` and ``collator(features,
return_tensors=None, separator_id=None)``. On the features transformers' collator accepts (lists,
1-D arrays or tensors of token ids, optional ``labels`` of the same length), the output is its
output key for key: same keys, dtypes, shapes and values.

- ``input_ids``, ``labels``, ``position_ids``: int64 ``[1, T]``; labels are *unshifted* (the model
  shifts them) with ``separator_id`` (-100) at the first position of every sequence, so no
  sequence learns to predict the next one's first token; positions restart at 0 per sequence;
- with ``return_flash_attn_kwargs``: ``cu_seq_lens_q`` = ``cu_seq_lens_k`` (int32 ``[B+1]``) and
  ``max_length_q`` = ``max_length_k`` (Python ints);
- with ``return_seq_idx``: ``seq_idx`` int32 ``[1, T]``.

Features may also be what a tokenizer gives with ``return_tensors="pt"`` and padding: ``[1, L]``
tensors, and an ``attention_mask`` whose 0 positions are dropped (transformers' collator would
flatten the pad tokens into the sequence). A batch where some features carry ``labels`` and others
do not is refused (transformers' takes the first feature's word for all of them). A feature
without tokens is refused.

thdpack adds what HF's collator lacks, as keywords that are off by default:

- ``pad_to_multiple_of=d``: every sequence is padded to a multiple of ``d`` (pad token
  ``pad_token_id``, label -100, position ids keep counting); ``cu_seq_lens_*`` and
  ``max_length_*`` then describe the padded sequences, which is what varlen attention needs for
  the physical layout (pads sit after the real tokens, so causal attention keeps real tokens clean);
- ``cp_size=c, cp_rank=r``: each sequence is padded to a multiple of ``2c`` and this rank keeps its
  zigzag chunks (Transformer Engine's layout, chunks ``r`` and ``2c-1-r`` of every sequence);
  ``cu_seq_lens_*`` stay global, as THD context-parallel attention expects. The rank's rows also
  carry ``shift_labels``: the labels shifted by one inside each sequence (the last position of
  every sequence gets -100) *before* the slice, the targets HF's and accelerate's
  context-parallel loss reads (``model(..., shift_labels=...)``): a slice's last token is trained
  on the next token of its own sequence, which may sit on another rank, and the per-token losses
  of all ranks add up to the unsliced loss. ``labels`` (unshifted, sliced) stay, but shifting them
  again inside a slice would train on tokens of the wrong chunk;
- ``return_thd_kwargs``: also ``cu_seqlens`` (real lengths), ``cu_seqlens_padded`` and
  ``max_seqlen``, the names of thdpack's and Megatron's packed batches.

``ThdCollator`` is the same collator with thdpack's older defaults: keyword-only arguments and
``return_flash_attn_kwargs=True``.
"""

from __future__ import annotations

from typing import Optional

import numpy as np

from . import _thdpack


def _flat(value, name: str, index: int) -> np.ndarray:
    if hasattr(value, "detach"):
        value = value.detach().cpu().numpy()
    array = np.asarray(value)
    if array.ndim == 2 and array.shape[0] == 1:
        array = array[0]
    if array.ndim != 1:
        raise _thdpack.InvalidArgument(
            f"feature {index}: {name} has shape {array.shape}; expected [L] or [1, L]")
    return array


def _integers(array: np.ndarray, name: str, index: int) -> np.ndarray:
    """int64 values of an integer array; floats (truncated) and bools (read as 0/1) are refused."""
    if array.size and (not np.issubdtype(array.dtype, np.integer) or array.dtype == np.bool_):
        raise _thdpack.InvalidArgument(
            f"feature {index}: {name} must be integers, not {array.dtype} values")
    return array.astype(np.int64)


class DataCollatorWithFlattening:
    """Flattens a list of tokenized features into one ``[1, T]`` row with varlen metadata."""

    def __init__(self, return_tensors: str = "pt", *, return_position_ids: bool = True,
                 separator_id: int = -100, return_flash_attn_kwargs: bool = False,
                 return_seq_idx: bool = False, pad_to_multiple_of: int = 1, pad_token_id: int = 0,
                 cp_size: int = 1, cp_rank: int = 0, return_thd_kwargs: bool = False):
        if pad_to_multiple_of < 1 or cp_size < 1 or not 0 <= cp_rank < cp_size:
            raise _thdpack.InvalidArgument(
                f"need pad_to_multiple_of >= 1, cp_size >= 1 and 0 <= cp_rank < cp_size; got "
                f"{pad_to_multiple_of}, {cp_size}, {cp_rank}")
        if return_tensors not in ("pt", "np"):
            raise _thdpack.InvalidArgument(f"return_tensors must be 'pt' or 'np', not {return_tensors!r}")
        self.return_tensors = return_tensors
        self.return_position_ids = return_position_ids
        self.separator_id = separator_id
        self.return_flash_attn_kwargs = return_flash_attn_kwargs
        self.return_seq_idx = return_seq_idx
        self.divisor = int(np.lcm(pad_to_multiple_of, 2 * cp_size if cp_size > 1 else 1))
        self.pad_token_id = pad_token_id
        self.cp_size = cp_size
        self.cp_rank = cp_rank
        self.return_thd_kwargs = return_thd_kwargs

    def _sequence(self, feature: dict, index: int, with_labels: bool):
        if "input_ids" not in feature:
            raise _thdpack.InvalidArgument(f"feature {index} has no 'input_ids'")
        ids = _integers(_flat(feature["input_ids"], "input_ids", index), "input_ids", index)
        if ids.size and ids.min() < 0:
            at = int(np.argmin(ids))
            raise _thdpack.InvalidArgument(
                f"feature {index}: input_ids[{at}] is {int(ids[at])}; token ids must be >= 0")
        if (feature.get("labels") is not None) != with_labels:
            raise _thdpack.InvalidArgument(
                f"feature {index} {'has no' if with_labels else 'has'} labels but feature 0 "
                f"{'has' if with_labels else 'has none'}; give labels to every feature or to none")
        labels = ids if not with_labels else _integers(
            _flat(feature["labels"], "labels", index), "labels", index)
        if labels.shape != ids.shape:
            raise _thdpack.InvalidArgument(
                f"feature {index}: labels has {labels.size} entries, input_ids {ids.size}")
        if feature.get("attention_mask") is not None:
            keep = _flat(feature["attention_mask"], "attention_mask", index).astype(bool)
            if keep.shape != ids.shape:
                raise _thdpack.InvalidArgument(
                    f"feature {index}: attention_mask has {keep.size} entries, input_ids {ids.size}")
            ids, labels = ids[keep], labels[keep]
        if ids.size == 0:
            raise _thdpack.InvalidArgument(f"feature {index} has no tokens")
        return ids, labels

    def __call__(self, features, return_tensors: Optional[str] = None,
                 separator_id: Optional[int] = None) -> dict:
        if len(features) == 0:
            raise _thdpack.InvalidArgument("no features to collate")
        kind = return_tensors or self.return_tensors
        if kind not in ("pt", "np"):
            raise _thdpack.InvalidArgument(f"return_tensors must be 'pt' or 'np', not {kind!r}")
        separator = self.separator_id if separator_id is None else separator_id
        with_labels = features[0].get("labels") is not None
        sequences = [self._sequence(f, i, with_labels) for i, f in enumerate(features)]
        real = np.array([ids.size for ids, _ in sequences], dtype=np.int64)
        padded = (real + self.divisor - 1) // self.divisor * self.divisor
        cu_real = np.concatenate([[0], np.cumsum(real)]).astype(np.int32)
        cu_padded = np.concatenate([[0], np.cumsum(padded)]).astype(np.int32)
        total = int(cu_padded[-1])
        input_ids = np.full(total, self.pad_token_id, dtype=np.int64)
        labels = np.full(total, -100, dtype=np.int64)
        for (ids, lab), start in zip(sequences, cu_padded[:-1]):
            input_ids[start:start + ids.size] = ids
            labels[start:start + ids.size] = lab
            labels[start] = separator
        per_row = {"input_ids": input_ids, "labels": labels}
        if self.return_position_ids:
            per_row["position_ids"] = np.arange(total, dtype=np.int64) - np.repeat(cu_padded[:-1], padded)
        if self.return_seq_idx:
            per_row["seq_idx"] = np.repeat(np.arange(len(sequences), dtype=np.int32), padded)
        rows = None
        if self.cp_size > 1:
            # The target of position t is the token at t + 1 of the same sequence, taken before
            # the slice: after it, t + 1 may be on another rank.
            shift = np.full(total, -100, dtype=np.int64)
            shift[:-1] = labels[1:]
            shift[cu_padded[1:] - 1] = -100
            per_row["shift_labels"] = shift
            rows = _thdpack.cp_global_rows(cu_real, cu_padded, self.cp_size, self.cp_rank)
        batch = {k: (v if rows is None else v[rows])[None, :] for k, v in per_row.items()}
        if self.return_flash_attn_kwargs:
            batch["cu_seq_lens_q"] = cu_padded
            batch["cu_seq_lens_k"] = cu_padded.copy()
            batch["max_length_q"] = batch["max_length_k"] = int(padded.max())
        if self.return_thd_kwargs:
            batch["cu_seqlens"] = cu_real
            batch["cu_seqlens_padded"] = cu_padded.copy()
            batch["max_seqlen"] = int(padded.max())
        return _to(batch, kind)


class ThdCollator(DataCollatorWithFlattening):
    """``DataCollatorWithFlattening`` with keyword-only arguments and flash-attention kwargs on."""

    def __init__(self, *, return_position_ids: bool = True, separator_id: int = -100,
                 return_flash_attn_kwargs: bool = True, return_seq_idx: bool = False,
                 pad_to_multiple_of: int = 1, pad_token_id: int = 0, cp_size: int = 1,
                 cp_rank: int = 0, return_thd_kwargs: bool = False, return_tensors: str = "pt"):
        super().__init__(return_tensors, return_position_ids=return_position_ids,
                         separator_id=separator_id,
                         return_flash_attn_kwargs=return_flash_attn_kwargs,
                         return_seq_idx=return_seq_idx, pad_to_multiple_of=pad_to_multiple_of,
                         pad_token_id=pad_token_id, cp_size=cp_size, cp_rank=cp_rank,
                         return_thd_kwargs=return_thd_kwargs)


def _to(batch: dict, kind: str) -> dict:
    if kind == "np":
        return batch
    import torch

    return {k: torch.from_numpy(np.ascontiguousarray(v)) if isinstance(v, np.ndarray) else v
            for k, v in batch.items()}
